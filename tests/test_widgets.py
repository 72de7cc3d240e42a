"""Tests of lecturelib.widgets: an explorer redraws on every control change, and shows a figure without a frontend."""

from __future__ import annotations

import ipywidgets
import matplotlib
import nbformat
from nbclient import NotebookClient

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from lecturelib.widgets import explore  # noqa: E402


def _draw_log() -> tuple[list[dict], object]:
    calls: list[dict] = []

    def draw(**values: object) -> Figure:
        calls.append(values)
        fig, ax = plt.subplots()
        ax.set_title(str(values))
        return fig

    return calls, draw


def test_explore_draws_initial_values_then_each_change() -> None:
    calls, draw = _draw_log()
    n = ipywidgets.IntSlider(value=3, min=1, max=10)
    dtype = ipywidgets.Dropdown(options=["fp32", "bf16"], value="fp32")
    explorer = explore(draw, {"n": n, "dtype": dtype}, show=False)
    assert calls == [{"n": 3, "dtype": "fp32"}]
    n.value = 7
    dtype.value = "bf16"
    assert calls == [{"n": 3, "dtype": "fp32"}, {"n": 7, "dtype": "fp32"}, {"n": 7, "dtype": "bf16"}]
    assert explorer.values == {"n": 7, "dtype": "bf16"} and explorer.redraws == 2
    assert plt.get_fignums() == []  # every figure closed: the inline backend shows none twice


def test_explore_outside_a_kernel_prints_the_figure(capsys: pytest.CaptureFixture[str]) -> None:
    calls, draw = _draw_log()
    explorer = explore(draw, {"n": ipywidgets.IntSlider(value=2)})
    assert "Figure" in capsys.readouterr().out  # no IPython: display() prints the figure's text form
    explorer.controls["n"].value = 5
    assert calls[-1] == {"n": 5}


def _run(*cells: str) -> list[nbformat.NotebookNode]:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    return nb.cells


EXPLORER = """
import ipywidgets, matplotlib.pyplot as plt
from lecturelib.widgets import explore
def draw(n):
    fig, ax = plt.subplots()
    ax.plot(range(n))
    return fig
explorer = explore(draw, {{"n": ipywidgets.IntSlider(value={n}, min=1, max=9)}})
"""


def test_explore_in_a_kernel_leaves_a_png_that_control_changes_update() -> None:
    """As nbval and the autograder see it: a widget view, then the figure as a plain image output."""
    first = _run(EXPLORER.format(n=3))[0]
    assert [o.output_type for o in first.outputs] == ["display_data", "display_data"]
    widget, figure = first.outputs
    assert "application/vnd.jupyter.widget-view+json" in widget.data  # live controls where a frontend runs
    assert "image/png" in figure.data  # the static figure everywhere else
    moved = _run(EXPLORER.format(n=3), 'explorer.controls["n"].value = 6')[0]  # the update lands in cell 1
    fresh = _run(EXPLORER.format(n=6))[0]
    assert moved.outputs[1].data["image/png"] == fresh.outputs[1].data["image/png"]
    assert moved.outputs[1].data["image/png"] != figure.data["image/png"]


def test_explore_needs_a_control() -> None:
    with pytest.raises(ValueError):
        explore(lambda: plt.figure(), {}, show=False)


# ---------------------------------------------------------------------------------------------
# Notebook 01: the roofline explorer


def test_roofline_explorer_redraws_when_the_size_moves() -> None:
    from lecturelib.widgets import draw_kernel_roofline, roofline_explorer

    explorer = roofline_explorer("h100-sxm", "bf16", "matmul", 64, show=False)
    assert explorer.values == {"device": "h100-sxm", "dtype": "bf16", "kernel": "matmul", "size": 64}
    explorer.controls["size"].value = 4096
    explorer.controls["kernel"].value = "gemv"
    assert explorer.redraws == 2 and explorer.values["size"] == 4096 and explorer.values["kernel"] == "gemv"
    # n = 64 has intensity 64/3 FLOP/byte, below the H100's bf16 ridge (≈ 295); n = 4096 is above it
    assert plt.get_fignums() == []  # the explorer closed every figure it drew
    for n, bound in ((64, "memory-bound"), (4096, "compute-bound")):
        fig = draw_kernel_roofline("h100-sxm", "bf16", "matmul", n)
        assert bound in fig.axes[0].get_title()
        plt.close(fig)


def test_roofline_explorer_offers_every_device_with_a_bandwidth() -> None:
    from lecturelib.hardware import MEMORY_BANDWIDTH
    from lecturelib.widgets import roofline_explorer

    explorer = roofline_explorer(show=False)
    assert list(explorer.controls["device"].options) == sorted(MEMORY_BANDWIDTH)
    assert "bf16" in explorer.controls["dtype"].options


def test_draw_kernel_roofline_says_when_a_device_lacks_the_dtype() -> None:
    from lecturelib.widgets import draw_kernel_roofline

    fig = draw_kernel_roofline("t4", "bf16", "matmul", 64)  # Turing: no bf16 tensor cores
    assert [t.get_text() for t in fig.axes[0].texts] == ["t4 has no bf16 peak in hardware.PEAKS"]
    plt.close(fig)


def test_training_run_explorer_redraws_the_napkin_math() -> None:
    from lecturelib import comm
    from lecturelib.widgets import draw_training_run, training_run_explorer

    explorer = training_run_explorer(show=False)
    assert list(explorer.controls["link"].options) == [(v.name, k) for k, v in comm.LINKS.items()]
    explorer.controls["n_gpus"].value = 8
    explorer.controls["link"].value = "nvlink4"
    assert explorer.redraws == 2 and explorer.values["n_gpus"] == 8
    assert plt.get_fignums() == []
    fig = draw_training_run(7e9, 2e12, 64, "100gbe", 0.4)
    run = comm.plan_run(7e9, 2e12, 64, "100gbe", 0.4)
    title = fig.axes[0].get_title()
    assert f"{run.days:,.1f} days of compute" in title and f"{run.days_no_overlap:,.1f} with every" in title
    plt.close(fig)


def test_serving_explorer_redraws_for_every_device_and_model() -> None:
    from lecturelib import inference
    from lecturelib.widgets import serving_explorer

    explorer = serving_explorer(show=False)
    assert explorer.values == {"model": "llama2-7b", "weight_dtype": "bf16", "kv_dtype": "bf16", "batch": 1,
                               "context": 2048, "device": "h100-sxm"}
    for device in inference.SERVING_DEVICES:
        explorer.controls["device"].value = device
    explorer.controls["model"].value = inference.LLAMA_3_2_1B.name
    explorer.controls["weight_dtype"].value = "int4"
    explorer.controls["batch"].value = 1024
    assert explorer.redraws == len(inference.SERVING_DEVICES) + 2  # the default device was already shown
    assert "llama3.2-1b, int4 weights" in explorer.redraw().axes[0].figure.texts[0].get_text()


def test_serving_explorer_formats_times_and_rates() -> None:
    from lecturelib.widgets import _number, _seconds

    assert [_seconds(30.3), _seconds(0.00429), _seconds(8.52e-5)] == ["30.3 s", "4.29 ms", "85.2 µs"]
    assert [_number(2.84), _number(2900.4)] == ["2.84", "2,900"]



