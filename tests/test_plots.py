"""Tests of lecturelib.plots: each figure draws exactly the numbers it was given (Agg backend, no display)."""

import matplotlib

matplotlib.use("Agg")  # before pyplot is imported anywhere: no window, no display needed

import matplotlib.pyplot as plt
import pytest

from lecturelib import plots


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_throughput_figure_draws_measurements_and_reference():
    fig = plots.throughput_figure([64, 128, 256], [1e9, 4e9, 8e9], reference_flop_per_s=1e10, reference_label="peak")
    (ax,) = fig.axes
    measured, reference = ax.lines
    assert list(measured.get_xdata()) == [64, 128, 256]
    assert list(measured.get_ydata()) == [1e9, 4e9, 8e9]
    assert list(reference.get_ydata()) == [1e10, 1e10]  # a horizontal line at the reference
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["measured torch.mm", "peak"]


def test_throughput_figure_adds_prediction_line():
    fig = plots.throughput_figure(
        [64, 128], [1e9, 2e9], reference_flop_per_s=3e9, reference_label="best", prediction_flop_per_s=5e8
    )
    (ax,) = fig.axes
    assert len(ax.lines) == 3  # measured, reference, prediction
    assert list(ax.lines[2].get_ydata()) == [5e8, 5e8]


@pytest.mark.parametrize(
    ("sizes", "rates"),
    [([], []), ([64, 128], [1e9]), ([64], [0.0]), ([64], [float("nan")]), ([-1], [1e9])],
)
def test_throughput_figure_rejects_bad_series(sizes, rates):
    with pytest.raises(ValueError):
        plots.throughput_figure(sizes, rates, reference_flop_per_s=1e9, reference_label="peak")


@pytest.mark.parametrize("reference", [0.0, -1.0, float("inf")])
def test_throughput_figure_rejects_bad_reference(reference):
    with pytest.raises(ValueError):
        plots.throughput_figure([64], [1e9], reference_flop_per_s=reference, reference_label="peak")


def test_relative_gap_figure_draws_given_points():
    ks = [1, 2, 4]
    gaps = [1 / 2, 1 / 4, 1 / 8]  # 1/(2k)
    fig = plots.relative_gap_figure(ks, gaps)
    (ax,) = fig.axes
    (line,) = ax.lines
    assert list(line.get_xdata()) == ks
    assert list(line.get_ydata()) == gaps


def test_relative_gap_figure_rejects_mismatched_lengths():
    with pytest.raises(ValueError):
        plots.relative_gap_figure([1, 2], [0.5])


def test_roofline_figure_draws_roofs_and_points():
    # peak 1e12 FLOP/s; DRAM 1e11 B/s (ridge 10), cache 1e12 B/s (ridge 1)
    fig = plots.roofline_figure(1e12, {"DRAM": 1e11, "L2": 1e12}, [("add", 1 / 12, 8e9), ("mm", 100.0, 9e11)])
    (ax,) = fig.axes
    dram, cache, peak, add, mm = ax.lines
    assert max(dram.get_ydata()) == 1e12 and min(dram.get_ydata()) == min(dram.get_xdata()) * 1e11
    assert list(peak.get_ydata()) == [1e12, 1e12]
    assert (list(add.get_xdata()), list(add.get_ydata())) == ([1 / 12], [8e9])
    assert (list(mm.get_xdata()), list(mm.get_ydata())) == ([100.0], [9e11])
    assert [t.get_text() for t in ax.texts] == ["add", "mm"]
    lo, hi = ax.get_xlim()
    assert lo <= 1 / 12 and hi >= 100.0  # every point and ridge in view


@pytest.mark.parametrize(
    ("peak", "roofs", "points"),
    [(0.0, {"DRAM": 1e9}, []), (1e12, {}, []), (1e12, {"DRAM": -1.0}, []), (1e12, {"DRAM": 1e9}, [("x", 0.0, 1e9)])],
)
def test_roofline_figure_rejects_bad_input(peak, roofs, points):
    with pytest.raises(ValueError):
        plots.roofline_figure(peak, roofs, points)


def test_fixed_cost_figure_draws_points_fit_and_asymptotes():
    sizes, work = [8, 64, 512], [2 * 8**3, 2 * 64**3, 2 * 512**3]
    seconds = [2e-6 + x / 1e10 for x in work]
    fig = plots.fixed_cost_figure(sizes, seconds, work, fixed_s=2e-6, rate_per_s=1e10)
    (ax,) = fig.axes
    measured, fit, rate_only, fixed = ax.lines
    assert list(measured.get_ydata()) == seconds
    assert list(fit.get_ydata()) == pytest.approx(seconds)  # the exact line goes through every point
    assert list(rate_only.get_ydata()) == [x / 1e10 for x in work]
    assert list(fixed.get_ydata()) == [2e-6, 2e-6]


def test_fixed_cost_figure_rejects_bad_input():
    with pytest.raises(ValueError):
        plots.fixed_cost_figure([8, 16], [1e-6, 2e-6], [1.0], fixed_s=0.0, rate_per_s=1e9)
    with pytest.raises(ValueError):
        plots.fixed_cost_figure([8], [1e-6], [1.0], fixed_s=0.0, rate_per_s=0.0)


def test_loss_curves_figure_draws_each_run_and_relative_differences():
    curves = {"manual": [8.0, 4.0, 2.0], "autograd": [8.0, 4.0, 2.0], "module": [8.0, 5.0, 2.5]}
    fig = plots.loss_curves_figure(curves, reference="manual")
    loss_ax, diff_ax = fig.axes
    assert [list(line.get_ydata()) for line in loss_ax.lines] == list(curves.values())
    assert list(loss_ax.lines[0].get_xdata()) == [0, 1, 2]  # steps from 0
    assert loss_ax.get_yscale() == "log"
    assert [t.get_text() for t in loss_ax.get_legend().get_texts()] == ["manual", "autograd", "module"]
    autograd, module = diff_ax.lines  # the reference is not compared with itself
    assert list(autograd.get_ydata()) == [0.0, 0.0, 0.0]  # identical runs
    assert list(module.get_ydata()) == [0.0, 0.25, 0.25]  # |5 - 4| / 4, |2.5 - 2| / 2
    assert [t.get_text() for t in diff_ax.get_legend().get_texts()] == ["autograd vs manual", "module vs manual"]


