"""Matplotlib figures drawn by the notebooks: each function takes numbers and returns a Figure."""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.ticker import EngFormatter


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
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
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
        diff_ax.set_xlabel("step")
        diff_ax.set_ylabel(f"|loss − {reference}| / {reference}")
        diff_ax.set_title("Relative difference")
        diff_ax.grid(True, alpha=0.3)
        diff_ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig


def _power_law_guide(xs: Sequence[float], anchor_x: float, anchor_y: float, power: int) -> list[float]:
    """y = anchor_y · (x / anchor_x)^power at each x: a guide line through one measured point."""
    return [anchor_y * (x / anchor_x) ** power for x in xs]


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
        _check_series(seq_lens, series, "seq_lens", f"times_s[{label!r}]")
    for label, series in memory_bytes.items():
        if len(series) != len(seq_lens) or any(not math.isfinite(v) for v in series):
            raise ValueError(f"memory_bytes[{label!r}] must be finite and as long as seq_lens")
    fig, (ax_time, ax_memory) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    for label, series in times_s.items():
        ax_time.plot(seq_lens, [t * 1e3 for t in series], "o-", label=label)
    first_times = next(iter(times_s.values()))
    ax_time.plot(seq_lens, _power_law_guide(seq_lens, seq_lens[-1], first_times[-1] * 1e3, 2),
                 color="gray", linestyle="--", label="∝ n²")
    ax_time.set_ylabel("time per call (ms)")
    mib: dict[str, list[tuple[int, float]]] = {
        label: [(n, b / 2**20) for n, b in zip(seq_lens, series) if b > 0] for label, series in memory_bytes.items()
    }
    for label, points in mib.items():
        ax_memory.plot([n for n, _ in points], [m for _, m in points], "o-", label=label)
    first, last = list(mib.values())[0], list(mib.values())[-1]
    if first:
        ax_memory.plot(seq_lens, _power_law_guide(seq_lens, *first[-1], 2), color="gray", linestyle="--", label="∝ n²")
    if last:
        ax_memory.plot(seq_lens, _power_law_guide(seq_lens, *last[-1], 1), color="gray", linestyle=":", label="∝ n")
    ax_memory.set_ylabel("peak memory added (MiB)")
    for ax in (ax_time, ax_memory):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length n")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


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
    bars = {"FLOPs": [f / sum(flops) for f in flops], "time": [t / sum(times_s) for t in times_s]}
    lefts = dict.fromkeys(bars, 0.0)
    for i, step in enumerate(steps):
        widths = [shares[i] for shares in bars.values()]
        ax.barh(list(bars), widths, left=list(lefts.values()), label=step)
        for row, (name, width) in enumerate(zip(bars, widths)):
            if width >= 0.06:  # label the segments wide enough to hold their percentage
                ax.text(lefts[name] + width / 2, row, f"{width:.0%}", ha="center", va="center", fontsize="small")
            lefts[name] += width
    ax.set_xlim(0, 1)
    ax.set_xlabel("share")
    ax.set_title(title)
    ax.invert_yaxis()  # FLOPs on top
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=len(steps), fontsize="small")
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


def _check_split(split: Mapping[str, Sequence[float]], n_points: int, name: str) -> None:
    if not split:
        raise ValueError(f"{name} needs at least one part")
    for part, values in split.items():
        if len(values) != n_points:
            raise ValueError(f"{name}[{part!r}] has {len(values)} values for {n_points} context lengths")
        if any(not math.isfinite(v) or v < 0 for v in values):
            raise ValueError(f"{name}[{part!r}] must be non-negative and finite")


def _tokens_label(tokens: int) -> str:
    """A context length as tick text: 512, 1k, 32k."""
    return f"{tokens // 1024}k" if tokens >= 1024 and tokens % 1024 == 0 else f"{tokens}"


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
        _check_split(split, len(context_lengths), f"splits[{model!r}]")
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
        ax.set_xticks(list(context_lengths), [_tokens_label(t) for t in context_lengths], fontsize="small")
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
    ax.set_xlabel("optimizer step")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig


