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
