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


# --- memory: what a training step holds (notebook 05) --------------------------------------------------------

GB = 10**9  # the unit of the memory figures, as datasheets count it (PyTorch and nvidia-smi print GiB = 2**30)


def memory_stack_figure(
    columns: dict[str, dict[str, float]],
    *,
    capacity_bytes: float | None = None,
    capacity_label: str = "GPU memory",
    title: str = "What one training step holds",
) -> Figure:
    """One stacked bar per column (label -> {part: bytes}), in GB, with an optional capacity line."""
    if not columns:
        raise ValueError("columns must hold at least one bar")
    parts: list[str] = []  # every part that is non-zero somewhere, in first-seen order: one colour each
    for bar in columns.values():
        for part, n_bytes in bar.items():
            if not math.isfinite(n_bytes) or n_bytes < 0:
                raise ValueError(f"part {part!r} must be a finite number of bytes >= 0, got {n_bytes}")
            if n_bytes > 0 and part not in parts:
                parts.append(part)
    if capacity_bytes is not None and (not math.isfinite(capacity_bytes) or capacity_bytes <= 0):
        raise ValueError("capacity_bytes must be positive and finite")
    colours = plt.get_cmap("tab10")
    fig, ax = plt.subplots(figsize=(max(4.8, 1.1 * len(columns) + 3.4), 4.4))
    labels = list(columns)
    bottoms = [0.0] * len(labels)
    for i, part in enumerate(parts):
        heights = [columns[label].get(part, 0.0) / GB for label in labels]
        ax.bar(labels, heights, bottom=bottoms, label=part, color=colours(i % 10))
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    for x, total in enumerate(bottoms):
        ax.annotate(f"{total:,.1f}", (x, total), textcoords="offset points", xytext=(0, 3), ha="center",
                    fontsize="small")
    top = max([*bottoms, 0.0 if capacity_bytes is None else capacity_bytes / GB])
    ax.set_ylim(0, 1.1 * top if top > 0 else 1.0)  # room for the totals above the bars
    if capacity_bytes is not None:
        ax.axhline(capacity_bytes / GB, color="black", linestyle="--", linewidth=1,
                   label=f"{capacity_label}: {capacity_bytes / GB:,.0f} GB")
    ax.set_ylabel("GB (10⁹ bytes)")
    ax.set_title(title)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small")
    ax.tick_params(axis="x", labelsize="small")
    fig.tight_layout()
    return fig


def peak_comparison_figure(
    labels: list[str],
    series: dict[str, list[float]],
    *,
    title: str = "Peak memory of one training step: predicted and measured",
) -> Figure:
    """Grouped bars in MiB: one group per label (a configuration), one bar per series (predicted, measured...)."""
    if not labels or not series:
        raise ValueError("labels and series must be non-empty")
    for name, values in series.items():
        if len(values) != len(labels):
            raise ValueError(f"series {name!r} has {len(values)} values for {len(labels)} labels")
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"series {name!r} must hold finite byte counts >= 0")
    fig, ax = plt.subplots(figsize=(max(6.4, 1.6 * len(labels) + 2.0), 4.0))
    width = 0.8 / len(series)
    for i, (name, values) in enumerate(series.items()):
        xs = [x + (i - (len(series) - 1) / 2) * width for x in range(len(labels))]
        ax.bar(xs, [v / 2**20 for v in values], width=width, label=name)
    ax.set_xticks(range(len(labels)), labels, fontsize="small")
    ax.set_ylabel("MiB")
    ax.set_title(title)
    ax.legend(fontsize="small")
    ax.grid(True, axis="y", alpha=0.3)
    fig.tight_layout()
    return fig
