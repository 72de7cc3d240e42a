"""Figures of notebooks 00, 02, 03 and 04: loss curves, matmul throughput and tiles, softmax, attention, FLOPs."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter

from lecturelib.plots.vocab import (
    check_series, check_split, finish, finish_panels, label_axes, log_axes, log_grid, measured_vs_predicted,
    power_law_guide, stacked_bars, sweep, tokens_label,
)


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
    check_series(sizes, achieved_flop_per_s, "sizes", "achieved_flop_per_s")
    if not math.isfinite(reference_flop_per_s) or reference_flop_per_s <= 0:
        raise ValueError("reference_flop_per_s must be positive and finite")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.plot(sizes, achieved_flop_per_s, "o-", label="measured torch.mm")
    ax.axhline(reference_flop_per_s, color="black", linestyle="--", label=reference_label)
    if prediction_flop_per_s is not None:
        ax.axhline(prediction_flop_per_s, color="tab:red", linestyle=":", label="your prediction")
    log_axes(ax, 2)
    return finish(fig, ax, "n (matrix side; FLOPs = 2·n³)", "FLOP/s", title,
                  legend="lower right")  # large n sit near the top: lower right is free


def relative_gap_figure(ks: Sequence[int], relative_gap: Sequence[float]) -> Figure:
    """Relative difference between 2·m·k·n and the exact m·n·(2k − 1) against the inner size k (log-log)."""
    check_series(ks, relative_gap, "ks", "relative_gap")
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    ax.plot(ks, relative_gap, "o-")
    log_axes(ax, 2)
    return finish(fig, ax, "inner size k", "(2mkn − mn(2k−1)) / 2mkn", "When does the −1 matter?", legend=None)


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
    check_series(sizes, seconds, "sizes", "seconds")
    if len(work) != len(sizes) or any(not math.isfinite(x) or x <= 0 for x in work):
        raise ValueError("work must hold one positive, finite amount per size")
    if not (math.isfinite(rate_per_s) and rate_per_s > 0 and math.isfinite(fixed_s)):
        raise ValueError("rate_per_s must be positive and fixed_s finite")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    measured_vs_predicted(ax, sizes, seconds, [fixed_s + x / rate_per_s for x in work],
                          labels=("measured (median)", "fit: fixed + work / rate"))
    ax.plot(sizes, [x / rate_per_s for x in work], ":", color="gray", label=f"work at {rate_per_s:.3g}/s")
    if fixed_s > 0:
        ax.axhline(fixed_s, color="gray", linestyle="--", linewidth=0.8, label=f"fixed {fixed_s * 1e6:.3g} µs")
    log_axes(ax, 2)
    return finish(fig, ax, "n", "seconds per call", title, legend="upper left")


def loss_curves_figure(
    curves: dict[str, Sequence[float]],
    *,
    reference: str | None = None,
    title: str = "Training loss",
) -> Figure:
    """Loss against step for several runs (log y); with a reference run, a second panel of relative differences."""
    if not curves:
        raise ValueError("curves needs at least one run")
    lengths = {len(losses) for losses in curves.values()}
    if len(lengths) != 1 or 0 in lengths:
        raise ValueError(f"every run needs the same, non-zero number of steps, got {sorted(lengths)}")
    for label, losses in curves.items():
        if any(not math.isfinite(v) or v <= 0 for v in losses):
            raise ValueError(f"run {label!r}: losses must be positive and finite (they are drawn on a log axis)")
    if reference is not None and reference not in curves:
        raise ValueError(f"reference {reference!r} is not one of the runs: {', '.join(curves)}")
    steps = list(range(lengths.pop()))
    panels = 2 if reference is not None and len(curves) > 1 else 1
    fig, axes = plt.subplots(1, panels, figsize=(6.4 if panels == 1 else 11.0, 4.0), squeeze=False)
    ax = axes[0][0]
    # overlapping runs stay visible: each later run is drawn thinner and dashed over the earlier ones
    styles = [("-", 4.0), ("--", 2.5), (":", 1.5), ("-.", 1.0)]
    for i, (label, losses) in enumerate(curves.items()):
        linestyle, width = styles[i % len(styles)]
        ax.plot(steps, list(losses), linestyle=linestyle, linewidth=width, label=label)
    ax.set_yscale("log")
    label_axes(ax, "step", "loss", title, legend="upper right")
    if panels == 2:
        assert reference is not None  # for mypy: panels == 2 only with a reference
        diff_ax = axes[0][1]
        ref = curves[reference]
        for i, (label, losses) in enumerate(curves.items()):
            if label == reference:
                continue
            # |loss - reference| / reference, step by step: 0 where the runs agree to the last bit
            relative = [abs(v - r) / r for v, r in zip(losses, ref)]
            diff_ax.plot(steps, relative, styles[i % len(styles)][0], color=ax.lines[i].get_color(),
                         label=f"{label} vs {reference}")  # each run keeps its colour in both panels
        diff_ax.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
        label_axes(diff_ax, "step", f"|loss − {reference}| / {reference}", "Relative difference", legend="upper left",
                   grid="major")
    fig.tight_layout()
    return fig


def attention_scaling_figure(
    seq_lens: Sequence[int],
    times_s: dict[str, Sequence[float]],
    memory_bytes: dict[str, Sequence[float]],
    *,
    title: str = "Attention against sequence length",
) -> Figure:
    """Time (left) and peak memory (right) per implementation against n (log-log), with n² and n guide lines."""
    # The n² guides pass through the last point of each panel's first series, the n guide through the last
    # point of the last memory series (a fused kernel's). A memory reading that is not positive (a few KiB
    # are below what RSS resolves) is left out of its line.
    if not times_s or not memory_bytes:
        raise ValueError("times_s and memory_bytes each need at least one series")
    for label, series in times_s.items():
        check_series(seq_lens, series, "seq_lens", f"times_s[{label!r}]")
    for label, series in memory_bytes.items():
        if len(series) != len(seq_lens) or any(not math.isfinite(v) for v in series):
            raise ValueError(f"memory_bytes[{label!r}] must be finite and as long as seq_lens")
    fig, (ax_time, ax_memory) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    sweep(ax_time, seq_lens, {label: [t * 1e3 for t in series] for label, series in times_s.items()})
    first_times = next(iter(times_s.values()))
    ax_time.plot(seq_lens, power_law_guide(seq_lens, seq_lens[-1], first_times[-1] * 1e3, 2),
                 color="gray", linestyle="--", label="∝ n²")
    mib: dict[str, list[tuple[int, float]]] = {
        label: [(n, b / 2**20) for n, b in zip(seq_lens, series) if b > 0] for label, series in memory_bytes.items()
    }
    for label, points in mib.items():
        ax_memory.plot([n for n, _ in points], [m for _, m in points], "o-", label=label)
    first, last = list(mib.values())[0], list(mib.values())[-1]
    if first:
        ax_memory.plot(seq_lens, power_law_guide(seq_lens, *first[-1], 2), color="gray", linestyle="--", label="∝ n²")
    if last:
        ax_memory.plot(seq_lens, power_law_guide(seq_lens, *last[-1], 1), color="gray", linestyle=":", label="∝ n")
    for ax, ylabel in ((ax_time, "time per call (ms)"), (ax_memory, "peak memory added (MiB)")):
        log_axes(ax, 2)
        label_axes(ax, "sequence length n", ylabel, "")
    return finish_panels(fig, title)


def step_share_figure(
    steps: Sequence[str],
    flops: Sequence[float],
    times_s: Sequence[float],
    *,
    title: str = "Where the work is, where the time goes",
) -> Figure:
    """Two stacked bars, each 100%: every step's share of the FLOPs and its share of the time."""
    if not steps or not len(steps) == len(flops) == len(times_s):
        raise ValueError("steps, flops and times_s must be non-empty and of equal length")
    if any(not math.isfinite(v) or v < 0 for v in (*flops, *times_s)) or sum(flops) <= 0 or sum(times_s) <= 0:
        raise ValueError("flops and times_s must be finite, non-negative and not all zero")
    fig, ax = plt.subplots(figsize=(6.4, 2.6))
    shares = [[f / sum(flops) for f in flops], [t / sum(times_s) for t in times_s]]  # (bar, step)
    stacked_bars(ax, ["FLOPs", "time"], zip(steps, zip(*shares)), horizontal=True, segment_text=lambda w: f"{w:.0%}",
                 min_size=0.06)  # the segments wide enough to hold their percentage are labelled
    ax.set_xlim(0, 1)
    ax.set_xlabel("share")
    ax.set_title(title)
    ax.invert_yaxis()  # FLOPs on top
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=len(steps), fontsize="small")
    fig.tight_layout()
    return fig


