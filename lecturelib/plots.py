"""Matplotlib figures drawn by the notebooks: each function takes numbers and returns a Figure."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure


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


def step_curves_figure(
    curves: dict[str, Sequence[float]],
    *,
    ylabel: str,
    title: str,
    first_step: int = 1,
    reference: float | None = None,
    reference_label: str = "",
    logy: bool = False,
) -> Figure:
    """Per-step series (loss, learning rate, ...) against the optimizer step, with an optional horizontal reference."""
    if not curves or any(len(ys) == 0 for ys in curves.values()):
        raise ValueError("curves needs at least one non-empty series")
    values = [y for ys in curves.values() for y in ys] + ([] if reference is None else [reference])
    if any(not math.isfinite(y) for y in values) or (logy and any(y <= 0 for y in values)):
        raise ValueError("values must be finite (and positive on a log axis)")
    fig, ax = plt.subplots(figsize=(6.4, 3.8))
    styles = ["-", "--", ":", "-."]
    for i, (label, ys) in enumerate(curves.items()):
        ax.plot(range(first_step, first_step + len(ys)), list(ys), styles[i % len(styles)], label=label)
    if reference is not None:
        ax.axhline(reference, color="black", linestyle="--", linewidth=0.8, label=reference_label)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
