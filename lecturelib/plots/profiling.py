"""Notebook 09's figures: a trace's timeline, operators on the roofline, memory over time, before and after."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lecturelib.plots.vocab import annotate_points, before_after, finish, log_axes, log_grid, roof


Span = tuple[str, str, float, float]  # (row, name, start, end): one event of a trace on one row of a timeline


def trace_figure(
    panels: dict[str, Sequence[Span]],
    *,
    fixed_colors: Mapping[str, str] | None = None,
    unit: str = "ms",
    title: str = "Trace",
    colored: int = 9,
) -> Figure:
    """A trace drawn as Perfetto draws it: one panel per trace, one row per track, a bar per event, colored by name."""
    # Names in fixed_colors (ranges, say) get their color; of the others, the `colored` names with the most time get
    # one each, the same in every panel, and a legend entry; the rest are gray. A bar wide enough to hold its name is
    # labelled with it, as a trace viewer does when zoomed in. Bars of one name on one row are one broken_barh
    # collection: a trace holds thousands of events.
    if not panels or any(not spans for spans in panels.values()):
        raise ValueError("need at least one panel, each with at least one span")
    for panel, spans in panels.items():
        if any(not (math.isfinite(a) and math.isfinite(b) and b >= a) for _, _, a, b in spans):
            raise ValueError(f"{panel!r}: each span must be finite with end >= start")
    fixed = dict(fixed_colors or {})
    total: dict[str, float] = {}
    for spans in panels.values():
        for _, name, a, b in spans:
            if name not in fixed:
                total[name] = total.get(name, 0.0) + b - a
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    top = sorted(total, key=lambda name: -total[name])[:colored]
    colors = {**{name: cycle[k % len(cycle)] for k, name in enumerate(top)}, **fixed}
    rows_per_panel = [list(dict.fromkeys(row for row, _, _, _ in spans)) for spans in panels.values()]
    heights = [len(rows) for rows in rows_per_panel]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.6, 1.1 + 0.42 * sum(heights) + 0.5 * len(panels)),
                             sharex=True, squeeze=False, gridspec_kw={"height_ratios": heights})
    lo = min(a for spans in panels.values() for _, _, a, _ in spans)
    hi = max(b for spans in panels.values() for _, _, _, b in spans)
    for ax, (panel, spans), rows in zip(axes[:, 0], panels.items(), rows_per_panel):
        groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for row, name, a, b in spans:
            groups.setdefault((row, name), []).append((a, b - a))
        for (row, name), bars in groups.items():
            ax.broken_barh(bars, (rows.index(row) - 0.35, 0.7), facecolor=colors.get(name, "lightgray"),
                           edgecolor="white", linewidth=0.3, label=name)  # edges keep back-to-back events apart
        for row, name, a, b in spans:
            label = name.removeprefix("aten::")
            if b - a >= 0.0115 * (hi - lo) * (len(label) + 2):  # about the width of the label in x-small text
                ax.text((a + b) / 2, rows.index(row), label, ha="center", va="center", fontsize="x-small",
                        clip_on=True)
        ax.set_yticks(range(len(rows)), rows, fontsize="small")
        ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
        ax.set_title(panel, fontsize="medium", loc="left")
        ax.grid(True, axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel(f"time from the start ({unit})")
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[name]) for name in top]
    fig.legend(handles, [name.removeprefix("aten::") for name in top], loc="lower center", ncol=min(5, len(top)),
               fontsize="x-small", frameon=False)
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.02 + 0.04 * math.ceil(len(top) / 5), 1, 1))
    return fig


VERDICT_COLORS = {"compute": "tab:red", "memory": "tab:blue", "overhead": "tab:gray"}


def op_roofline_figure(
    peak_flop_per_s: float,
    peak_bytes_per_s: float,
    points: Sequence[tuple[str, float, float, float, str]],
    *,
    overhead_fraction: float = 0.1,
    labelled: int = 6,
    memory_tiers: Sequence[tuple[str, float]] = (),
    memory_name: str = "",
    title: str = "Each operator on the roofline",
) -> Figure:
    """Operators (label, intensity, achieved FLOP/s, seconds, verdict) on a roofline: area ∝ time, color = verdict."""
    # Below overhead_fraction × the roofline an op reaches less than that share of both roofs: the overhead region.
    # The `labelled` ops with the most time carry their labels. memory_tiers: (name, bytes/s) of the other memory
    # tiers some operators were judged against (their working sets live there), drawn as thin roofs of their own.
    for name, value in (("peak_flop_per_s", peak_flop_per_s), ("peak_bytes_per_s", peak_bytes_per_s),
                        *((f"memory tier {n!r}", v) for n, v in memory_tiers)):
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"{name} must be positive and finite, got {value}")
    if not 0 < overhead_fraction < 1:
        raise ValueError(f"overhead_fraction must be in (0, 1), got {overhead_fraction}")
    if not points:
        raise ValueError("need at least one point")
    for label, intensity, rate, seconds, verdict in points:
        if not all(math.isfinite(v) and v > 0 for v in (intensity, rate, seconds)):
            raise ValueError(f"point {label!r}: intensity, rate and seconds must be positive and finite")
        if verdict not in VERDICT_COLORS:
            raise ValueError(f"point {label!r}: unknown verdict {verdict!r}; known: {', '.join(VERDICT_COLORS)}")
    ridge = peak_flop_per_s / peak_bytes_per_s
    xs = [p[1] for p in points] + [ridge]
    lo, hi = min(xs) / 4, max(xs) * 4
    grid = log_grid(lo, hi)
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    attainable = roof(ax, grid, peak_flop_per_s, peak_bytes_per_s, color="black",
                      label=f"roofline{f' ({memory_name})' if memory_name else ''}: {peak_bytes_per_s / 1e9:,.3g} GB/s, "
                            f"{peak_flop_per_s / 1e9:,.3g} GFLOP/s")
    ax.plot(grid, [overhead_fraction * r for r in attainable], color="gray", linestyle="--", linewidth=0.8,
            label=f"{overhead_fraction:.0%} of the roofline: overhead below")
    ax.axvline(ridge, color="gray", linestyle=":", linewidth=0.8)
    tier_colors = ("tab:purple", "tab:brown", "tab:olive", "tab:cyan")
    for k, (name, bytes_per_s) in enumerate(memory_tiers):
        roof(ax, grid, peak_flop_per_s, bytes_per_s, color=tier_colors[k % 4], linewidth=0.9,
             label=f"{name}'s roof: {bytes_per_s / 1e9:,.3g} GB/s")
    longest = max(p[3] for p in points)
    for verdict, color in VERDICT_COLORS.items():
        mine = [p for p in points if p[4] == verdict]
        if mine:
            ax.scatter([p[1] for p in mine], [p[2] for p in mine], s=[12 + 300 * p[3] / longest for p in mine],
                       color=color, alpha=0.6, edgecolors="black", linewidths=0.4, label=verdict)
    longest_first = sorted(points, key=lambda p: -p[3])[:labelled]
    annotate_points(ax, [(label, intensity, rate) for label, intensity, rate, _, _ in longest_first], offset=(5, 4),
                    fontsize="x-small")
    log_axes(ax)
    ax.set_xlim(lo, hi)
    return finish(fig, ax, "arithmetic intensity (FLOP/byte)", "achieved FLOP/s", title, legend="upper left",
                  legend_size="x-small")


def memory_timeline_figure(
    times: Sequence[float],
    allocated_bytes: Sequence[float],
    phases: Sequence[tuple[str, float, float]] = (),
    *,
    unit: str = "ms",
    title: str = "Memory allocated over time",
) -> Figure:
    """Bytes allocated (MiB) as a step line over time, phases (name, start, end) shaded, the peak marked."""
    if not times or len(times) != len(allocated_bytes):
        raise ValueError(f"times and allocated_bytes must be non-empty and of equal length, got {len(times)} and "
                         f"{len(allocated_bytes)}")
    if any(not math.isfinite(v) for v in (*times, *allocated_bytes)):
        raise ValueError("times and allocated_bytes must be finite")
    fig, ax = plt.subplots(figsize=(7.0, 3.6))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = list(dict.fromkeys(name for name, _, _ in phases))
    for name, start, end in phases:
        ax.axvspan(start, end, color=cycle[names.index(name) % len(cycle)], alpha=0.12, linewidth=0)
    mib = [b / 2**20 for b in allocated_bytes]
    ax.step(times, mib, where="post", color="black", linewidth=1.0)
    peak = max(range(len(mib)), key=mib.__getitem__)
    ax.plot([times[peak]], [mib[peak]], "v", color="tab:red", label=f"peak {mib[peak]:,.1f} MiB")
    for name in names:  # one legend entry per phase
        ax.axvspan(0, 0, color=cycle[names.index(name) % len(cycle)], alpha=0.25, label=name)
    ax.set_xlim(min(times), max(times))
    return finish(fig, ax, f"time ({unit})", "allocated (MiB)", title, legend="upper left", grid="major",
                  ncol=1 + len(names) // 3)


def before_after_figure(
    rows: dict[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str = "Before and after the fix",
) -> Figure:
    """Per row (a fix), the seconds of each round before and after, relative to the median before: bars, whiskers, ratio."""
    # Relative times put a 0.2 ms loop and a 150 ms training step on one axis: before is 1 by construction, after
    # is 1 / speed-up; the whiskers span the fastest and slowest rounds.
    if not rows:
        raise ValueError("need at least one row")
    for label, (before, after) in rows.items():
        if not before or not after or any(not math.isfinite(v) or v <= 0 for v in (*before, *after)):
            raise ValueError(f"row {label!r}: before and after need positive, finite seconds")
    fig, ax = plt.subplots(figsize=(7.0, 0.9 + 0.9 * len(rows)))
    before_after(ax, rows)
    return finish(fig, ax, "time per call ÷ the median before (bars: median rounds; whiskers: fastest and slowest)", "",
                  title, legend="lower right", grid="x")