def flop_split_figure(
    context_lengths: Sequence[int],
    splits: Mapping[str, Mapping[str, Sequence[float]]],
    *,
    title: str = "Where a forward pass spends its FLOPs, per token",
    mark_context: int | None = None,
    mark_label: str = "",
) -> Figure:
    """One panel per model: each part's share of the per-token FLOPs, stacked, against context length (log x)."""
    if len(context_lengths) == 0 or any(t <= 0 for t in context_lengths):
        raise ValueError("context_lengths must be non-empty and positive (log axis)")
    if not splits:
        raise ValueError("splits needs at least one model")
    for model, split in splits.items():
        check_split(split, len(context_lengths), f"splits[{model!r}]")
    columns = min(2, len(splits))
    rows = math.ceil(len(splits) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(4.2 * columns, 3.0 * rows), sharex=True, sharey=True,
                             squeeze=False)
    for ax, (model, split) in zip(axes.flat, splits.items()):
        totals = [sum(values[i] for values in split.values()) for i in range(len(context_lengths))]
        if any(total <= 0 for total in totals):
            raise ValueError(f"splits[{model!r}] has a context length with no FLOPs")
        shares = [[v / total for v, total in zip(values, totals)] for values in split.values()]
        ax.stackplot(context_lengths, shares, labels=[part.replace("_", " ") for part in split])
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(context_lengths), [tokens_label(t) for t in context_lengths], fontsize="small")
        ax.minorticks_off()
        if mark_context is not None:
            ax.axvline(mark_context, color="black", linestyle=":", linewidth=1)
            ax.annotate(mark_label, (mark_context, 0.02), xytext=(3, 0), textcoords="offset points", fontsize="small")
        ax.set_ylim(0, 1)
        ax.set_title(model, fontsize="medium")
        ax.grid(True, which="major", alpha=0.3)
    for ax in axes.flat[len(splits):]:
        ax.set_visible(False)  # an odd number of models leaves one panel empty
    for ax in axes[-1]:
        ax.set_xlabel("context length T (tokens)")
    for ax in axes[:, 0]:
        ax.set_ylabel("share of FLOPs per token")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize="small")
    fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 1))  # leave the bottom strip to the shared legend
    return fig


