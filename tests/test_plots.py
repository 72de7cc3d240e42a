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
