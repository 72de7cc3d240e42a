"""The figures' shared vocabulary: input checks, units, the shapes every topic draws (a sweep, a roofline, stacked and
grouped bars, measured against predicted, a before/after) and the finishing of an axes (scales, labels, grid, legend)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D


def check_series(xs: Sequence[float], ys: Sequence[float], x_name: str, y_name: str) -> None:
    """Refuse a series that a log-log plot cannot draw: empty, of unequal lengths, or not positive and finite."""
    if len(xs) == 0 or len(xs) != len(ys):
        raise ValueError(f"{x_name} and {y_name} must be non-empty and of equal length, got {len(xs)} and {len(ys)}")
    if any(not math.isfinite(v) or v <= 0 for v in (*xs, *ys)):
        raise ValueError(f"{x_name} and {y_name} must be positive and finite (they are drawn on log axes)")


def check_sweep(xs: Sequence[float], series: Mapping[str, Sequence[float]], x_name: str) -> None:
    """Refuse a sweep with no series, or a series that a log-log plot cannot draw against xs."""
    if not series:
        raise ValueError("need at least one series")
    for name, ys in series.items():
        check_series(xs, ys, x_name, f"series {name!r}")


def check_finite(xs: Sequence[float], series: Mapping[str, Sequence[float]], per: str) -> None:
    """Refuse a sweep with no xs or no series, or a series without one finite value per x (a linear y axis)."""
    if len(xs) == 0 or not series:
        raise ValueError(f"need at least one {per} and one series")
    for name, ys in series.items():
        if len(ys) != len(xs) or any(not math.isfinite(v) for v in ys):
            raise ValueError(f"series {name!r} must hold one finite value per {per}")


def power_law_guide(xs: Sequence[float], anchor_x: float, anchor_y: float, power: int) -> list[float]:
    """y = anchor_y · (x / anchor_x)^power at each x: a guide line through one measured point."""
    return [anchor_y * (x / anchor_x) ** power for x in xs]


def check_split(split: Mapping[str, Sequence[float]], n_points: int, name: str) -> None:
    """Refuse parts of a stacked split that are missing, of another length, negative or not finite."""
    if not split:
        raise ValueError(f"{name} needs at least one part")
    for part, values in split.items():
        if len(values) != n_points:
            raise ValueError(f"{name}[{part!r}] has {len(values)} values for {n_points} context lengths")
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"{name}[{part!r}] must be non-negative and finite")


def tokens_label(tokens: int) -> str:
    """A context length as tick text: 512, 1k, 32k."""
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else f"{tokens}"


def binary_bytes(n_bytes: float) -> str:
    """A byte count in binary units for axis labels: 512 B, 32 KiB, 1 MiB, 1.5 GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}"
    return f"{n_bytes:.3g} B"


GB = 10**9  # the unit of the memory figures, as datasheets count it (PyTorch and nvidia-smi print GiB = 2**30)


def check_fractions(fractions: Sequence[float], name: str) -> None:
    """Refuse fractions that are missing or outside [0, 1]."""
    if len(fractions) == 0 or any(not (0.0 <= f <= 1.0) for f in fractions):
        raise ValueError(f"{name} must be non-empty fractions in [0, 1]")


# Where a legend goes (matplotlib's names), and which ticks the grid follows ("x", "y": that axis's major ticks only)
Corner = Literal["best", "upper right", "upper left", "lower left", "lower right", "right", "center left", "center right",
                 "lower center", "upper center", "center"]
Grid = Literal["both", "major", "x", "y"]


