"""Figures of notebooks 05, 06 and 08: a step's memory, data loading and transfers, training curves."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lecturelib.plots.vocab import GB, check_sweep, finish, grouped_bars, log_axes, stacked_bars, sweep


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
    return finish(fig, ax, "optimizer step", ylabel, title, grid="major")


MEMORY_LABEL_CHARS = 14  # characters per line of a bar's label: what fits under a bar of 1.3 inches


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
    fig, ax = plt.subplots(figsize=(max(4.8, 1.3 * len(columns) + 3.4), 4.4))
    labels = list(columns)
    xs = list(range(len(labels)))
    bottoms = stacked_bars(ax, xs, ((part, [columns[label].get(part, 0.0) / GB for label in labels]) for part in parts),
                           colors=[colours(i % 10) for i in range(len(parts))])
    # each line of a label wrapped to the width of one bar, so that neighbouring labels never overlap
    ticks = ["\n".join(textwrap.fill(line, width=MEMORY_LABEL_CHARS) for line in label.split("\n")) for label in labels]
    ax.set_xticks(xs, ticks)
    for x, total in zip(xs, bottoms):
        ax.annotate(f"{total:,.1f}", (x, total), textcoords="offset points", xytext=(0, 3), ha="center",
                    fontsize="small", bbox={"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none"})
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
    grouped_bars(ax, len(labels), {name: [v / 2**20 for v in values] for name, values in series.items()})
    ax.set_xticks(range(len(labels)), labels, fontsize="small")
    return finish(fig, ax, "", "MiB", title, grid="y")


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
    fig, ax = plt.subplots(figsize=(6.4, 1.4 + 0.45 * len(labels) * max(n, 1.5)))
    rows = range(len(labels))
    grouped_bars(ax, len(labels), series, horizontal=True)
    if model is not None:
        ax.plot(list(model), list(rows), "k|", markersize=18, markeredgewidth=2, label="model: steady state")
    ax.set_yticks(list(rows), list(labels))
    ax.invert_yaxis()  # the first configuration on top
    return finish(fig, ax, "batches per second", "", title, legend="upper center", grid="x", bbox_to_anchor=(0.5, -0.14),
                  ncols=n + (model is not None))


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
    return finish(fig, ax, "epoch", "seconds", title, grid="major")


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
    check_sweep(sizes_bytes, series, "sizes_bytes")
    for name, value in (ceilings or {}).items():
        if not math.isfinite(value) or value <= 0:
            raise ValueError(f"ceiling {name!r} must be positive and finite")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sweep(ax, sizes_bytes, {name: [v / 1e9 for v in values] for name, values in series.items()})
    for name, value in (ceilings or {}).items():
        ax.axhline(value / 1e9, color="gray", linestyle="--", linewidth=0.8)
        ax.annotate(name, (sizes_bytes[0], value / 1e9), textcoords="offset points", xytext=(2, 3), fontsize="small")
    log_axes(ax, 2)
    return finish(fig, ax, "bytes per copy", "GB/s (10⁹ bytes per second)", title, legend="lower right")


def loader_progress_figure(
    measured: Mapping[str, Sequence[float]],
    simulated: Mapping[str, Sequence[float]],
    *,
    unit: str = "ms",
    title: str = "Steps finished against time",
) -> Figure:
    """Steps finished against time per configuration: each step's end, measured (solid) and simulated (dashed)."""
    if not measured or set(measured) != set(simulated):
        raise ValueError("need measured and simulated end times for the same configurations")
    for name in measured:
        for kind, ends in (("measured", measured[name]), ("simulated", simulated[name])):
            if len(ends) == 0 or any(not math.isfinite(t) or t < 0 for t in ends):
                raise ValueError(f"{kind} {name!r}: end times must be non-negative and finite")
            if any(b < a for a, b in zip(ends, ends[1:])):
                raise ValueError(f"{kind} {name!r}: steps end in order")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    cycle = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, name in enumerate(measured):
        color = cycle[k % len(cycle)]
        for ends, style, kind in ((measured[name], "-", "measured"), (simulated[name], "--", "simulated")):
            steps = range(1, len(ends) + 1)
            ax.step([0.0, *ends], [0, *steps], where="post", linestyle=style, color=color,
                    label=f"{name}, {kind}")
    return finish(fig, ax, f"time from the first sample's loading ({unit})", "training steps finished", title,
                  legend="lower right", grid="major", legend_size="x-small", ncols=2)
