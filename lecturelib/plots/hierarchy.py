"""Notebook 01's figures: bandwidth and latency against working set, and kernels on a device's roofline."""

from __future__ import annotations

import math
from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lecturelib.plots.vocab import GB, binary_bytes, check_series, finish


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
    return finish(fig, ax, "arithmetic intensity (FLOP/byte)", "FLOP/s", title, legend="lower right")


def bandwidth_sweep_figure(
    series: dict[str, tuple[Sequence[int], Sequence[float]]],
    cache_bytes: dict[str, int],
    *,
    title: str = "Bandwidth against working set",
) -> Figure:
    """Bytes/s against working-set size (log-log), one line per series, a dashed line at each cache size."""
    if not series:
        raise ValueError("series needs at least one (working sets, bytes/s) pair")
    for name, (sizes, rates) in series.items():
        check_series(sizes, rates, f"{name} sizes", f"{name} bytes/s")
    if any(size <= 0 for size in cache_bytes.values()):
        raise ValueError("cache sizes must be positive")
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for name, (sizes, rates) in series.items():
        ax.plot(sizes, [r / 1e9 for r in rates], "o-", markersize=4, label=name)
    for name, size in cache_bytes.items():
        ax.axvline(size, color="gray", linestyle="--", linewidth=0.8)
        ax.annotate(f"{name} {binary_bytes(size)}", (size, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-3, -3), textcoords="offset points", rotation=90, ha="right", va="top",
                    fontsize="small", color="dimgray")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(lambda x, _: binary_bytes(x))  # a function becomes a FuncFormatter
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
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    ax.plot(grid, [min(peak_flop_per_s, x * peak_bytes_per_s) for x in grid], color="black",
            label=f"roof: {peak_bytes_per_s / 1e9:,.0f} GB/s, {peak_flop_per_s / 1e12:,.3g} TFLOP/s")
    ax.axvline(ridge, color="gray", linestyle=":", label=f"ridge point {ridge:,.3g} FLOP/byte")
    ax.plot([intensity], [attainable], "o", markersize=9,
            color="tab:blue" if bound == "memory-bound" else "tab:red", label=f"{label}: {bound}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
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
    if not series:
        raise ValueError("series needs at least one (working sets, ns per load) pair")
    for name, (sizes, ns) in series.items():
        check_series(sizes, ns, f"{name} sizes", f"{name} ns per load")
    if any(size <= 0 for size in cache_bytes.values()):
        raise ValueError("cache sizes must be positive")
    if baseline_ns is not None and not (math.isfinite(baseline_ns) and baseline_ns > 0):
        raise ValueError("baseline_ns must be positive and finite")
    fig, ax = plt.subplots(figsize=(7.0, 4.2))
    for name, (sizes, ns) in series.items():
        ax.plot(sizes, ns, "o-", markersize=4, label=name)
    if baseline_ns is not None:
        ax.axhline(baseline_ns, color="black", linestyle=":", linewidth=1.0, label=baseline_label)
    for name, size in cache_bytes.items():
        ax.axvline(size, color="gray", linestyle="--", linewidth=0.8)
        ax.annotate(f"{name} {binary_bytes(size)}", (size, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-3, -3), textcoords="offset points", rotation=90, ha="right", va="top",
                    fontsize="small", color="dimgray")
    ax.set_xscale("log", base=2)
    ax.set_ylim(bottom=0)  # linear: the step from one tier to the next is a difference of nanoseconds
    ax.xaxis.set_major_formatter(lambda x, _: binary_bytes(x))  # a function becomes a FuncFormatter
    return finish(fig, ax, "working set (bytes the chain runs through)", "ns per dependent load", title,
                  legend="center left")  # latencies grow to the right; the cache labels hang from the top