def label_axes(ax: Axes, xlabel: str, ylabel: str, title: str, *, legend: Corner | None = "best",
               grid: Grid = "both", legend_size: str = "small", **legend_options: Any) -> None:
    """Axes labelled and titled, with a light grid (`grid`: "both", "major", "x" or "y") and a legend at `legend`
    (None: none) in `legend_size` text."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if grid == "x" or grid == "y":
        ax.grid(True, axis=grid, alpha=0.3)
    else:
        ax.grid(True, which=grid, alpha=0.3)
    if legend is not None:
        ax.legend(loc=legend, fontsize=legend_size, **legend_options)


def finish(fig: Figure, ax: Axes, xlabel: str, ylabel: str, title: str, *, legend: Corner | None = "best",
           grid: Grid = "both", legend_size: str = "small", **legend_options: Any) -> Figure:
    """The figure of one axes, labelled (as `label_axes` does) and laid out."""
    label_axes(ax, xlabel, ylabel, title, legend=legend, grid=grid, legend_size=legend_size, **legend_options)
    fig.tight_layout()
    return fig


def finish_panels(fig: Figure, title: str, **title_options: Any) -> Figure:
    """A figure of several panels, titled above them all and laid out."""
    fig.suptitle(title, **title_options)
    fig.tight_layout()
    return fig


def log_axes(ax: Axes, x_base: int | None = 10, y_base: int | None = 10) -> None:
    """Log scales on x and y with these bases (None: that axis stays linear)."""
    if x_base is not None:
        ax.set_xscale("log", base=x_base)
    if y_base is not None:
        ax.set_yscale("log", base=y_base)


def log_grid(lo: float, hi: float, steps: int = 200) -> list[float]:
    """steps + 1 points from lo to hi, evenly spaced on a log axis: where a smooth curve is evaluated."""
    return [lo * (hi / lo) ** (k / steps) for k in range(steps + 1)]


def roof(ax: Axes, grid: Sequence[float], peak_flop_per_s: float, bytes_per_s: float, **line: Any) -> list[float]:
    """Draw a roofline, min(peak, intensity · bandwidth) at each intensity of `grid`, and return its values."""
    attainable = [min(peak_flop_per_s, x * bytes_per_s) for x in grid]
    ax.plot(grid, attainable, **line)
    return attainable


def sweep(ax: Axes, xs: Sequence[float], series: Mapping[str, Sequence[float]], style: str = "o-",
          **line: Any) -> list[Line2D]:
    """One line per named series over the same xs (a sweep of one knob); returns the lines, for their colors."""
    return [ax.plot(xs, ys, style, label=name, **line)[0] for name, ys in series.items()]


def measured_vs_predicted(ax: Axes, xs: Sequence[float], measured: Sequence[float], predicted: Sequence[float], *,
                          labels: tuple[str, str], styles: tuple[str, str] = ("o", "-"),
                          color: str | None = None, predicted_alpha: float | None = None) -> None:
    """Measured points and the prediction they confront, over the same xs, in one color (None: the next two)."""
    same: dict[str, Any] = {} if color is None else {"color": color}
    faded: dict[str, Any] = {} if predicted_alpha is None else {"alpha": predicted_alpha}
    ax.plot(xs, measured, styles[0], label=labels[0], **same)
    ax.plot(xs, predicted, styles[1], label=labels[1], **same, **faded)


def annotate_points(ax: Axes, points: Iterable[tuple[str, float, float]], *, offset: tuple[float, float] = (4, 4),
                    fontsize: str = "small", marker: str | None = None, marker_color: str | None = None,
                    **text: Any) -> None:
    """Each (label, x, y) labelled beside its point, `offset` points away; with a marker, the point drawn first."""
    for label, x, y in points:
        if marker is not None:
            colored: dict[str, Any] = {} if marker_color is None else {"color": marker_color}
            ax.plot([x], [y], marker, **colored)
        ax.annotate(label, (x, y), textcoords="offset points", xytext=offset, fontsize=fontsize, **text)


def mark_sizes(ax: Axes, sizes_bytes: Mapping[str, int]) -> None:
    """A dashed vertical line at each named size (a cache's), its name and size hanging from the top."""
    for name, size in sizes_bytes.items():
        ax.axvline(size, color="gray", linestyle="--", linewidth=0.8)
        ax.annotate(f"{name} {binary_bytes(size)}", (size, 1.0), xycoords=("data", "axes fraction"),
                    xytext=(-3, -3), textcoords="offset points", rotation=90, ha="right", va="top",
                    fontsize="small", color="dimgray")


def stacked_bars(ax: Axes, positions: Sequence[Any], segments: Iterable[tuple[str, Sequence[float]]], *,
                 horizontal: bool = False, colors: Sequence[Any] | None = None,
                 segment_text: Callable[[float], str] | None = None, min_size: float = 0.0) -> list[float]:
    """Bars at `positions` stacked segment by segment, (name, one size per bar) each, with a legend entry and a color
    (C0, C1... unless `colors`); a segment at least `min_size` long carries `segment_text` of its size. Returns each
    bar's total."""
    base = [0.0] * len(positions)
    for k, (name, sizes) in enumerate(segments):
        color = f"C{k}" if colors is None else colors[k]
        if horizontal:
            ax.barh(positions, sizes, left=base, color=color, label=name)
        else:
            ax.bar(positions, sizes, bottom=base, color=color, label=name)
        for r, (start, size) in enumerate(zip(base, sizes)):
            if segment_text is not None and size >= min_size:  # only a segment wide enough holds its text
                ax.text(start + size / 2, r, segment_text(size), ha="center", va="center", fontsize="small")
        base = [b + s for b, s in zip(base, sizes)]
    return base


def grouped_bars(ax: Axes, n_groups: int, series: Mapping[str, Sequence[float]], *, horizontal: bool = False) -> None:
    """One group of bars per position 0, 1, ... n_groups - 1, a bar per series side by side within 0.8 of a unit."""
    width = 0.8 / len(series)
    for k, (name, values) in enumerate(series.items()):
        at = [g - 0.4 + (k + 0.5) * width for g in range(n_groups)]
        if horizontal:
            ax.barh(at, values, height=width, label=name)
        else:
            ax.bar(at, values, width=width, label=name)


def median(values: Sequence[float]) -> float:
    """The middle value (the upper of the two middle ones for an even count): what a round of timings reports."""
    return sorted(values)[len(values) // 2]


def before_after(ax: Axes, rows: Mapping[str, tuple[Sequence[float], Sequence[float]]]) -> None:
    """Per row, bars of the median before and after relative to the median before, whiskers to the extremes, and
    the speed-up written beside."""
    for r, (label, (before, after)) in enumerate(rows.items()):
        unit = median(before)
        for offset, series, color, name in ((-0.2, before, "tab:orange", "before"), (0.2, after, "tab:green", "after")):
            m = median(series) / unit
            ax.barh(r + offset, m, height=0.38, color=color, label=name if r == 0 else None,
                    xerr=[[m - min(series) / unit], [max(series) / unit - m]], capsize=3)
        speedup = unit / median(after)
        ax.text(max(1.0, median(after) / unit) + 0.02, r + 0.2, f" {speedup:.2f}× faster" if speedup >= 1 else
                f" {1 / speedup:.2f}× slower", va="center", fontsize="small")
    ax.set_yticks(range(len(rows)), list(rows))
    ax.set_ylim(len(rows) - 0.5, -0.5)  # the first row on top
