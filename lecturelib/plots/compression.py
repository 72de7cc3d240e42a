"""Notebook 12's figures: sparse products, pruning and distillation, and compression's trade-offs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lecturelib.plots.vocab import (
    GB, check_fractions, check_series, finish, finish_panels, grouped_bars, label_axes, log_axes, power_law_guide, sweep,
)


def sparse_matmul_figure(
    sparsities: Sequence[float],
    dense_s: Sequence[float],
    csr_s: Sequence[float],
    dense_bytes: Sequence[float],
    csr_bytes: Sequence[float],
    *,
    crossover: float | None = None,
    title: str = "A dense and a CSR matmul as the weight loses entries",
) -> Figure:
    """Left: time per matmul against the fraction of zeros, dense and CSR (log y), the crossover marked; right: bytes."""
    check_fractions(sparsities, "sparsities")
    for name, series in (("dense_s", dense_s), ("csr_s", csr_s), ("dense_bytes", dense_bytes), ("csr_bytes", csr_bytes)):
        if len(series) != len(sparsities) or any(not math.isfinite(v) or v <= 0 for v in series):
            raise ValueError(f"{name} must hold one positive, finite value per sparsity")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    percent = [100 * s for s in sparsities]
    left.plot(percent, [t * 1e3 for t in dense_s], "o-", label="dense kernel (zeros multiplied)")
    left.plot(percent, [t * 1e3 for t in csr_s], "s-", label="CSR (torch.sparse)")
    if crossover is not None:
        left.axvline(100 * crossover, color="black", linestyle="--", linewidth=1,
                     label=f"CSR faster in every round from {crossover:.0%}")
    left.set_yscale("log")
    right.plot(percent, [b / 2**20 for b in dense_bytes], "o-", label="dense: every entry")
    right.plot(percent, [b / 2**20 for b in csr_bytes], "s-", label="CSR: values + column indices + row offsets")
    right.set_ylim(bottom=0)
    for ax, ylabel, panel in ((left, "ms per matmul (median round)", "Time"), (right, "MiB of the weight", "Bytes")):
        ax.set_xlim(0, 100)
        label_axes(ax, "zeros in the weight (%)", ylabel, panel, legend="lower left")
    return finish_panels(fig, title)


def pruning_speed_figure(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str = "What each kind of pruning buys in time",
) -> Figure:
    """Time ÷ the unpruned time against the share of multiply-adds kept (log-log), with "∝ work" and "no saving" guides."""
    # x: the multiply-adds a perfect kernel would still do (1 − sparsity, or the share of hidden units kept);
    # y: what the kernel actually took, relative to the unpruned weight's time in the same comparison.
    if not series:
        raise ValueError("need at least one series")
    for label, (kept, ratio) in series.items():
        check_series(kept, ratio, f"{label}: kept", f"{label}: time ratio")
        if any(k > 1 for k in kept):
            raise ValueError(f"{label}: the share of work kept is at most 1")
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for label, (kept, ratio) in series.items():
        ax.plot(kept, ratio, "o-", label=label)
    lo = min(min(kept) for kept, _ in series.values())
    guide = [lo, 1.0]
    ax.plot(guide, guide, color="gray", linestyle="--", label="time ∝ multiply-adds kept")
    ax.plot(guide, [1.0, 1.0], color="black", linestyle=":", label="no saving")
    log_axes(ax, 2, 2)
    return finish(fig, ax, "share of the multiply-adds kept", "time ÷ time of the unpruned weight", title,
                  legend="lower right")


def pruning_accuracy_figure(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    *,
    dense_accuracy: float,
    chance_accuracy: float,
    title: str = "Accuracy after pruning, without and with a fine-tune",
) -> Figure:
    """Test accuracy against the fraction pruned: per method, dashed before and solid after fine-tuning."""
    if not curves:
        raise ValueError("need at least one method")
    for label, (pruned, before, after) in curves.items():
        check_fractions(pruned, f"{label}: pruned")
        check_fractions([*before, *after], f"{label}: accuracies")
        if not len(before) == len(after) == len(pruned):
            raise ValueError(f"{label}: one accuracy before and one after per fraction pruned")
    check_fractions([dense_accuracy, chance_accuracy], "dense_accuracy and chance_accuracy")
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for k, (label, (pruned, before, after)) in enumerate(curves.items()):
        color, marker = f"C{k}", "osD^v<>"[k % 7]  # a marker per method: points at the same fraction stay apart
        percent = [100 * p for p in pruned]
        ax.plot(percent, [100 * a for a in before], linestyle="--", marker=marker, color=color, label=f"{label}: pruned")
        ax.plot(percent, [100 * a for a in after], linestyle="-", marker=marker, color=color, label=f"{label}: + fine-tune")
    ax.axhline(100 * dense_accuracy, color="black", linewidth=1, label="unpruned")
    ax.axhline(100 * chance_accuracy, color="gray", linestyle=":", label="always the commonest class")
    ax.set_xlim(0, 100)
    return finish(fig, ax, "pruned (% of the weights or hidden units)", "test accuracy (%)", title, legend="lower left",
                  grid="major", legend_size="x-small")


def distillation_temperature_figure(
    temperature: float,
    probabilities: Mapping[str, Sequence[float]],
    temperatures: Sequence[float],
    grad_norms: Mapping[str, Sequence[float]],
    *,
    title: str = "Soft targets and the soft term's gradient",
) -> Figure:
    """Left: softmax(logits / T) per model at one T (bars per class); right: gradient norm against T (log-log), T marked."""
    if not probabilities or not grad_norms or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError("need probabilities, gradient norms and a positive temperature")
    n_classes = len(next(iter(probabilities.values())))
    if n_classes == 0 or any(len(p) != n_classes for p in probabilities.values()):
        raise ValueError("every model needs one probability per class, and the same classes")
    check_fractions([v for p in probabilities.values() for v in p], "probabilities")
    for label, norms in grad_norms.items():
        check_series(temperatures, norms, "temperatures", f"grad_norms[{label!r}]")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    grouped_bars(left, n_classes, probabilities)
    left.set_xticks(range(n_classes))
    left.set_xlabel("class")
    left.set_ylabel(f"softmax(logits / T), T = {temperature:g}")
    left.set_ylim(0, 1)
    left.set_title("Soft targets")
    left.legend(loc="upper right", fontsize="small")
    sweep(right, temperatures, grad_norms)
    first = next(iter(grad_norms.values()))
    right.plot(temperatures, power_law_guide(temperatures, temperatures[-1], first[-1], -2),
               color="gray", linestyle="--", label="∝ T⁻²")
    right.axvline(temperature, color="black", linestyle=":", linewidth=1, label=f"T = {temperature:g}")
    log_axes(right, 2)
    label_axes(right, "temperature T", "‖∂ soft term / ∂ student logits‖", "Gradient of the soft term",
               legend="lower left")
    return finish_panels(fig, title)


def distillation_accuracy_figure(
    temperatures: Sequence[float],
    accuracies: Mapping[str, Sequence[float]],
    *,
    references: Mapping[str, float],
    title: str = "The student's accuracy against the temperature",
) -> Figure:
    """Test accuracy of students against the distillation temperature, with horizontal reference accuracies."""
    if not accuracies or len(temperatures) == 0 or any(not math.isfinite(t) or t <= 0 for t in temperatures):
        raise ValueError("need at least one series of accuracies and positive, finite temperatures")
    for label, series in accuracies.items():
        if len(series) != len(temperatures):
            raise ValueError(f"accuracies[{label!r}] needs one accuracy per temperature")
        check_fractions(series, f"accuracies[{label!r}]")
    if any(not 0.0 <= a <= 1.0 for a in references.values()):
        raise ValueError("reference accuracies must lie in [0, 1]")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sweep(ax, temperatures, {label: [100 * a for a in series] for label, series in accuracies.items()})
    for k, (label, accuracy) in enumerate(references.items()):
        ax.axhline(100 * accuracy, color=f"C{k + len(accuracies)}", linestyle="--", linewidth=1, label=label)
    log_axes(ax, 2, None)
    return finish(fig, ax, "temperature T", "test accuracy (%)", title, legend="lower right")


def compression_figure(
    versions: Sequence[str],
    weight_bytes: Sequence[float],
    decode_s: Sequence[float],
    accuracy: Sequence[float],
    *,
    title: str = "What compression buys, and what it costs",
) -> Figure:
    """Left: decode time per token of each version (bars, weights in GB beside); right: accuracy of its analogue (bars)."""
    if len(versions) == 0 or not len(versions) == len(weight_bytes) == len(decode_s) == len(accuracy):
        raise ValueError("one weight size, decode time and accuracy per version")
    if any(not math.isfinite(v) or v <= 0 for v in (*weight_bytes, *decode_s)):
        raise ValueError("weight_bytes and decode_s must be positive and finite")
    check_fractions(accuracy, "accuracy")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 0.9 + 0.45 * len(versions)), sharey=True,
                                      gridspec_kw={"width_ratios": [1.6, 1]})
    rows = range(len(versions))
    left.barh(rows, [t * 1e3 for t in decode_s], color="tab:blue")
    for r, (t, b) in enumerate(zip(decode_s, weight_bytes)):
        left.text(t * 1e3, r, f" {t * 1e3:.2f} ms, {b / GB:.1f} GB", va="center", fontsize="small")
    left.set_xlim(0, 1.45 * max(decode_s) * 1e3)
    left.set_yticks(list(rows), list(versions))
    left.set_ylim(len(versions) - 0.5, -0.5)
    left.set_xlabel("decode ms per token (roofline; weights in GB beside)")
    left.grid(True, axis="x", alpha=0.3)
    right.barh(rows, [100 * a for a in accuracy], color="tab:green")
    for r, a in enumerate(accuracy):
        right.text(100 * a, r, f" {100 * a:.1f}", va="center", fontsize="small")
    right.set_xlim(0, 115)
    right.set_xlabel("accuracy of the same method on this notebook's MLP (%)")
    right.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
