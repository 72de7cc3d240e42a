"""The figures' shared vocabulary: input checks, units, and the finishing of an axes (scales, labels, grid, legend)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal

from matplotlib.axes import Axes
from matplotlib.figure import Figure


def check_series(xs: Sequence[float], ys: Sequence[float], x_name: str, y_name: str) -> None:
    """Refuse a series that a log-log plot cannot draw: empty, of unequal lengths, or not positive and finite."""
    if len(xs) == 0 or len(xs) != len(ys):
        raise ValueError(f"{x_name} and {y_name} must be non-empty and of equal length, got {len(xs)} and {len(ys)}")
    if any(not math.isfinite(v) or v <= 0 for v in (*xs, *ys)):
        raise ValueError(f"{x_name} and {y_name} must be positive and finite (they are drawn on log axes)")


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
    if len(fractions) == 0 or any(not (0.0 <= f <= 1.0) for f in fractions):
        raise ValueError(f"{name} must be non-empty fractions in [0, 1]")


# Where a legend goes (matplotlib's names), and which ticks the grid follows ("y": the y axis's major ticks only)
Corner = Literal["best", "upper right", "upper left", "lower left", "lower right", "right", "center left", "center right",
                 "lower center", "upper center", "center"]
Grid = Literal["both", "major", "y"]


def label_axes(ax: Axes, xlabel: str, ylabel: str, title: str, *, legend: Corner | None = "best",
               grid: Grid = "both") -> None:
    """Axes labelled and titled, with a light grid (`grid`: "both", "major" or "y") and a small legend at `legend`
    (None: none)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if grid == "y":
        ax.grid(True, axis="y", alpha=0.3)
    else:
        ax.grid(True, which=grid, alpha=0.3)
    if legend is not None:
        ax.legend(loc=legend, fontsize="small")


def finish(fig: Figure, ax: Axes, xlabel: str, ylabel: str, title: str, *, legend: Corner | None = "best",
           grid: Grid = "both") -> Figure:
    """The figure of one axes, labelled (as `label_axes` does) and laid out."""
    label_axes(ax, xlabel, ylabel, title, legend=legend, grid=grid)
    fig.tight_layout()
    return fig