# ---------------------------------------------------------------------------------------------
# Notebook 01: bandwidth against working set, and one kernel on a device's roofline


def binary_bytes(n_bytes: float) -> str:
    """A byte count in binary units for axis labels: 512 B, 32 KiB, 1 MiB, 1.5 GiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n_bytes >= size:
            return f"{n_bytes / size:.3g} {unit}"
    return f"{n_bytes:.3g} B"


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
        _check_series(sizes, rates, f"{name} sizes", f"{name} bytes/s")
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
    ax.set_xlabel("working set (bytes the op keeps touching)")
    ax.set_ylabel("GB/s (10⁹ bytes per second)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="best", fontsize="small")  # the curves fill a different corner per machine
    fig.tight_layout()
    return fig


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
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("attainable FLOP/s")
    ax.set_title(title or label)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


# --- memory: what a training step holds (notebook 05) --------------------------------------------------------

GB = 10**9  # the unit of the memory figures, as datasheets count it (PyTorch and nvidia-smi print GiB = 2**30)
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
    bottoms = [0.0] * len(labels)
    for i, part in enumerate(parts):
        heights = [columns[label].get(part, 0.0) / GB for label in labels]
        ax.bar(xs, heights, bottom=bottoms, label=part, color=colours(i % 10))
        bottoms = [b + h for b, h in zip(bottoms, heights)]
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


# --- notebook 01: the latency of a dependent load against working set ----------------------------------------


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
        _check_series(sizes, ns, f"{name} sizes", f"{name} ns per load")
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
    ax.set_xlabel("working set (bytes the chain runs through)")
    ax.set_ylabel("ns per dependent load")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="center left", fontsize="small")  # latencies grow to the right; the cache labels hang from the top
    fig.tight_layout()
    return fig


# --- profiling: a trace's timeline, ops on the roofline, memory over time, before and after (notebook 09) -------

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
    grid = [lo * (hi / lo) ** (k / 200) for k in range(201)]
    roof = [min(peak_flop_per_s, x * peak_bytes_per_s) for x in grid]
    fig, ax = plt.subplots(figsize=(6.8, 4.6))
    ax.plot(grid, roof, color="black", label=f"roofline{f' ({memory_name})' if memory_name else ''}: "
                                              f"{peak_bytes_per_s / 1e9:,.3g} GB/s, "
                                              f"{peak_flop_per_s / 1e9:,.3g} GFLOP/s")
    ax.plot(grid, [overhead_fraction * r for r in roof], color="gray", linestyle="--", linewidth=0.8,
            label=f"{overhead_fraction:.0%} of the roofline: overhead below")
    ax.axvline(ridge, color="gray", linestyle=":", linewidth=0.8)
    tier_colors = ("tab:purple", "tab:brown", "tab:olive", "tab:cyan")
    for k, (name, bytes_per_s) in enumerate(memory_tiers):
        ax.plot(grid, [min(peak_flop_per_s, x * bytes_per_s) for x in grid], color=tier_colors[k % 4], linewidth=0.9,
                label=f"{name}'s roof: {bytes_per_s / 1e9:,.3g} GB/s")
    longest = max(p[3] for p in points)
    for verdict, color in VERDICT_COLORS.items():
        mine = [p for p in points if p[4] == verdict]
        if mine:
            ax.scatter([p[1] for p in mine], [p[2] for p in mine], s=[12 + 300 * p[3] / longest for p in mine],
                       color=color, alpha=0.6, edgecolors="black", linewidths=0.4, label=verdict)
    for label, intensity, rate, _, _ in sorted(points, key=lambda p: -p[3])[:labelled]:
        ax.annotate(label, (intensity, rate), textcoords="offset points", xytext=(5, 4), fontsize="x-small")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize="x-small")
    fig.tight_layout()
    return fig


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
    ax.set_xlabel(f"time ({unit})")
    ax.set_ylabel("allocated (MiB)")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="upper left", fontsize="small", ncol=1 + len(names) // 3)
    fig.tight_layout()
    return fig


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
    ax.set_xlabel(f"time from the first sample's loading ({unit})")
    ax.set_ylabel("training steps finished")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower right", fontsize="x-small", ncols=2)
    fig.tight_layout()
    return fig


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
    median = lambda xs: sorted(xs)[len(xs) // 2]
    fig, ax = plt.subplots(figsize=(7.0, 0.9 + 0.9 * len(rows)))
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
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xlabel("time per call ÷ the median before (bars: median rounds; whiskers: fastest and slowest)")
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


# --- tiles: a matmul's memory traffic against its tile size (notebook 02) -------------------------------------


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
    _check_series(tiles, moved, "tiles", "moved")
    if min(m, k, n) <= 0:
        raise ValueError(f"m, k and n must be positive, got {m}, {k}, {n}")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    grid = [tiles[0] * (tiles[-1] / tiles[0]) ** (i / 100) for i in range(101)] if len(tiles) > 1 else list(tiles)
    ax.plot(grid, [2 * m * k * n / t + m * n for t in grid], color="gray", linestyle="--",
            label="2mkn / tile + mn: ∝ 1 / tile, plus C written once")
    ax.axhline(m * k + k * n + m * n, color="black", linewidth=0.8, label="mk + kn + mn: every element moved once")
    ax.plot(tiles, moved, "o", label="counted by tiled_matmul")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tile size t (output tiles t × t, k in chunks of t)")
    ax.set_ylabel("elements moved (reads of A and B, writes of C)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig


def outlier_error_figure(
    magnitudes: Sequence[float],
    db: Mapping[str, Sequence[float]],
    *,
    threshold: float | None = None,
    title: str = "Quantization error against outlier magnitude",
) -> Figure:
    """Signal-to-noise (dB) of several int8 schemes against the magnitude of planted outliers (log x), a line each."""
    if len(magnitudes) == 0 or not db:
        raise ValueError("need at least one magnitude and one series")
    if any(not math.isfinite(m) or m <= 0 for m in magnitudes):
        raise ValueError("magnitudes must be positive and finite (they are drawn on a log axis)")
    for name, values in db.items():
        if len(values) != len(magnitudes) or any(not math.isfinite(v) for v in values):
            raise ValueError(f"series {name!r} must hold one finite value per magnitude")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for name, values in db.items():
        ax.plot(magnitudes, values, "o-", label=name)
    if threshold is not None:
        ax.axvline(threshold, color="gray", linestyle="--", linewidth=0.8, label=f"threshold {threshold:g}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("magnitude of the outlier features")
    ax.set_ylabel("dB: ordinary features' signal / noise")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    fig.tight_layout()
    return fig


# --- communication (notebook 11) -----------------------------------------------------------------


def allreduce_sweep_figure(
    series: Mapping[str, tuple[Sequence[int], Sequence[float], Sequence[float]]],
    *,
    title: str = "All-reduce time against message size",
) -> Figure:
    """Per series (a world size): measured seconds against bytes (points) and the fitted α–β model (a line), log-log."""
    if not series:
        raise ValueError("series needs at least one (sizes, measured, fitted) triple")
    fig, ax = plt.subplots(figsize=(6.6, 4.2))
    for i, (name, (sizes, measured, fitted)) in enumerate(series.items()):
        _check_series(sizes, measured, f"{name} sizes", f"{name} measured seconds")
        _check_series(sizes, fitted, f"{name} sizes", f"{name} fitted seconds")
        color = f"C{i}"
        ax.plot(sizes, measured, "o", color=color, label=f"{name}: measured (fastest call)")
        ax.plot(sizes, fitted, "-", color=color, alpha=0.7, label=f"{name}: α–β fit")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(lambda x, _: binary_bytes(x))  # a function becomes a FuncFormatter
    ax.set_xlabel("buffer all-reduced (bytes)")
    ax.set_ylabel("seconds")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig


def step_parts_figure(
    rows: Mapping[str, Mapping[str, float]],
    *,
    unit: str = "ms",
    title: str = "One training step, part by part",
) -> Figure:
    """One horizontal stacked bar per row (a measured or predicted step): its named parts, in `unit`, labelled."""
    if not rows:
        raise ValueError("rows needs at least one step")
    parts: list[str] = []
    for label, row in rows.items():
        if not row or any(not math.isfinite(v) or v < 0 for v in row.values()):
            raise ValueError(f"row {label!r}: parts must be non-negative and finite")
        parts += [p for p in row if p not in parts]
    n_title_lines = title.count("\n") + 1
    fig, ax = plt.subplots(figsize=(8.0, 1.1 + 0.5 * len(rows) + 0.22 * n_title_lines))
    widest = max(sum(row.values()) for row in rows.values()) or 1.0
    for k, part in enumerate(parts):
        lefts = [sum(row.get(p, 0.0) for p in parts[:k]) for row in rows.values()]
        widths = [row.get(part, 0.0) for row in rows.values()]
        ax.barh(list(rows), widths, left=lefts, color=f"C{k}", label=part)
        for r, (left, width) in enumerate(zip(lefts, widths)):
            if width >= 0.08 * widest:  # label the segments wide enough to hold their value
                ax.text(left + width / 2, r, f"{width:.3g}", ha="center", va="center", fontsize="small")
    for r, row in enumerate(rows.values()):
        ax.text(sum(row.values()), r, f" {sum(row.values()):.3g} {unit}", va="center", fontsize="small")
    ax.set_xlim(0, widest * 1.18)
    ax.invert_yaxis()  # the first row on top
    ax.set_xlabel(unit)
    ax.set_title(title, fontsize="medium")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize="small")
    fig.tight_layout()
    return fig


# --- inference: decode on the roofline, throughput against latency, a serving account (notebook 10) -------


def decode_batch_figure(
    batches: Sequence[int],
    measured_s: Sequence[float],
    predicted_s: Sequence[float],
    *,
    title: str = "One decode step against the batch",
) -> Figure:
    """Left: seconds per decode step against the batch, measured and predicted (log-log); right: tokens/s per user against in total."""
    _check_series(batches, measured_s, "batches", "measured_s")
    _check_series(batches, predicted_s, "batches", "predicted_s")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    left.plot(batches, [t * 1e3 for t in measured_s], "o-", label="measured (median round)")
    left.plot(batches, [t * 1e3 for t in predicted_s], "k--", label="roofline prediction")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("batch (sequences decoded together)")
    left.set_ylabel("ms per step")
    left.set_title("Step time")
    left.grid(True, which="both", alpha=0.3)
    left.legend(loc="upper left", fontsize="small")
    for name, seconds, style in (("measured", measured_s, "o-"), ("roofline prediction", predicted_s, "k--")):
        right.plot([b / t for b, t in zip(batches, seconds)], [1 / t for t in seconds], style, label=name)
    for b, t in zip(batches, measured_s):
        right.annotate(f"B={b}", (b / t, 1 / t), textcoords="offset points", xytext=(4, 4), fontsize="small")
    right.set_xscale("log")
    right.set_yscale("log")
    right.set_xlabel("tokens/s in total (throughput)")
    right.set_ylabel("tokens/s per sequence (1 / latency)")
    right.set_title("Throughput against latency")
    right.grid(True, which="both", alpha=0.3)
    right.legend(loc="lower left", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def decode_roofs_figure(
    batches: Sequence[int],
    step_s: Mapping[str, Sequence[float]],
    *,
    compute_s: Sequence[float] | None = None,
    capacity_batch: Mapping[str, float] | None = None,
    title: str = "Decode step time against the batch (roofline)",
) -> Figure:
    """Predicted seconds per decode step against the batch, one line per series, the compute roof, and where memory runs out."""
    if not step_s:
        raise ValueError("need at least one series")
    for name, values in step_s.items():
        _check_series(batches, values, "batches", f"series {name!r}")
    if compute_s is not None:
        _check_series(batches, compute_s, "batches", "compute_s")
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    lines = {}
    for name, values in step_s.items():
        (lines[name],) = ax.plot(batches, [t * 1e3 for t in values], "-", label=name)
    if compute_s is not None:
        ax.plot(batches, [t * 1e3 for t in compute_s], "k:", label="compute alone: 2·N·B / peak")
    for name, batch in (capacity_batch or {}).items():
        if name not in step_s:
            raise ValueError(f"capacity_batch names {name!r}, which is not a series")
        if math.isfinite(batch) and batches[0] <= batch <= batches[-1]:
            ax.axvline(batch, color=lines[name].get_color(), linestyle="--", linewidth=0.8)
            ax.annotate("memory full", (batch, 0.03), xycoords=("data", "axes fraction"), textcoords="offset points",
                        xytext=(-10, 0), rotation=90, fontsize="x-small", color=lines[name].get_color())
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch (sequences decoded together)")
    ax.set_ylabel("ms per step (lower bound)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    return fig


def throughput_latency_figure(
    curves: Mapping[str, tuple[Sequence[int], Sequence[float]]],
    *,
    title: str = "Serving: each user's tokens/s against the device's",
) -> Figure:
    """Per-user tokens/s (1 / step time) against total tokens/s (batch / step time), one curve per (batches, step seconds)."""
    if not curves:
        raise ValueError("need at least one curve")
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for name, (batches, seconds) in curves.items():
        _check_series(batches, seconds, "batches", f"curve {name!r}")
        (line,) = ax.plot([b / t for b, t in zip(batches, seconds)], [1 / t for t in seconds], "o-", markersize=3,
                          label=name)
        for b, t in zip(batches, seconds):
            # the first and last batch, and powers of 8 not crowding the last label
            if b in (batches[0], batches[-1]) or (b & (b - 1) == 0 and math.log2(b) % 3 == 0 and 2 * b <= batches[-1]):
                ax.annotate(f"B={b}", (b / t, 1 / t), textcoords="offset points", xytext=(3, 3), fontsize="x-small",
                            color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("tokens/s in total (throughput)")
    ax.set_ylabel("tokens/s per user (1 / time per output token)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower left", fontsize="small")
    fig.tight_layout()
    return fig


def serving_figure(
    batches: Sequence[int],
    compute_s: Sequence[float],
    memory_s: Sequence[float],
    *,
    batch: int,
    weight_bytes: float,
    kv_bytes: float,
    capacity_bytes: float,
    title: str,
) -> Figure:
    """Left: the decode step's two roofs against the batch, the chosen batch marked; right: weights + KV cache against memory."""
    _check_series(batches, compute_s, "batches", "compute_s")
    _check_series(batches, memory_s, "batches", "memory_s")
    if batch <= 0 or min(weight_bytes, kv_bytes) < 0 or not capacity_bytes > 0:
        raise ValueError("batch and capacity_bytes must be positive, weight_bytes and kv_bytes >= 0")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0), gridspec_kw={"width_ratios": [2.2, 1]})
    left.plot(batches, [t * 1e3 for t in memory_s], "-", label="memory: (weights + KV) / bandwidth")
    left.plot(batches, [t * 1e3 for t in compute_s], "-", label="compute: 2·N·B / peak")
    step = [max(c, m) * 1e3 for c, m in zip(compute_s, memory_s)]
    left.plot(batches, step, "k--", linewidth=1, label="step time: the larger")
    if batch in batches:
        k = list(batches).index(batch)
        left.plot([batch], [step[k]], "ro", label=f"B = {batch}")
    left.set_xscale("log", base=2)
    left.set_yscale("log")
    left.set_xlabel("batch (sequences decoded together)")
    left.set_ylabel("ms per decode step")
    left.grid(True, which="both", alpha=0.3)
    left.legend(loc="upper left", fontsize="small")
    right.bar([0], [weight_bytes / GB], label="weights")
    right.bar([0], [kv_bytes / GB], bottom=[weight_bytes / GB], label="KV cache")
    right.axhline(capacity_bytes / GB, color="black", linestyle="--", linewidth=1,
                  label=f"memory: {capacity_bytes / GB:,.0f} GB")
    right.set_xticks([])
    right.set_ylabel("GB (10⁹ bytes)")
    right.set_ylim(0, 1.15 * max(capacity_bytes, weight_bytes + kv_bytes) / GB)
    right.legend(loc="upper right", fontsize="small")
    fig.suptitle(title, fontsize="medium")
    fig.tight_layout()
    return fig


