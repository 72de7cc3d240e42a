"""Matplotlib figures drawn by the notebooks: each function takes numbers and returns a Figure."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter


def _check_series(xs: Sequence[float], ys: Sequence[float], x_name: str, y_name: str) -> None:
    if len(xs) == 0 or len(xs) != len(ys):
        raise ValueError(f"{x_name} and {y_name} must be non-empty and of equal length, got {len(xs)} and {len(ys)}")
    if any(not math.isfinite(v) or v <= 0 for v in (*xs, *ys)):
        raise ValueError(f"{x_name} and {y_name} must be positive and finite (they are drawn on log axes)")


def throughput_figure(
    sizes: Sequence[int],
    achieved_flop_per_s: Sequence[float],
    *,
    reference_flop_per_s: float,
    reference_label: str,
    prediction_flop_per_s: float | None = None,
    title: str = "Achieved FLOP/s of an n × n × n matmul",
) -> Figure:
    """Achieved FLOP/s against matmul size (log-log), with a reference line (peak) and a prediction."""
    _check_series(sizes, achieved_flop_per_s, "sizes", "achieved_flop_per_s")
    if not math.isfinite(reference_flop_per_s) or reference_flop_per_s <= 0:
        raise ValueError("reference_flop_per_s must be positive and finite")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(sizes, achieved_flop_per_s, "o-", label="measured torch.mm")
    ax.axhline(reference_flop_per_s, color="black", linestyle="--", label=reference_label)
    if prediction_flop_per_s is not None:
        ax.axhline(prediction_flop_per_s, color="tab:red", linestyle=":", label="your prediction")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n (matrix side; FLOPs = 2·n³)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")  # large n sit near the top: lower right is free
    fig.tight_layout()
    return fig


def relative_gap_figure(ks: Sequence[int], relative_gap: Sequence[float]) -> Figure:
    """Relative difference between 2·m·k·n and the exact m·n·(2k − 1) against the inner size k (log-log)."""
    _check_series(ks, relative_gap, "ks", "relative_gap")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(ks, relative_gap, "o-")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("inner size k")
    ax.set_ylabel("(2mkn − mn(2k−1)) / 2mkn")
    ax.set_title("When does the −1 matter?")
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return fig


def roofline_figure(
    peak_flop_per_s: float,
    memory_roofs_bytes_per_s: dict[str, float],
    points: Sequence[tuple[str, float, float]] = (),
    *,
    title: str = "Roofline",
) -> Figure:
    """A roofline (log-log): the compute roof, one slanted roof per memory tier, and labelled (intensity, FLOP/s) points."""
    if not math.isfinite(peak_flop_per_s) or peak_flop_per_s <= 0:
        raise ValueError("peak_flop_per_s must be positive and finite")
    if not memory_roofs_bytes_per_s or any(not math.isfinite(b) or b <= 0 for b in memory_roofs_bytes_per_s.values()):
        raise ValueError("memory_roofs_bytes_per_s needs at least one positive, finite bandwidth")
    for label, intensity, rate in points:
        if not (math.isfinite(intensity) and intensity > 0 and math.isfinite(rate) and rate > 0):
            raise ValueError(f"point {label!r} must have a positive, finite intensity and rate (log axes)")
    ridges = [peak_flop_per_s / b for b in memory_roofs_bytes_per_s.values()]
    xs = [i for _, i, _ in points] + ridges
    lo, hi = min(xs) / 8, max(xs) * 8
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    for (name, bandwidth), ridge in zip(memory_roofs_bytes_per_s.items(), ridges):
        ax.plot(grid, [min(peak_flop_per_s, x * bandwidth) for x in grid],
                label=f"{name}: {bandwidth / 1e9:,.0f} GB/s (ridge {ridge:,.3g} FLOP/B)")
    ax.axhline(peak_flop_per_s, color="black", linestyle="--", linewidth=0.8,
               label=f"peak {peak_flop_per_s / 1e12:,.3g} TFLOP/s")
    for label, intensity, rate in points:
        ax.plot([intensity], [rate], "o")
        ax.annotate(label, (intensity, rate), textcoords="offset points", xytext=(4, -10), fontsize="small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def _check_split(split: Mapping[str, Sequence[float]], n_points: int, name: str) -> None:
    if not split:
        raise ValueError(f"{name} needs at least one part")
    for part, values in split.items():
        if len(values) != n_points:
            raise ValueError(f"{name}[{part!r}] has {len(values)} values for {n_points} context lengths")
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"{name}[{part!r}] must be non-negative and finite")


def _tokens_label(tokens: int) -> str:
    """A context length as tick text: 512, 1k, 32k."""
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else f"{tokens}"


def flop_split_figure(
    context_lengths: Sequence[int],
    splits: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    title: str = "Where a forward pass spends its FLOPs, per token",
    mark_context: int | None = None,
    mark_label: str = "",
) -> Figure:
    """One panel per model: each part's share of the per-token FLOPs, stacked, against context length (log x)."""
    if len(context_lengths) == 0 or any(t <= 0 for t in context_lengths):
        raise ValueError("context_lengths must be non-empty and positive (log axis)")
    if not splits:
        raise ValueError("splits needs at least one model")
    for model, split in splits.items():
        _check_split(split, len(context_lengths), f"splits[{model!r}]")
    columns = min(2, len(splits))
    rows = math.ceil(len(splits) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.0 * rows), sharex=True, sharey=True,
                             squeeze=False)
    for ax, (model, split) in zip(axes.flat, splits.items()):
        totals = [sum(values[i] for values in split.values()) for i in range(len(context_lengths))]
        if any(total <= 0 for total in totals):
            raise ValueError(f"splits[{model!r}] has a context length with no FLOPs")
        shares = [[v / total for v, total in zip(values, totals)] for values in split.values()]
        ax.stackplot(context_lengths, shares, labels=[part.replace("_", " ") for part in split])
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(context_lengths), [_tokens_label(t) for t in context_lengths], fontsize="small")
        ax.minorticks_off()
        if mark_context is not None:
            ax.axvline(mark_context, color="black", linestyle=":", linewidth=1)
            ax.annotate(mark_label, (mark_context, 0.02), xytext=(3, 0), textcoords="offset points", fontsize="small")
        ax.set_ylim(0, 1)
        ax.set_title(model, fontsize="medium")
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes.flat[len(splits):]:
        ax.set_visible(False)  # an odd number of models leaves one panel empty
    for ax in axes[-1]:
        ax.set_xlabel("context length T (tokens)")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of FLOPs per token")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize="small")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 1))  # leave the bottom strip to the shared legend
    return fig


