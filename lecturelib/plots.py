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


# --- quantization (notebook 07) --------------------------------------------------------------


def sqnr_vs_bits_figure(
    bits: Sequence[int],
    sqnr_db: dict[str, Sequence[float]],
    points: Sequence[tuple[str, float, float]] = (),
    *,
    db_per_bit: float = 20 * math.log10(2),
    title: str = "Quantization error against bits",
) -> Figure:
    """SQNR (dB) against bits, one line per series, a db_per_bit guide, and labelled (bits, SQNR) points."""
    if len(bits) == 0 or not sqnr_db:
        raise ValueError("need at least one bit width and one series")
    for label, values in sqnr_db.items():
        if len(values) != len(bits) or any(not math.isfinite(v) for v in values):
            raise ValueError(f"series {label!r} must have one finite SQNR per bit width")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for label, values in sqnr_db.items():
        ax.plot(bits, values, "o-", label=label)
    first = next(iter(sqnr_db.values()))
    guide = [first[-1] + db_per_bit * (b - bits[-1]) for b in bits]  # through the first series' widest point
    ax.plot(bits, guide, color="gray", linestyle="--", linewidth=0.8, label=f"{db_per_bit:.2f} dB per bit")
    for label, x, y in points:
        ax.plot([x], [y], "s", color="black")
        ax.annotate(label, (x, y), textcoords="offset points", xytext=(5, -4), fontsize="small")
    right = max([*bits, *(x for _, x, _ in points)])
    ax.set_xlim(min(bits) - 0.5, right + 0.25 * (right - min(bits)))  # room for the points' labels
    ax.set_xlabel("bits per value")
    ax.set_ylabel("SQNR (dB) = 10·log10(Σx² / Σ(x − x̂)²)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig
