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