def model_split_figure(
    flop_split: Mapping[str, int],
    param_split: Mapping[str, int],
    *,
    title: str = "",
) -> Figure:
    """Two bar charts side by side: forward FLOPs per token by part, and parameters by part (shares labelled)."""
    fig, (ax_flops, ax_params) = plt.subplots(1, 2, figsize=(9.6, 3.2))
    for ax, split, unit in ((ax_flops, flop_split, "FLOPs per token"), (ax_params, param_split, "parameters")):
        if not split or any(v < 0 for v in split.values()) or sum(split.values()) <= 0:
            raise ValueError(f"the {unit} split needs non-negative parts with a positive total")
        total = sum(split.values())
        names = [part.replace("_", " ") for part in split]
        bars = ax.barh(names, list(split.values()))
        ax.bar_label(bars, labels=[f"{v / total:.0%}" for v in split.values()], padding=2, fontsize="small")
        ax.invert_yaxis()  # the first part on top
        ax.xaxis.set_major_formatter(EngFormatter())  # 100 M, 1 G
        ax.set_xlabel(unit)
        ax.set_title(f"{unit}: {EngFormatter(places=1)(total)} in all", fontsize="medium")
        ax.set_xlim(0, max(split.values()) * 1.2)  # room for the share labels
        ax.grid(True, axis="x", alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