def _check_fractions(fractions: Sequence[float], name: str) -> None:
    if len(fractions) == 0 or any(not (0.0 <= f <= 1.0) for f in fractions):
        raise ValueError(f"{name} must be non-empty fractions in [0, 1]")


def sparse_matmul_figure(
    sparsities: Sequence[float],
    dense_s: Sequence[float],
    csr_s: Sequence[float],
    dense_bytes: Sequence[float],
    csr_bytes: Sequence[float],
    *,
    crossover: float | None = None,
    title: str = "A dense and a CSR matmul as the weight loses entries",
) -> Figure:
    """Left: time per matmul against the fraction of zeros, dense and CSR (log y), the crossover marked; right: bytes."""
    _check_fractions(sparsities, "sparsities")
    for name, series in (("dense_s", dense_s), ("csr_s", csr_s), ("dense_bytes", dense_bytes), ("csr_bytes", csr_bytes)):
        if len(series) != len(sparsities) or any(not math.isfinite(v) or v <= 0 for v in series):
            raise ValueError(f"{name} must hold one positive, finite value per sparsity")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    percent = [100 * s for s in sparsities]
    left.plot(percent, [t * 1e3 for t in dense_s], "o-", label="dense kernel (zeros multiplied)")
    left.plot(percent, [t * 1e3 for t in csr_s], "s-", label="CSR (torch.sparse)")
    if crossover is not None:
        left.axvline(100 * crossover, color="black", linestyle="--", linewidth=1,
                     label=f"CSR faster in every round from {crossover:.0%}")
    left.set_yscale("log")
    left.set_ylabel("ms per matmul (median round)")
    left.set_title("Time")
    right.plot(percent, [b / 2**20 for b in dense_bytes], "o-", label="dense: every entry")
    right.plot(percent, [b / 2**20 for b in csr_bytes], "s-", label="CSR: values + column indices + row offsets")
    right.set_ylabel("MiB of the weight")
    right.set_ylim(bottom=0)
    right.set_title("Bytes")
    for ax in (left, right):
        ax.set_xlabel("zeros in the weight (%)")
        ax.set_xlim(0, 100)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower left", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def pruning_speed_figure(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    *,
    title: str = "What each kind of pruning buys in time",
) -> Figure:
    """Time ÷ the unpruned time against the share of multiply-adds kept (log-log), with "∝ work" and "no saving" guides."""
    # x: the multiply-adds a perfect kernel would still do (1 − sparsity, or the share of hidden units kept);
    # y: what the kernel actually took, relative to the unpruned weight's time in the same comparison.
    if not series:
        raise ValueError("need at least one series")
    for label, (kept, ratio) in series.items():
        _check_series(kept, ratio, f"{label}: kept", f"{label}: time ratio")
        if any(k > 1 for k in kept):
            raise ValueError(f"{label}: the share of work kept is at most 1")
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for label, (kept, ratio) in series.items():
        ax.plot(kept, ratio, "o-", label=label)
    lo = min(min(kept) for kept, _ in series.values())
    guide = [lo, 1.0]
    ax.plot(guide, guide, color="gray", linestyle="--", label="time ∝ multiply-adds kept")
    ax.plot(guide, [1.0, 1.0], color="black", linestyle=":", label="no saving")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("share of the multiply-adds kept")
    ax.set_ylabel("time ÷ time of the unpruned weight")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def pruning_accuracy_figure(
    curves: Mapping[str, tuple[Sequence[float], Sequence[float], Sequence[float]]],
    *,
    dense_accuracy: float,
    chance_accuracy: float,
    title: str = "Accuracy after pruning, without and with a fine-tune",
) -> Figure:
    """Test accuracy against the fraction pruned: per method, dashed before and solid after fine-tuning."""
    if not curves:
        raise ValueError("need at least one method")
    for label, (pruned, before, after) in curves.items():
        _check_fractions(pruned, f"{label}: pruned")
        _check_fractions([*before, *after], f"{label}: accuracies")
        if not len(before) == len(after) == len(pruned):
            raise ValueError(f"{label}: one accuracy before and one after per fraction pruned")
    _check_fractions([dense_accuracy, chance_accuracy], "dense_accuracy and chance_accuracy")
    fig, ax = plt.subplots(figsize=(6.8, 4.4))
    for k, (label, (pruned, before, after)) in enumerate(curves.items()):
        color, marker = f"C{k}", "osD^v<>"[k % 7]  # a marker per method: points at the same fraction stay apart
        percent = [100 * p for p in pruned]
        ax.plot(percent, [100 * a for a in before], linestyle="--", marker=marker, color=color, label=f"{label}: pruned")
        ax.plot(percent, [100 * a for a in after], linestyle="-", marker=marker, color=color, label=f"{label}: + fine-tune")
    ax.axhline(100 * dense_accuracy, color="black", linewidth=1, label="unpruned")
    ax.axhline(100 * chance_accuracy, color="gray", linestyle=":", label="always the commonest class")
    ax.set_xlabel("pruned (% of the weights or hidden units)")
    ax.set_ylabel("test accuracy (%)")
    ax.set_xlim(0, 100)
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend(loc="lower left", fontsize="x-small")
    fig.tight_layout()
    return fig