def test_loss_curves_figure_without_reference_has_one_panel():
    fig = plots.loss_curves_figure({"run": [3.0, 2.0, 1.0]})
    (ax,) = fig.axes
    assert list(ax.lines[0].get_ydata()) == [3.0, 2.0, 1.0]


@pytest.mark.parametrize(
    ("curves", "reference"),
    [
        ({}, None),  # no run
        ({"a": []}, None),  # no step
        ({"a": [1.0, 2.0], "b": [1.0]}, None),  # runs of different lengths
        ({"a": [1.0, 0.0]}, None),  # a zero loss cannot be drawn on a log axis
        ({"a": [1.0, float("nan")]}, None),  # a diverged run
        ({"a": [1.0]}, "b"),  # unknown reference
    ],
)
def test_loss_curves_figure_rejects_bad_input(curves, reference):
    with pytest.raises(ValueError):
        plots.loss_curves_figure(curves, reference=reference)


def test_loss_curves_figure_keeps_each_runs_colour_in_both_panels():
    fig = plots.loss_curves_figure({"a": [2.0, 1.0], "b": [2.0, 1.5], "c": [2.0, 0.5]}, reference="a")
    loss_ax, diff_ax = fig.axes
    assert [line.get_color() for line in diff_ax.lines] == [line.get_color() for line in loss_ax.lines[1:]]


def test_attention_scaling_figure_draws_series_and_guides():
    ns = [256, 512, 1024]
    times = {"naive": [1e-3, 4e-3, 16e-3], "fused": [1e-3, 3e-3, 9e-3]}
    memory = {"naive": [2**21, 2**23, 2**25], "fused": [0, 2**20, 2**21]}  # a 0 reading is left out
    fig = plots.attention_scaling_figure(ns, times, memory)
    ax_time, ax_memory = fig.axes
    naive, fused, guide = ax_time.lines
    assert list(naive.get_ydata()) == [1.0, 4.0, 16.0]  # milliseconds
    assert list(guide.get_ydata()) == [1.0, 4.0, 16.0]  # n² through the last naive point
    naive_mib, fused_mib, square, linear = ax_memory.lines
    assert list(naive_mib.get_ydata()) == [2.0, 8.0, 32.0]  # MiB
    assert list(fused_mib.get_xdata()) == [512, 1024]
    assert list(square.get_ydata()) == [2.0, 8.0, 32.0]  # n² through the last naive point
    assert list(linear.get_ydata()) == [0.5, 1.0, 2.0]  # n through the last fused point
    assert all((ax.get_xscale(), ax.get_yscale()) == ("log", "log") for ax in fig.axes)


@pytest.mark.parametrize(
    ("times", "memory"),
    [({}, {"a": [1.0]}), ({"a": [1.0]}, {}), ({"a": [0.0]}, {"a": [1.0]}), ({"a": [1.0]}, {"a": [1.0, 2.0]})],
)
def test_attention_scaling_figure_rejects_bad_input(times, memory):
    with pytest.raises(ValueError):
        plots.attention_scaling_figure([128], times, memory)


def test_step_share_figure_bars_are_shares():
    fig = plots.step_share_figure(["QKᵀ", "softmax", "PV"], [40.0, 2.0, 40.0], [1.0, 2.0, 1.0])
    (ax,) = fig.axes
    widths = [round(patch.get_width(), 6) for patch in ax.patches]  # per step: (FLOPs, time)
    assert widths == [round(40 / 82, 6), 0.25, round(2 / 82, 6), 0.5, round(40 / 82, 6), 0.25]
    assert "50%" in [t.get_text() for t in ax.texts]  # softmax's share of the time


@pytest.mark.parametrize(("flops", "times"), [([1.0], [1.0, 2.0]), ([0.0, 0.0], [1.0, 1.0]), ([1.0, -1.0], [1.0, 1.0])])
def test_step_share_figure_rejects_bad_input(flops, times):
    with pytest.raises(ValueError):
        plots.step_share_figure(["a", "b"][: len(flops)], flops, times)


# --- quantization (notebook 07) --------------------------------------------------------------


def test_sqnr_vs_bits_figure_draws_series_guide_and_points():
    fig = plots.sqnr_vs_bits_figure([4, 8], {"uniform": [20.0, 44.0], "gaussian": [15.0, 39.0]}, [("fp16", 16, 70.0)])
    (ax,) = fig.axes
    uniform, gaussian, guide, fp16 = ax.lines
    assert list(uniform.get_xdata()) == [4, 8] and list(uniform.get_ydata()) == [20.0, 44.0]
    assert list(gaussian.get_ydata()) == [15.0, 39.0]
    assert guide.get_ydata()[0] == pytest.approx(44.0 - 4 * 6.0206, abs=1e-3)  # 6.02 dB per bit through the last point
    assert (list(fp16.get_xdata()), list(fp16.get_ydata())) == ([16], [70.0])
    assert [t.get_text() for t in ax.texts] == ["fp16"]
    assert ax.get_xlim()[1] > 16  # the label of the rightmost point fits


@pytest.mark.parametrize("series", [{}, {"a": [1.0]}, {"a": [1.0, float("inf")]}])
def test_sqnr_vs_bits_figure_rejects_bad_series(series):
    with pytest.raises(ValueError):
        plots.sqnr_vs_bits_figure([4, 8], series)


