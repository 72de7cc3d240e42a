"""Notebook 01's figures: bandwidth and latency against working set, and kernels on a device's roofline."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from lecturelib.plots.vocab import (
    annotate_points, binary_bytes, check_series, finish, log_axes, log_grid, mark_sizes, roof, sweep,
)


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
    grid = log_grid(lo, hi)
    for (name, bandwidth), ridge in zip(memory_roofs_bytes_per_s.items(), ridges):
        roof(ax, grid, peak_flop_per_s, bandwidth, label=f"{name}: {bandwidth / 1e9:,.0f} GB/s (ridge {ridge:,.3g} FLOP/B)")
    ax.axhline(peak_flop_per_s, color="black", linestyle="--", linewidth=0.8,
               label=f"peak {peak_flop_per_s / 1e12:,.3g} TFLOP/s")
    annotate_points(ax, points, offset=(4, -10), marker="o")
    log_axes(ax)
    ax.set_xlim(lo, hi)
    return finish(fig, ax, "arithmetic intensity (FLOP/byte)", "FLOP/s", title, legend="lower right")


def _check_working_sets(series: dict[str, tuple[Sequence[int], Sequence[float]]], cache_bytes: dict[str, int],
                        y_name: str) -> None:
    """Refuse a sweep over working sets with no series, a series a log axis cannot draw, or a cache size <= 0."""
    if not series:
        raise ValueError(f"series needs at least one (working sets, {y_name}) pair")
    for name, (sizes, ys) in series.items():
        check_series(sizes, ys, f"{name} sizes", f"{name} {y_name}")
    if any(size <= 0 for size in cache_bytes.values()):
        raise ValueError("cache sizes must be positive")


def _working_set_axes(ax: Axes, cache_bytes: dict[str, int], *, y_base: int | None) -> None:
    """Each cache's size marked on a log2 axis of working sets written in bytes."""
    mark_sizes(ax, cache_bytes)
    log_axes(ax, 2, y_base)
    ax.xaxis.set_major_formatter(lambda x, _: binary_bytes(x))  # a function becomes a FuncFormatter


def bandwidth_sweep_figure(
    series: dict[str, tuple[Sequence[int], Sequence[float]]],
    cache_bytes: dict[str, int],
    *,
    title: str = "Bandwidth against working set",
) -> Figure:
    """Bytes/s against working-set size (log-log), one line per series, a dashed line at each cache size."""
    _check_working_sets(series, cache_bytes, "bytes/s")
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for name, (sizes, rates) in series.items():
        sweep(ax, sizes, {name: [r / 1e9 for r in rates]}, markersize=4)
    _working_set_axes(ax, cache_bytes, y_base=10)
    return finish(fig, ax, "working set (bytes the op keeps touching)", "GB/s (10⁹ bytes per second)",
                  title)  # the curves fill a different corner per machine


def kernel_roofline_figure(
    peak_flop_per_s: float,
    peak_bytes_per_s: float,
    intensity: float,
    *,
    label: str,
    intensity_range: tuple[float, float] = (2.0**-4, 2.0**14),
    title: str = "",
) -> Figure:
    """One roofline on fixed axes with one kernel on it: the point moves when the kernel changes, the axes don't."""
    for name, value in (("peak_flop_per_s", peak_flop_per_s), ("peak_bytes_per_s", peak_bytes_per_s),
                        ("intensity", intensity)):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be positive and finite, got {value}")
    lo, hi = intensity_range
    if not 0 < lo < hi:
        raise ValueError(f"intensity_range must be (lo, hi) with 0 < lo < hi, got {intensity_range}")
    ridge = peak_flop_per_s / peak_bytes_per_s
    attainable = min(peak_flop_per_s, intensity * peak_bytes_per_s)
    bound = "memory-bound" if intensity < ridge else "compute-bound"
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    roof(ax, log_grid(lo, hi), peak_flop_per_s, peak_bytes_per_s, color="black",
         label=f"roof: {peak_bytes_per_s / 1e9:,.0f} GB/s, {peak_flop_per_s / 1e12:,.3g} TFLOP/s")
    ax.axvline(ridge, color="gray", linestyle=":", label=f"ridge point {ridge:,.3g} FLOP/byte")
    ax.plot([intensity], [attainable], "o", markersize=9,
            color="tab:blue" if bound == "memory-bound" else "tab:red", label=f"{label}: {bound}")
    log_axes(ax, 2)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo * peak_bytes_per_s / 2, peak_flop_per_s * 2)
    return finish(fig, ax, "arithmetic intensity (FLOP/byte)", "attainable FLOP/s", title or label,
                  legend="lower right")


def latency_sweep_figure(
    series: dict[str, tuple[Sequence[int], Sequence[float]]],
    cache_bytes: dict[str, int],
    *,
    baseline_ns: float | None = None,
    baseline_label: str = "baseline",
    title: str = "Latency of a dependent load against working set",
) -> Figure:
    """Nanoseconds per dependent load against working-set size (log x), a dashed line per cache, a dotted baseline."""
    _check_working_sets(series, cache_bytes, "ns per load")
    if baseline_ns is not None and not (math.isfinite(baseline_ns) and baseline_ns > 0):
        raise ValueError("baseline_ns must be positive and finite")
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for name, (sizes, ns) in series.items():
        sweep(ax, sizes, {name: ns}, markersize=4)
    if baseline_ns is not None:
        ax.axhline(baseline_ns, color="black", linestyle=":", linewidth=1.0, label=baseline_label)
    _working_set_axes(ax, cache_bytes, y_base=None)
    ax.set_ylim(bottom=0)  # linear: the step from one tier to the next is a difference of nanoseconds
    return finish(fig, ax, "working set (bytes the chain runs through)", "ns per dependent load", title,
                  legend="center left")  # latencies grow to the right; the cache labels hang from the top