def model_split_figure(
    flop_split: Mapping[str, int],
    param_split: Mapping[str, int],
    *,
    title: str = "",
) -> Figure:
    """Two bar charts side by side: forward FLOPs per token by part, and parameters by part (shares labelled)."""
    fig, (ax_flops, ax_params) = plt.subplots(1, 2, figsize=(9.6, 3.2))
    for ax, split, unit in ((ax_flops, flop_split, "FLOPs per token"), (ax_params, param_split, "parameters")):
        if not split or any(v < 0 for v in split.values()) or sum(split.values()) <= 0:
            raise ValueError(f"the {unit} split needs non-negative parts with a positive total")
        total = sum(split.values())
        names = [part.replace("_", " ") for part in split]
        bars = ax.barh(names, list(split.values()))
        ax.bar_label(bars, labels=[f"{v / total:.0%}" for v in split.values()], padding=2, fontsize="small")
        ax.invert_yaxis()  # the first part on top
        ax.xaxis.set_major_formatter(EngFormatter())  # 100 M, 1 G
        ax.set_xlabel(unit)
        ax.set_title(f"{unit}: {EngFormatter(places=1)(total)} in all", fontsize="medium")
        ax.set_xlim(0, max(split.values()) * 1.2)  # room for the share labels
        ax.grid(True, axis="x", alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def tile_traffic_figure(
    tiles: Sequence[int],
    moved: Sequence[int],
    *,
    m: int,
    k: int,
    n: int,
    title: str = "Elements a tiled matmul moves",
) -> Figure:
    """Counted traffic of a tiled (m, k) @ (k, n) against the tile size (log-log), with 2mkn/t + mn and the once-each floor."""
    check_series(tiles, moved, "tiles", "moved")
    if min(m, k, n) <= 0:
        raise ValueError(f"m, k and n must be positive, got {m}, {k}, {n}")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    grid = log_grid(tiles[0], tiles[-1], 100) if len(tiles) > 1 else list(tiles)
    ax.plot(grid, [2 * m * k * n / t + m * n for t in grid], color="gray", linestyle="--",
            label="2mkn / tile + mn: ∝ 1 / tile, plus C written once")
    ax.axhline(m * k + k * n + m * n, color="black", linewidth=0.8, label="mk + kn + mn: every element moved once")
    ax.plot(tiles, moved, "o", label="counted by tiled_matmul")
    log_axes(ax, 2)
    return finish(fig, ax, "tile size t (output tiles t × t, k in chunks of t)",
                  "elements moved (reads of A and B, writes of C)", title, legend="upper right")