def test_flop_split_figure_stacks_shares_per_model():
    splits = {
        "a": {"mlp": [3, 1], "scores": [1, 3]},
        "b": {"mlp": [2, 2], "scores": [2, 6]},
        "c": {"mlp": [1, 1], "scores": [0, 1]},
    }
    fig = plots.flop_split_figure([128, 256], splits)
    visible = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in visible] == ["a", "b", "c"]  # 2 × 2 grid, the fourth panel hidden
    for ax, split in zip(visible, splits.values()):
        mlp, scores = ax.collections  # one filled band per part
        top = max(y for path in scores.get_paths() for _, y in path.vertices)
        assert top == pytest.approx(1.0)  # the shares of each context length stack up to 1
        assert ax.get_xscale() == "log"
    band = visible[0].collections[0].get_paths()[0].vertices  # model "a", mlp: shares 3/4 then 1/4
    assert max(y for x, y in band if x == 128) == pytest.approx(0.75)
    assert max(y for x, y in band if x == 256) == pytest.approx(0.25)
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["mlp", "scores"]
    assert [t.get_text() for t in visible[2].get_xticklabels()] == ["128", "256"]  # the bottom row is labelled


def test_flop_split_figure_marks_a_context_length():
    fig = plots.flop_split_figure([512, 1024, 2048], {"a": {"mlp": [1, 1, 1]}}, mark_context=1024, mark_label="n_ctx")
    (ax, *_) = fig.axes
    (line,) = ax.lines
    assert list(line.get_xdata()) == [1024, 1024]
    assert [t.get_text() for t in ax.texts] == ["n_ctx"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["512", "1k", "2k"]


@pytest.mark.parametrize(
    ("lengths", "splits"),
    [
        ([], {"a": {"mlp": []}}),
        ([128], {}),
        ([128, 256], {"a": {"mlp": [1]}}),  # one value for two context lengths
        ([0], {"a": {"mlp": [1]}}),
        ([128], {"a": {"mlp": [-1]}}),
        ([128], {"a": {"mlp": [0], "scores": [0]}}),  # nothing to share out
    ],
)
def test_flop_split_figure_rejects_bad_input(lengths, splits):
    with pytest.raises(ValueError):
        plots.flop_split_figure(lengths, splits)


def test_model_split_figure_draws_both_splits():
    fig = plots.model_split_figure({"mlp": 3, "lm_head": 1}, {"embeddings": 5, "blocks": 15}, title="t")
    ax_flops, ax_params = fig.axes
    assert [bar.get_width() for bar in ax_flops.patches] == [3, 1]
    assert [bar.get_width() for bar in ax_params.patches] == [5, 15]
    assert [t.get_text() for t in ax_flops.texts] == ["75%", "25%"]  # share labels
    assert [t.get_text() for t in ax_params.get_yticklabels()] == ["embeddings", "blocks"]
    assert fig._suptitle.get_text() == "t"


@pytest.mark.parametrize("split", [{}, {"mlp": 0}, {"mlp": -1, "head": 2}])
def test_model_split_figure_rejects_bad_split(split):
    with pytest.raises(ValueError):
        plots.model_split_figure(split, {"blocks": 1})


def test_step_curves_figure_draws_each_series_from_first_step():
    fig = plots.step_curves_figure(
        {"fp32": [5.0, 4.0, 3.0], "bf16": [5.1, 4.1, 3.1]}, ylabel="loss", title="t", first_step=5,
        reference=1.386, reference_label="floor",
    )
    (ax,) = fig.axes
    fp32, bf16, floor = ax.lines
    assert list(fp32.get_xdata()) == [5, 6, 7]
    assert list(bf16.get_ydata()) == [5.1, 4.1, 3.1]
    assert list(floor.get_ydata()) == [1.386, 1.386]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["fp32", "bf16", "floor"]
    assert ax.get_yscale() == "linear"


def test_step_curves_figure_log_axis():
    fig = plots.step_curves_figure({"lr": [1e-4, 1e-3]}, ylabel="lr", title="t", logy=True)
    assert fig.axes[0].get_yscale() == "log"


@pytest.mark.parametrize(
    ("curves", "logy"),
    [({}, False), ({"a": []}, False), ({"a": [1.0, float("nan")]}, False), ({"a": [0.0]}, True)],
)
def test_step_curves_figure_rejects_bad_series(curves, logy):
    with pytest.raises(ValueError):
        plots.step_curves_figure(curves, ylabel="y", title="t", logy=logy)


# ---------------------------------------------------------------------------------------------
# Notebook 01: bandwidth sweep and one kernel on a roofline


def test_binary_bytes_formats_powers_of_two():
    assert [plots.binary_bytes(n) for n in (512, 32768, 2**20, 1.5 * 2**30)] == ["512 B", "32 KiB", "1 MiB", "1.5 GiB"]


def test_bandwidth_sweep_figure_draws_series_and_cache_lines():
    fig = plots.bandwidth_sweep_figure(
        {"read": ([1024, 2048, 4096], [200e9, 100e9, 20e9]), "copy": ([2048, 8192], [5e9, 50e9])},
        {"L1d": 2048, "L2": 4096},
    )
    (ax,) = fig.axes
    read, copy, l1, l2 = ax.lines
    assert list(read.get_xdata()) == [1024, 2048, 4096]
    assert list(read.get_ydata()) == [200.0, 100.0, 20.0]  # drawn in GB/s
    assert list(copy.get_ydata()) == [5.0, 50.0]
    assert list(l1.get_xdata()) == [2048, 2048] and list(l2.get_xdata()) == [4096, 4096]  # vertical lines
    assert [t.get_text() for t in ax.texts] == ["L1d 2 KiB", "L2 4 KiB"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["read", "copy"]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")


@pytest.mark.parametrize(
    ("series", "caches"),
    [({}, {}), ({"read": ([1024], [0.0])}, {}), ({"read": ([1024, 2048], [1e9])}, {}),
     ({"read": ([1024], [1e9])}, {"L1d": 0})],
)
def test_bandwidth_sweep_figure_rejects_bad_input(series, caches):
    with pytest.raises(ValueError):
        plots.bandwidth_sweep_figure(series, caches)


@pytest.mark.parametrize(("intensity", "rate", "bound"), [(1.0, 1e11, "memory-bound"), (100.0, 1e12, "compute-bound")])
def test_kernel_roofline_figure_puts_the_point_on_the_roof(intensity, rate, bound):
    # peak 1e12 FLOP/s, 1e11 B/s: ridge 10 FLOP/byte
    fig = plots.kernel_roofline_figure(1e12, 1e11, intensity, label="k")
    (ax,) = fig.axes
    roof, ridge, point = ax.lines
    assert list(ridge.get_xdata()) == [10.0, 10.0]
    assert (list(point.get_xdata()), list(point.get_ydata())) == ([intensity], [rate])
    assert ax.get_legend().get_texts()[-1].get_text() == f"k: {bound}"
    assert ax.get_xlim() == (2.0**-4, 2.0**14)  # fixed axes: only the point moves


@pytest.mark.parametrize("args", [(0.0, 1e11, 1.0), (1e12, 1e11, -1.0), (1e12, float("inf"), 1.0)])
def test_kernel_roofline_figure_rejects_bad_input(args):
    with pytest.raises(ValueError):
        plots.kernel_roofline_figure(*args, label="k")
    with pytest.raises(ValueError):
        plots.kernel_roofline_figure(1e12, 1e11, 1.0, label="k", intensity_range=(8.0, 1.0))


# --- memory figures (notebook 05) ------------------------------------------------------------------------------

def test_memory_stack_figure_stacks_parts_in_gb():
    columns = {"fp32": {"weights": 2e9, "gradients": 1e9, "logits": 0.0},
               "bf16": {"weights": 1e9, "logits": 3e9}}
    fig = plots.memory_stack_figure(columns, capacity_bytes=4e9, capacity_label="GPU")
    (ax,) = fig.axes
    bars = ax.containers  # one BarContainer per non-zero part: weights, gradients, logits
    assert [b.get_label() for b in bars] == ["weights", "gradients", "logits"]
    assert [r.get_height() for r in bars[0]] == [2.0, 1.0]
    assert [r.get_y() for r in bars[2]] == [3.0, 1.0]  # logits sit on weights + gradients
    assert list(ax.lines[0].get_ydata()) == [4.0, 4.0]  # the capacity line
    assert "GPU: 4 GB" in [t.get_text() for t in ax.get_legend().get_texts()]
    assert ax.get_ylim()[1] >= 4.0  # the capacity line and the totals stay inside the axes


def test_memory_stack_figure_wraps_each_label_to_the_width_of_one_bar():
    fig = plots.memory_stack_figure({"bf16-autocast-adamw\nnone recompute": {"w": 1e9}, "fp32": {"w": 2e9}})
    (ax,) = fig.axes
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == ["bf16-autocast-\nadamw\nnone recompute", "fp32"]  # broken after the hyphen, lines kept
    assert all(len(line) <= plots.MEMORY_LABEL_CHARS for tick in ticks for line in tick.split("\n"))


@pytest.mark.parametrize("columns", [{}, {"a": {"w": -1.0}}, {"a": {"w": float("nan")}}])
def test_memory_stack_figure_rejects_bad_columns(columns):
    with pytest.raises(ValueError):
        plots.memory_stack_figure(columns)


def test_peak_comparison_figure_draws_one_bar_per_series_and_label():
    fig = plots.peak_comparison_figure(["a", "b"], {"predicted": [2**20, 2 * 2**20], "measured": [3 * 2**20, 0.0]})
    (ax,) = fig.axes
    predicted, measured = ax.containers
    assert [r.get_height() for r in predicted] == [1.0, 2.0]  # MiB
    assert [r.get_height() for r in measured] == [3.0, 0.0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["a", "b"]


def test_peak_comparison_figure_rejects_ragged_series():
    with pytest.raises(ValueError):
        plots.peak_comparison_figure(["a", "b"], {"predicted": [1.0]})


# --- data loading and host-to-device transfers (notebook 06) ---------------------------------


def test_loader_throughput_figure_draws_each_series_and_the_model():
    labels = ["0 workers", "2 workers"]
    series = {"steady": [40.0, 90.0], "whole run": [35.0, 38.0]}
    fig = plots.loader_throughput_figure(labels, series, model=[45.0, 125.0])
    (ax,) = fig.axes
    steady, whole = ax.containers
    assert [bar.get_width() for bar in steady] == [40.0, 90.0]
    assert [bar.get_width() for bar in whole] == [35.0, 38.0]
    (marks,) = ax.lines
    assert list(marks.get_xdata()) == [45.0, 125.0]
    assert [t.get_text() for t in ax.get_yticklabels()] == labels


@pytest.mark.parametrize(
    ("series", "model"),
    [({}, None), ({"a": [1.0]}, None), ({"a": [1.0, float("nan")]}, None), ({"a": [1.0, 2.0]}, [1.0]),
     ({"a": [1.0, 2.0]}, [1.0, 0.0])],
)
def test_loader_throughput_figure_rejects_bad_input(series, model):
    with pytest.raises(ValueError):
        plots.loader_throughput_figure(["x", "y"], series, model=model)


def test_epoch_seconds_figure_one_line_per_configuration():
    fig = plots.epoch_seconds_figure({"persistent": [0.3, 0.15, 0.16], "not persistent": [0.45, 0.44, 0.46]})
    (ax,) = fig.axes
    persistent, other = ax.lines
    assert list(persistent.get_xdata()) == [1, 2, 3]
    assert list(persistent.get_ydata()) == [0.3, 0.15, 0.16]
    assert list(other.get_ydata()) == [0.45, 0.44, 0.46]
    with pytest.raises(ValueError):
        plots.epoch_seconds_figure({"bad": [0.0]})


def test_timeline_figure_one_panel_per_run_one_row_per_actor():
    panels = {
        "0 workers": {"main loads": [(0.0, 8.0), (10.0, 18.0)], "main computes": [(8.0, 10.0), (18.0, 20.0)]},
        "2 workers": {"worker 0 loads": [(0.0, 8.0)], "worker 1 loads": [(0.0, 8.0)], "main computes": [(8.0, 10.0)]},
    }
    fig = plots.timeline_figure(panels, title="pipeline")
    top, bottom = fig.axes
    assert [t.get_text() for t in top.get_yticklabels()] == ["main loads", "main computes"]
    assert [t.get_text() for t in bottom.get_yticklabels()] == ["worker 0 loads", "worker 1 loads", "main computes"]
    loads = top.collections[0]  # broken_barh: one collection per row, one rectangle per span
    assert len(loads.get_paths()) == 2
    computes_top, computes_bottom = top.collections[1], bottom.collections[2]
    assert (computes_top.get_facecolor() == computes_bottom.get_facecolor()).all()  # one color per actor everywhere
    with pytest.raises(ValueError):
        plots.timeline_figure({"bad": {"row": [(2.0, 1.0)]}})
    with pytest.raises(ValueError):
        plots.timeline_figure({})


def test_h2d_bandwidth_figure_draws_series_in_gb_per_s_and_ceilings():
    sizes = [2**10, 2**20, 2**28]
    fig = plots.h2d_bandwidth_figure(sizes, {"pinned": [1e9, 20e9, 25e9], "pageable": [0.5e9, 8e9, 10e9]},
                                     ceilings={"PCIe 4.0 x16": 31.5e9})
    (ax,) = fig.axes
    pinned, pageable, ceiling = ax.lines
    assert list(pinned.get_xdata()) == sizes
    assert list(pinned.get_ydata()) == [1.0, 20.0, 25.0]
    assert list(ceiling.get_ydata()) == [31.5, 31.5]
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    with pytest.raises(ValueError):
        plots.h2d_bandwidth_figure(sizes, {"pinned": [1e9, 0.0, 1e9]})


def test_latency_sweep_figure_draws_series_baseline_and_cache_lines():
    fig = plots.latency_sweep_figure(
        {"random": ([4096, 2**20, 2**27], [40.0, 45.0, 150.0]), "sequential": ([2**27], [44.0])},
        {"L1d": 48 * 1024, "L2": 2**21},
        baseline_ns=40.0,
        baseline_label="Python + L1",
    )
    (ax,) = fig.axes
    random_line, sequential, baseline, l1, l2 = ax.lines
    assert list(random_line.get_ydata()) == [40.0, 45.0, 150.0]  # drawn in ns, as given
    assert list(sequential.get_xdata()) == [2**27]
    assert list(baseline.get_ydata()) == [40.0, 40.0]  # horizontal
    assert list(l1.get_xdata()) == [48 * 1024, 48 * 1024] and list(l2.get_xdata()) == [2**21, 2**21]
    assert [t.get_text() for t in ax.texts] == ["L1d 48 KiB", "L2 2 MiB"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["random", "sequential", "Python + L1"]
    assert (ax.get_xscale(), ax.get_yscale(), ax.get_ylim()[0]) == ("log", "linear", 0.0)


@pytest.mark.parametrize(
    ("series", "caches", "baseline"),
    [({}, {}, None), ({"r": ([1024], [0.0])}, {}, None), ({"r": ([1024, 2048], [1.0])}, {}, None),
     ({"r": ([1024], [1.0])}, {"L1d": 0}, None), ({"r": ([1024], [1.0])}, {}, 0.0)],
)
def test_latency_sweep_figure_rejects_bad_input(series, caches, baseline):
    with pytest.raises(ValueError):
        plots.latency_sweep_figure(series, caches, baseline_ns=baseline)


def test_trace_figure_one_panel_per_trace_one_row_per_track():
    spans = [("phase", "forward", 0.0, 6.0), ("depth 0", "aten::mm", 0.5, 4.0), ("depth 0", "aten::add", 4.0, 5.0),
             ("depth 0", "aten::mm", 5.0, 5.5), ("depth 1", "aten::copy_", 0.6, 0.7)]
    fig = plots.trace_figure({"before": spans, "after": spans[:2]}, title="t", colored=2,
                             fixed_colors={"forward": "#b3cde3"})
    top, bottom = fig.axes
    assert [t.get_text() for t in top.get_yticklabels()] == ["phase", "depth 0", "depth 1"]
    assert [t.get_text() for t in bottom.get_yticklabels()] == ["phase", "depth 0"]
    bars = {c.get_label(): c for c in top.collections}  # one collection per name and row
    assert len(bars["aten::mm"].get_paths()) == 2  # both aten::mm events of depth 0
    assert len(top.collections) == 4 and len(bottom.collections) == 2
    mm_bottom = next(c for c in bottom.collections if c.get_label() == "aten::mm")
    assert (bars["aten::mm"].get_facecolor() == mm_bottom.get_facecolor()).all()  # one color per name everywhere
    assert tuple(bars["forward"].get_facecolor()[0][:3]) == matplotlib.colors.to_rgb("#b3cde3")  # a fixed color
    assert tuple(bars["aten::copy_"].get_facecolor()[0][:3]) == matplotlib.colors.to_rgb("lightgray")  # not in the top 2
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["mm", "add"]  # the 2 longest, fixed colors aside
    labels = [t.get_text() for t in top.texts]
    assert "mm" in labels and "copy_" not in labels  # only bars wide enough carry their name
    with pytest.raises(ValueError):
        plots.trace_figure({"bad": [("r", "x", 2.0, 1.0)]})
    with pytest.raises(ValueError):
        plots.trace_figure({"empty": []})


def test_op_roofline_figure_places_each_op_with_its_verdict():
    points = [("mm", 64.0, 9e10, 0.010, "compute"), ("add", 1 / 12, 5e8, 0.004, "memory"),
              ("dot", 0.25, 1e7, 0.002, "overhead")]
    fig = plots.op_roofline_figure(1e11, 1e10, points)
    (ax,) = fig.axes
    roof, tenth = ax.lines[0], ax.lines[1]
    assert list(tenth.get_ydata()) == pytest.approx([0.1 * y for y in roof.get_ydata()])  # the overhead line
    offsets = {c.get_label(): c.get_offsets().tolist() for c in ax.collections}
    assert offsets == {"compute": [[64.0, 9e10]], "memory": [[1 / 12, 5e8]], "overhead": [[0.25, 1e7]]}
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    for bad in ([], [("x", 0.0, 1.0, 1.0, "memory")], [("x", 1.0, 1.0, 1.0, "fast")]):
        with pytest.raises(ValueError):
            plots.op_roofline_figure(1e11, 1e10, bad)
    with pytest.raises(ValueError):
        plots.op_roofline_figure(0.0, 1e10, points)


def test_op_roofline_figure_draws_each_memory_tier_as_a_roof_of_its_own():
    points = [("mm", 64.0, 9e10, 0.010, "compute"), ("dot", 0.25, 2e10, 0.002, "memory")]
    fig = plots.op_roofline_figure(1e11, 1e10, points, memory_tiers=[("L1–L2", 8e10)], memory_name="L3")
    (ax,) = fig.axes
    roof, tier = ax.lines[0], ax.lines[3]  # the main roof, its overhead line, the ridge, then the tier's roof
    assert roof.get_label().startswith("roofline (L3): 10 GB/s")
    assert tier.get_label() == "L1–L2's roof: 80 GB/s"
    # min(peak, intensity × 80 GB/s): below its ridge (1.25 FLOP/byte) the tier's roof is 8× the main one
    assert [y for x, y in zip(tier.get_xdata(), tier.get_ydata()) if x < 1] == pytest.approx(
        [8 * y for x, y in zip(roof.get_xdata(), roof.get_ydata()) if x < 1])
    with pytest.raises(ValueError):
        plots.op_roofline_figure(1e11, 1e10, points, memory_tiers=[("L2", 0.0)])


def test_memory_timeline_figure_steps_in_mib_and_marks_the_peak():
    fig = plots.memory_timeline_figure([0.0, 1.0, 2.0, 3.0], [0, 2**20, 3 * 2**20, 2**20],
                                       [("forward", 0.0, 1.5), ("backward", 1.5, 3.0)])
    (ax,) = fig.axes
    step, peak = ax.lines[0], ax.lines[1]
    assert list(step.get_ydata()) == [0, 1, 3, 1]
    assert (list(peak.get_xdata()), list(peak.get_ydata())) == ([2.0], [3.0])
    assert "peak 3.0 MiB" in [t.get_text() for t in ax.get_legend().get_texts()]
    with pytest.raises(ValueError):
        plots.memory_timeline_figure([0.0], [1.0, 2.0])


def test_before_after_figure_draws_times_relative_to_before():
    fig = plots.before_after_figure({"loop": ([4e-3, 5e-3, 6e-3], [1e-3, 1e-3, 2e-3]), "step": ([2.0], [4.0])})
    (ax,) = fig.axes
    loop_before, loop_after, step_before, step_after = ax.patches
    assert (loop_before.get_width(), loop_after.get_width()) == (1.0, 0.2)  # 5 ms → 1 ms: 1/5 of before
    assert (step_before.get_width(), step_after.get_width()) == (1.0, 2.0)
    texts = [t.get_text() for t in ax.texts]
    assert any("5.00× faster" in t for t in texts) and any("2.00× slower" in t for t in texts)
    with pytest.raises(ValueError):
        plots.before_after_figure({"bad": ([1.0], [])})


def test_tile_traffic_figure_draws_counts_curve_and_floor():
    # (4, 6) @ (6, 8) in tiles of 1, 2, 4: 2*4*6*8/t + 32 when t divides every side
    fig = plots.tile_traffic_figure([1, 2, 4], [416, 224, 128], m=4, k=6, n=8)
    (ax,) = fig.axes
    curve, floor, counted = ax.lines
    assert list(counted.get_xdata()) == [1, 2, 4] and list(counted.get_ydata()) == [416, 224, 128]
    assert curve.get_ydata()[0] == pytest.approx(416) and curve.get_ydata()[-1] == pytest.approx(128)
    assert list(floor.get_ydata()) == [4 * 6 + 6 * 8 + 4 * 8] * 2  # 104: each element once
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")


@pytest.mark.parametrize(("tiles", "moved", "sizes"), [([], [], (2, 2, 2)), ([1, 2], [10], (2, 2, 2)),
                                                       ([1], [0], (2, 2, 2)), ([1], [10], (0, 2, 2))])
def test_tile_traffic_figure_rejects_bad_input(tiles, moved, sizes):
    m, k, n = sizes
    with pytest.raises(ValueError):
        plots.tile_traffic_figure(tiles, moved, m=m, k=k, n=n)


def test_loader_progress_figure_draws_measured_and_simulated_steps():
    measured = {"0 workers": [0.03, 0.055, 0.08], "2 workers": [0.02, 0.03, 0.04]}
    simulated = {"0 workers": [0.022, 0.044, 0.066], "2 workers": [0.022, 0.028, 0.038]}
    fig = plots.loader_progress_figure(measured, simulated)
    (ax,) = fig.axes
    assert len(ax.lines) == 4  # measured and simulated for each configuration
    zero_measured, zero_simulated = ax.lines[:2]
    assert list(zero_measured.get_xdata()) == [0.0, 0.03, 0.055, 0.08]  # each step's end, from time 0
    assert list(zero_measured.get_ydata()) == [0, 1, 2, 3]
    assert zero_measured.get_color() == zero_simulated.get_color()  # one color per configuration
    assert (zero_measured.get_linestyle(), zero_simulated.get_linestyle()) == ("-", "--")


@pytest.mark.parametrize(
    ("measured", "simulated"),
    [({}, {}), ({"a": [1.0]}, {"b": [1.0]}), ({"a": [2.0, 1.0]}, {"a": [1.0, 2.0]}), ({"a": [1.0]}, {"a": [-1.0]}),
     ({"a": []}, {"a": []})],
)
def test_loader_progress_figure_rejects_bad_input(measured, simulated):
    with pytest.raises(ValueError):
        plots.loader_progress_figure(measured, simulated)


def test_outlier_error_figure_draws_a_line_per_scheme_and_the_threshold():
    magnitudes = [1, 8, 64]
    fig = plots.outlier_error_figure(magnitudes, {"per tensor": [38.0, 31.0, 13.0], "LLM.int8()": [41.0, 41.0, 41.0]},
                                     threshold=6.0)
    (ax,) = fig.axes
    per_tensor, decomposed, threshold = ax.lines
    assert list(per_tensor.get_xdata()) == magnitudes
    assert list(decomposed.get_ydata()) == [41.0, 41.0, 41.0]
    assert list(threshold.get_xdata()) == [6.0, 6.0]
    assert ax.get_xscale() == "log"


@pytest.mark.parametrize(
    ("magnitudes", "db"),
    [([], {"a": []}), ([1, 2], {}), ([0, 2], {"a": [1.0, 2.0]}), ([1, 2], {"a": [1.0]}),
     ([1, 2], {"a": [1.0, float("inf")]})],
)
def test_outlier_error_figure_rejects_bad_input(magnitudes, db):
    with pytest.raises(ValueError):
        plots.outlier_error_figure(magnitudes, db)


def test_allreduce_sweep_figure_draws_points_and_fit_per_world():
    sizes = [4, 4096, 2**20]
    fig = plots.allreduce_sweep_figure({"2 processes": (sizes, [1e-4, 2e-4, 1e-3], [1.1e-4, 1.9e-4, 1.0e-3]),
                                        "4 processes": (sizes, [3e-4, 4e-4, 2e-3], [3e-4, 4e-4, 2e-3])})
    (ax,) = fig.axes
    assert len(ax.lines) == 4 and ax.get_xscale() == "log" and ax.get_yscale() == "log"
    assert list(ax.lines[0].get_ydata()) == [1e-4, 2e-4, 1e-3]
    with pytest.raises(ValueError):
        plots.allreduce_sweep_figure({"bad": (sizes, [1.0, 2.0], [1.0, 2.0, 3.0])})
    plt.close(fig)


def test_step_parts_figure_stacks_parts_and_labels_totals():
    fig = plots.step_parts_figure({"measured": {"compute": 3.0, "communication": 5.0}, "model": {"compute": 3.0}})
    (ax,) = fig.axes
    widths = [p.get_width() for p in ax.patches]
    assert widths == [3.0, 3.0, 5.0, 0.0]  # compute of both rows, then communication of both
    assert [p.get_x() for p in ax.patches][2] == 3.0  # communication starts where compute ends
    assert any(t.get_text().strip() == "8 ms" for t in ax.texts)
    with pytest.raises(ValueError):
        plots.step_parts_figure({"bad": {"compute": -1.0}})
    plt.close(fig)


# --- notebook 10 -------------------------------------------------------------------------------------------


def test_decode_batch_figure_draws_step_times_and_throughput():
    fig = plots.decode_batch_figure([1, 4, 16], [1e-3, 1.5e-3, 4e-3], [0.8e-3, 0.8e-3, 3e-3])
    left, right = fig.axes
    measured, predicted = left.lines
    assert list(measured.get_ydata()) == [1.0, 1.5, 4.0] and list(predicted.get_ydata()) == [0.8, 0.8, 3.0]  # ms
    assert list(right.lines[0].get_xdata()) == [1000.0, 4 / 1.5e-3, 4000.0]  # tokens/s in total: B / t
    assert list(right.lines[0].get_ydata()) == [1000.0, 1 / 1.5e-3, 250.0]  # per sequence: 1 / t
    assert (left.get_xscale(), right.get_yscale()) == ("log", "log")


def test_decode_batch_figure_rejects_bad_series():
    with pytest.raises(ValueError):
        plots.decode_batch_figure([1, 2], [1e-3], [1e-3, 2e-3])
    with pytest.raises(ValueError):
        plots.decode_batch_figure([1, 2], [1e-3, 0.0], [1e-3, 2e-3])


def test_decode_roofs_figure_draws_series_compute_and_capacity():
    fig = plots.decode_roofs_figure([1, 2, 4], {"T = 512": [1e-3, 1e-3, 2e-3], "T = 4096": [2e-3, 3e-3, 5e-3]},
                                    compute_s=[1e-4, 2e-4, 4e-4], capacity_batch={"T = 4096": 2.0})
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines[:3]] == ["T = 512", "T = 4096", "compute alone: 2·N·B / peak"]
    assert list(ax.lines[0].get_ydata()) == [1.0, 1.0, 2.0]
    assert list(ax.lines[3].get_xdata()) == [2.0, 2.0]  # the capacity marker, a vertical line at B = 2


def test_decode_roofs_figure_rejects_unknown_capacity_series():
    with pytest.raises(ValueError):
        plots.decode_roofs_figure([1, 2], {"a": [1e-3, 1e-3]}, capacity_batch={"b": 1.0})


def test_throughput_latency_figure_draws_one_curve_per_series():
    fig = plots.throughput_latency_figure({"bf16": ([1, 8], [4e-3, 5e-3]), "int4": ([1, 8], [1e-3, 2e-3])})
    (ax,) = fig.axes
    assert [line.get_label() for line in ax.lines] == ["bf16", "int4"]
    assert list(ax.lines[0].get_xdata()) == [250.0, 1600.0] and list(ax.lines[0].get_ydata()) == [250.0, 200.0]


def test_serving_figure_draws_roofs_batch_and_memory():
    fig = plots.serving_figure([1, 2, 4], [1e-4, 2e-4, 4e-4], [1e-3, 1.1e-3, 1.2e-3], batch=2, weight_bytes=10e9,
                               kv_bytes=5e9, capacity_bytes=80e9, title="t")
    left, right = fig.axes
    assert list(left.lines[2].get_ydata()) == [1.0, 1.1, 1.2]  # the step: the larger roof, in ms
    assert list(left.lines[3].get_xdata()) == [2]  # the chosen batch
    assert [p.get_height() for p in right.patches] == [10.0, 5.0]  # GB of weights, then of KV cache
    with pytest.raises(ValueError):
        plots.serving_figure([1], [1e-4], [1e-3], batch=0, weight_bytes=1, kv_bytes=1, capacity_bytes=1, title="t")


def test_sparse_matmul_figure_draws_times_bytes_and_crossover():
    fig = plots.sparse_matmul_figure([0.0, 0.5, 0.9], [2e-3, 2e-3, 2e-3], [8e-3, 4e-3, 1e-3],
                                     [4 * 2**20] * 3, [12 * 2**20, 6 * 2**20, 1.2 * 2**20], crossover=0.9)
    left, right = fig.axes
    dense, csr, crossover = left.lines
    assert list(dense.get_xdata()) == [0.0, 50.0, 90.0]  # percent of zeros
    assert list(csr.get_ydata()) == [8.0, 4.0, 1.0]  # ms
    assert list(crossover.get_xdata()) == [90.0, 90.0]  # a vertical line at the crossover
    assert list(right.lines[1].get_ydata()) == [12.0, 6.0, 1.2]  # MiB
    assert left.get_yscale() == "log"


def test_sparse_matmul_figure_without_crossover_and_bad_input():
    fig = plots.sparse_matmul_figure([0.1], [1e-3], [2e-3], [1.0], [2.0])
    assert len(fig.axes[0].lines) == 2  # no crossover line
    with pytest.raises(ValueError):
        plots.sparse_matmul_figure([1.5], [1e-3], [2e-3], [1.0], [2.0])  # not a fraction
    with pytest.raises(ValueError):
        plots.sparse_matmul_figure([0.1, 0.2], [1e-3, 1e-3], [2e-3], [1.0, 1.0], [2.0, 2.0])


def test_pruning_speed_figure_draws_series_and_guides():
    fig = plots.pruning_speed_figure({"units removed": ([1.0, 0.5, 0.25], [1.0, 0.52, 0.27]),
                                      "zeros, dense kernel": ([0.5, 0.1], [1.0, 0.98])})
    (ax,) = fig.axes
    units, zeros, proportional, flat = ax.lines
    assert list(units.get_ydata()) == [1.0, 0.52, 0.27] and list(zeros.get_xdata()) == [0.5, 0.1]
    assert list(proportional.get_xdata()) == [0.1, 1.0] == list(proportional.get_ydata())  # y = x from the least kept
    assert list(flat.get_ydata()) == [1.0, 1.0]
    with pytest.raises(ValueError):
        plots.pruning_speed_figure({"bad": ([2.0], [1.0])})  # more than all the work
    with pytest.raises(ValueError):
        plots.pruning_speed_figure({})


def test_pruning_accuracy_figure_draws_before_and_after_per_method():
    fig = plots.pruning_accuracy_figure({"magnitude": ([0.5, 0.9], [0.9, 0.4], [0.92, 0.8])},
                                        dense_accuracy=0.93, chance_accuracy=0.2)
    (ax,) = fig.axes
    before, after, dense, chance = ax.lines
    assert list(before.get_xdata()) == [50.0, 90.0] and list(before.get_ydata()) == [90.0, 40.0]
    assert before.get_linestyle() == "--" and after.get_linestyle() == "-"
    assert list(after.get_ydata()) == [92.0, 80.0]
    assert list(dense.get_ydata()) == [93.0, 93.0] and list(chance.get_ydata()) == [20.0, 20.0]
    with pytest.raises(ValueError):
        plots.pruning_accuracy_figure({"m": ([0.5], [0.9, 0.8], [0.9])}, dense_accuracy=0.9, chance_accuracy=0.1)


def test_distillation_temperature_figure_draws_bars_curves_and_marker():
    fig = plots.distillation_temperature_figure(
        4.0, {"teacher": [0.7, 0.2, 0.1], "student": [0.4, 0.3, 0.3]}, [1.0, 2.0, 4.0],
        {"lecture": [1.0, 0.3, 0.08], "× T²": [1.0, 1.2, 1.28]})
    left, right = fig.axes
    assert [p.get_height() for p in left.patches] == [0.7, 0.2, 0.1, 0.4, 0.3, 0.3]
    lecture, hinton, guide, marker = right.lines
    assert list(hinton.get_ydata()) == [1.0, 1.2, 1.28]
    assert list(guide.get_ydata()) == [16 * 0.08, 4 * 0.08, 0.08]  # ∝ T⁻² through the first series' last point
    assert list(marker.get_xdata()) == [4.0, 4.0]
    assert (right.get_xscale(), right.get_yscale()) == ("log", "log")
    with pytest.raises(ValueError):
        plots.distillation_temperature_figure(4.0, {"a": [0.5, 0.5], "b": [1.0]}, [1.0], {"g": [1.0]})
    with pytest.raises(ValueError):
        plots.distillation_temperature_figure(0.0, {"a": [1.0]}, [1.0], {"g": [1.0]})


def test_distillation_accuracy_figure_draws_series_and_references():
    fig = plots.distillation_accuracy_figure([1.0, 4.0], {"× T²": [0.8, 0.85]}, references={"hard labels": 0.78})
    (ax,) = fig.axes
    series, reference = ax.lines
    assert list(series.get_ydata()) == [80.0, 85.0] and list(reference.get_ydata()) == [78.0, 78.0]
    with pytest.raises(ValueError):
        plots.distillation_accuracy_figure([1.0, 4.0], {"a": [0.8]}, references={})
    with pytest.raises(ValueError):
        plots.distillation_accuracy_figure([1.0], {"a": [0.8]}, references={"r": 1.5})


def test_compression_figure_draws_one_bar_per_version():
    fig = plots.compression_figure(["dense", "int4"], [16e9, 4.5e9], [6e-3, 2e-3], [0.93, 0.9])
    left, right = fig.axes
    assert [p.get_width() for p in left.patches] == [6.0, 2.0]  # ms
    assert [round(p.get_width(), 6) for p in right.patches] == [93.0, 90.0]  # percent
    assert any("16.0 GB" in t.get_text() for t in left.texts)
    with pytest.raises(ValueError):
        plots.compression_figure(["a"], [1.0, 2.0], [1.0], [0.5])
