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
