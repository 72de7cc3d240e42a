"""Figures of notebooks 07, 10 and 11: quantization error, decode and serving, all-reduce and a DDP step."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from lecturelib.plots.vocab import (
    GB, annotate_points, binary_bytes, check_finite, check_series, check_sweep, finish, finish_panels, label_axes, log_axes, measured_vs_predicted,
    stacked_bars, sweep,
)


def sqnr_vs_bits_figure(
    bits: Sequence[int],
    sqnr_db: dict[str, Sequence[float]],
    points: Sequence[tuple[str, float, float]] = (),
    *,
    db_per_bit: float = 20 * math.log10(2),
    title: str = "Quantization error against bits",
) -> Figure:
    """SQNR (dB) against bits, one line per series, a db_per_bit guide, and labelled (bits, SQNR) points."""
    check_finite(bits, sqnr_db, "bit width")
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    sweep(ax, bits, sqnr_db)
    first = next(iter(sqnr_db.values()))
    guide = [first[-1] + db_per_bit * (b - bits[-1]) for b in bits]  # through the first series' widest point
    ax.plot(bits, guide, color="gray", linestyle="--", linewidth=0.8, label=f"{db_per_bit:.2f} dB per bit")
    annotate_points(ax, points, offset=(5, -4), marker="s", marker_color="black")
    right = max([*bits, *(x for _, x, _ in points)])
    ax.set_xlim(min(bits) - 0.5, right + 0.25 * (right - min(bits)))  # room for the points' labels
    return finish(fig, ax, "bits per value", "SQNR (dB) = 10·log10(Σx² / Σ(x − x̂)²)", title, legend="upper left",
                  grid="major")


def outlier_error_figure(
    magnitudes: Sequence[float],
    db: Mapping[str, Sequence[float]],
    *,
    threshold: float | None = None,
    title: str = "Quantization error against outlier magnitude",
) -> Figure:
    """Signal-to-noise (dB) of several int8 schemes against the magnitude of planted outliers (log x), a line each."""
    check_finite(magnitudes, db, "magnitude")
    if any(not math.isfinite(m) or m <= 0 for m in magnitudes):
        raise ValueError("magnitudes must be positive and finite (they are drawn on a log axis)")
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sweep(ax, magnitudes, db)
    if threshold is not None:
        ax.axvline(threshold, color="gray", linestyle="--", linewidth=0.8, label=f"threshold {threshold:g}")
    log_axes(ax, 2, None)
    return finish(fig, ax, "magnitude of the outlier features", "dB: ordinary features' signal / noise", title,
                  legend="lower left")


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
        check_series(sizes, measured, f"{name} sizes", f"{name} measured seconds")
        check_series(sizes, fitted, f"{name} sizes", f"{name} fitted seconds")
        measured_vs_predicted(ax, sizes, measured, fitted, labels=(f"{name}: measured (fastest call)", f"{name}: α–β fit"),
                              color=f"C{i}", predicted_alpha=0.7)
    log_axes(ax, 2)
    ax.xaxis.set_major_formatter(lambda x, _: binary_bytes(x))  # a function becomes a FuncFormatter
    return finish(fig, ax, "buffer all-reduced (bytes)", "seconds", title, legend="upper left")


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
    stacked_bars(ax, list(rows), ((part, [row.get(part, 0.0) for row in rows.values()]) for part in parts),
                 horizontal=True, segment_text=lambda w: f"{w:.3g}",
                 min_size=0.08 * widest)  # the segments wide enough to hold their value are labelled
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


def decode_batch_figure(
    batches: Sequence[int],
    measured_s: Sequence[float],
    predicted_s: Sequence[float],
    *,
    title: str = "One decode step against the batch",
) -> Figure:
    """Left: seconds per decode step against the batch, measured and predicted (log-log); right: tokens/s per user against in total."""
    check_series(batches, measured_s, "batches", "measured_s")
    check_series(batches, predicted_s, "batches", "predicted_s")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.0, 4.0))
    measured_vs_predicted(left, batches, [t * 1e3 for t in measured_s], [t * 1e3 for t in predicted_s],
                          labels=("measured (median round)", "roofline prediction"), styles=("o-", "k--"))
    log_axes(left, 2)
    label_axes(left, "batch (sequences decoded together)", "ms per step", "Step time", legend="upper left")
    for name, seconds, style in (("measured", measured_s, "o-"), ("roofline prediction", predicted_s, "k--")):
        right.plot([b / t for b, t in zip(batches, seconds)], [1 / t for t in seconds], style, label=name)
    annotate_points(right, [(f"B={b}", b / t, 1 / t) for b, t in zip(batches, measured_s)])
    log_axes(right)
    label_axes(right, "tokens/s in total (throughput)", "tokens/s per sequence (1 / latency)",
               "Throughput against latency", legend="lower left")
    return finish_panels(fig, title)


def decode_roofs_figure(
    batches: Sequence[int],
    step_s: Mapping[str, Sequence[float]],
    *,
    compute_s: Sequence[float] | None = None,
    capacity_batch: Mapping[str, float] | None = None,
    title: str = "Decode step time against the batch (roofline)",
) -> Figure:
    """Predicted seconds per decode step against the batch, one line per series, the compute roof, and where memory runs out."""
    check_sweep(batches, step_s, "batches")
    if compute_s is not None:
        check_series(batches, compute_s, "batches", "compute_s")
    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    lines = dict(zip(step_s, sweep(ax, batches, {name: [t * 1e3 for t in values] for name, values in step_s.items()},
                                   "-")))
    if compute_s is not None:
        ax.plot(batches, [t * 1e3 for t in compute_s], "k:", label="compute alone: 2·N·B / peak")
    for name, batch in (capacity_batch or {}).items():
        if name not in step_s:
            raise ValueError(f"capacity_batch names {name!r}, which is not a series")
        if math.isfinite(batch) and batches[0] <= batch <= batches[-1]:
            ax.axvline(batch, color=lines[name].get_color(), linestyle="--", linewidth=0.8)
            ax.annotate("memory full", (batch, 0.03), xycoords=("data", "axes fraction"), textcoords="offset points",
                        xytext=(-10, 0), rotation=90, fontsize="x-small", color=lines[name].get_color())
    log_axes(ax, 2)
    return finish(fig, ax, "batch (sequences decoded together)", "ms per step (lower bound)", title,
                  legend="upper left")


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
        check_series(batches, seconds, "batches", f"curve {name!r}")
        (line,) = ax.plot([b / t for b, t in zip(batches, seconds)], [1 / t for t in seconds], "o-", markersize=3,
                          label=name)
        for b, t in zip(batches, seconds):
            # the first and last batch, and powers of 8 not crowding the last label
            if b in (batches[0], batches[-1]) or (b & (b - 1) == 0 and math.log2(b) % 3 == 0 and 2 * b <= batches[-1]):
                ax.annotate(f"B={b}", (b / t, 1 / t), textcoords="offset points", xytext=(3, 3), fontsize="x-small",
                            color=line.get_color())
    log_axes(ax)
    return finish(fig, ax, "tokens/s in total (throughput)", "tokens/s per user (1 / time per output token)", title,
                  legend="lower left")


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
    check_series(batches, compute_s, "batches", "compute_s")
    check_series(batches, memory_s, "batches", "memory_s")
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
    log_axes(left, 2)
    label_axes(left, "batch (sequences decoded together)", "ms per decode step", "", legend="upper left")
    stacked_bars(right, [0], (("weights", [weight_bytes / GB]), ("KV cache", [kv_bytes / GB])))
    right.axhline(capacity_bytes / GB, color="black", linestyle="--", linewidth=1,
                  label=f"memory: {capacity_bytes / GB:,.0f} GB")
    right.set_xticks([])
    right.set_ylabel("GB (10⁹ bytes)")
    right.set_ylim(0, 1.15 * max(capacity_bytes, weight_bytes + kv_bytes) / GB)
    right.legend(loc="upper right", fontsize="small")
    return finish_panels(fig, title, fontsize="medium")