def distillation_temperature_figure(
    temperature: float,
    probabilities: Mapping[str, Sequence[float]],
    temperatures: Sequence[float],
    grad_norms: Mapping[str, Sequence[float]],
    *,
    title: str = "Soft targets and the soft term's gradient",
) -> Figure:
    """Left: softmax(logits / T) per model at one T (bars per class); right: gradient norm against T (log-log), T marked."""
    if not probabilities or not grad_norms or not math.isfinite(temperature) or temperature <= 0:
        raise ValueError("need probabilities, gradient norms and a positive temperature")
    n_classes = len(next(iter(probabilities.values())))
    if n_classes == 0 or any(len(p) != n_classes for p in probabilities.values()):
        raise ValueError("every model needs one probability per class, and the same classes")
    _check_fractions([v for p in probabilities.values() for v in p], "probabilities")
    for label, norms in grad_norms.items():
        _check_series(temperatures, norms, "temperatures", f"grad_norms[{label!r}]")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    width = 0.8 / len(probabilities)
    for k, (label, probs) in enumerate(probabilities.items()):
        left.bar([c - 0.4 + width * (k + 0.5) for c in range(n_classes)], probs, width=width, label=label)
    left.set_xticks(range(n_classes))
    left.set_xlabel("class")
    left.set_ylabel(f"softmax(logits / T), T = {temperature:g}")
    left.set_ylim(0, 1)
    left.set_title("Soft targets")
    left.legend(loc="upper right", fontsize="small")
    for label, norms in grad_norms.items():
        right.plot(temperatures, norms, "o-", label=label)
    first = next(iter(grad_norms.values()))
    right.plot(temperatures, _power_law_guide(temperatures, temperatures[-1], first[-1], -2),
               color="gray", linestyle="--", label="∝ T⁻²")
    right.axvline(temperature, color="black", linestyle=":", linewidth=1, label=f"T = {temperature:g}")
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("temperature T")
    right.set_ylabel("‖∂ soft term / ∂ student logits‖")
    right.set_title("Gradient of the soft term")
    right.grid(True, which="both", alpha=0.3)
    right.legend(loc="lower left", fontsize="small")
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def distillation_accuracy_figure(
    temperatures: Sequence[float],
    accuracies: Mapping[str, Sequence[float]],
    *,
    references: Mapping[str, float],
    title: str = "The student's accuracy against the temperature",
) -> Figure:
    """Test accuracy of students against the distillation temperature, with horizontal reference accuracies."""
    if not accuracies or len(temperatures) == 0 or any(not math.isfinite(t) or t <= 0 for t in temperatures):
        raise ValueError("need at least one series of accuracies and positive, finite temperatures")
    for label, series in accuracies.items():
        if len(series) != len(temperatures):
            raise ValueError(f"accuracies[{label!r}] needs one accuracy per temperature")
        _check_fractions(series, f"accuracies[{label!r}]")
    if any(not 0.0 <= a <= 1.0 for a in references.values()):
        raise ValueError("reference accuracies must lie in [0, 1]")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for label, series in accuracies.items():
        ax.plot(temperatures, [100 * a for a in series], "o-", label=label)
    for k, (label, accuracy) in enumerate(references.items()):
        ax.axhline(100 * accuracy, color=f"C{k + len(accuracies)}", linestyle="--", linewidth=1, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("temperature T")
    ax.set_ylabel("test accuracy (%)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize="small")
    fig.tight_layout()
    return fig


def compression_figure(
    versions: Sequence[str],
    weight_bytes: Sequence[float],
    decode_s: Sequence[float],
    accuracy: Sequence[float],
    *,
    title: str = "What compression buys, and what it costs",
) -> Figure:
    """Left: decode time per token of each version (bars, weights in GB beside); right: accuracy of its analogue (bars)."""
    if len(versions) == 0 or not len(versions) == len(weight_bytes) == len(decode_s) == len(accuracy):
        raise ValueError("one weight size, decode time and accuracy per version")
    if any(not math.isfinite(v) or v <= 0 for v in (*weight_bytes, *decode_s)):
        raise ValueError("weight_bytes and decode_s must be positive and finite")
    _check_fractions(accuracy, "accuracy")
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 0.9 + 0.45 * len(versions)), sharey=True,
                                      gridspec_kw={"width_ratios": [1.6, 1]})
    rows = range(len(versions))
    left.barh(rows, [t * 1e3 for t in decode_s], color="tab:blue")
    for r, (t, b) in enumerate(zip(decode_s, weight_bytes)):
        left.text(t * 1e3, r, f" {t * 1e3:.2f} ms, {b / GB:.1f} GB", va="center", fontsize="small")
    left.set_xlim(0, 1.45 * max(decode_s) * 1e3)
    left.set_yticks(list(rows), list(versions))
    left.set_ylim(len(versions) - 0.5, -0.5)
    left.set_xlabel("decode ms per token (roofline; weights in GB beside)")
    left.grid(True, axis="x", alpha=0.3)
    right.barh(rows, [100 * a for a in accuracy], color="tab:green")
    for r, a in enumerate(accuracy):
        right.text(100 * a, r, f" {100 * a:.1f}", va="center", fontsize="small")
    right.set_xlim(0, 115)
    right.set_xlabel("accuracy of the same method on this notebook's MLP (%)")
    right.grid(True, axis="x", alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    return fig
