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


def fixed_cost_figure(
    sizes: Sequence[int],
    seconds: Sequence[float],
    work: Sequence[float],
    *,
    fixed_s: float,
    rate_per_s: float,
    title: str = "Time per call: a fixed cost plus work at one rate",
) -> Figure:
    """Measured time against size (log-log) with the fit t = fixed + work / rate and its two asymptotes."""
    _check_series(sizes, seconds, "sizes", "seconds")
    if len(work) != len(sizes) or any(not math.isfinite(x) or x <= 0 for x in work):
        raise ValueError("work must hold one positive, finite amount per size")
    if not (math.isfinite(rate_per_s) and rate_per_s > 0 and math.isfinite(fixed_s)):
        raise ValueError("rate_per_s must be positive and fixed_s finite")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(sizes, seconds, "o", label="measured (median)")
    ax.plot(sizes, [fixed_s + x / rate_per_s for x in work], "-", label="fit: fixed + work / rate")
    ax.plot(sizes, [x / rate_per_s for x in work], ":", color="gray", label=f"work at {rate_per_s:.3g}/s")
    if fixed_s > 0:
        ax.axhline(fixed_s, color="gray", linestyle="--", linewidth=0.8, label=f"fixed {fixed_s * 1e6:.3g} µs")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("seconds per call")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig


# --- data loading and host-to-device transfers (notebook 06) ---------------------------------


def loader_throughput_figure(
    labels: Sequence[str],
    series: dict[str, Sequence[float]],
    *,
    model: Sequence[float] | None = None,
    title: str = "DataLoader throughput",
) -> Figure:
    """Horizontal bars of batches/s per configuration, one bar per series, and the model's steady state as marks."""
    if not labels or not series:
        raise ValueError("need at least one configuration and one series")
    for name, values in series.items():
        if len(values) != len(labels) or any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"series {name!r} must hold one non-negative, finite rate per configuration")
    if model is not None and (len(model) != len(labels) or any(not math.isfinite(v) or v <= 0 for v in model)):
        raise ValueError("model must hold one positive, finite rate per configuration")
    n = len(series)
    height = 0.8 / n
    fig, ax = plt.subplots(figsize=(6.4, 1.4 + 0.45 * len(labels) * max(n, 1.5)))
    rows = range(len(labels))
    for k, (name, values) in enumerate(series.items()):
        ax.barh([r - 0.4 + (k + 0.5) * height for r in rows], values, height=height, label=name)
    if model is not None:
        ax.plot(list(model), list(rows), "k|", markersize=18, markeredgewidth=2, label="model: steady state")
    ax.set_yticks(list(rows), list(labels))
    ax.invert_yaxis()  # the first configuration on top
    ax.set_xlabel("batches per second")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.14), ncols=n + (model is not None), fontsize="small")
    fig.tight_layout()
    return fig


def epoch_seconds_figure(series: dict[str, Sequence[float]], *, title: str = "Seconds per epoch") -> Figure:
    """Seconds of each epoch (1, 2, ...) per configuration: worker start-up shows in every epoch, or in the first."""
    if not series:
        raise ValueError("need at least one series")
    for name, values in series.items():
        if len(values) == 0 or any(not math.isfinite(v) or v <= 0 for v in values):
            raise ValueError(f"series {name!r} must hold positive, finite seconds")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for name, values in series.items():
        ax.plot(range(1, len(values) + 1), values, "o-", label=name)
    longest = max(len(v) for v in series.values())
    ax.set_xticks(range(1, longest + 1))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("epoch")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    fig.tight_layout()
    return fig


def timeline_figure(
    panels: dict[str, dict[str, Sequence[tuple[float, float]]]],
    *,
    unit: str = "ms",
    title: str = "Timeline",
) -> Figure:
    """One panel per run, one row per actor (a worker, the main process, a CUDA stream), a bar per (start, end) span."""
    if not panels or any(not rows for rows in panels.values()):
        raise ValueError("need at least one panel, each with at least one row")
    for panel, rows in panels.items():
        for row, spans in rows.items():
            if any(not (math.isfinite(a) and math.isfinite(b) and b >= a) for a, b in spans):
                raise ValueError(f"{panel!r}/{row!r}: each span must be finite with end >= start")
    heights = [len(rows) for rows in panels.values()]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.0, 0.6 + 0.42 * sum(heights) + 0.5 * len(panels)),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = list(dict.fromkeys(row for rows in panels.values() for row in rows))  # a row keeps its color in every panel
    colors = {row: cycle[k % len(cycle)] for k, row in enumerate(names)}
    for ax, (panel, rows) in zip(axes[:, 0], panels.items()):
        for r, (row, spans) in enumerate(rows.items()):
            ax.broken_barh([(a, b - a) for a, b in spans], (r - 0.35, 0.7), facecolor=colors[row],
                           edgecolor="white", linewidth=0.8)  # edges keep back-to-back spans apart
        ax.set_yticks(range(len(rows)), list(rows))
        ax.invert_yaxis()
        ax.set_title(panel, fontsize="medium", loc="left")
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(f"time from the start ({unit})")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def h2d_bandwidth_figure(
    sizes_bytes: Sequence[int],
    series: dict[str, Sequence[float]],
    *,
    ceilings: dict[str, float] | None = None,
    title: str = "Host-to-device copy bandwidth",
) -> Figure:
    """Bytes/s of copies against their size (log-log), one line per series, with link ceilings as dashed lines."""
    if not series:
        raise ValueError("need at least one series")
    for name, values in series.items():
        _check_series(sizes_bytes, values, "sizes_bytes", f"series {name!r}")
    for name, value in (ceilings or {}).items():
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"ceiling {name!r} must be positive and finite")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, values in series.items():
        ax.plot(sizes_bytes, [v / 1e9 for v in values], "o-", label=name)
    for name, value in (ceilings or {}).items():
        ax.axhline(value / 1e9, color="gray", linestyle="--", linewidth=0.8)
        ax.annotate(name, (sizes_bytes[0], value / 1e9), textcoords="offset points", xytext=(2, 3), fontsize="small")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("bytes per copy")
    ax.set_ylabel("GB/s (10⁹ bytes per second)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig
