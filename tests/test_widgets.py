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
