"""lecturelib.course.release.reference: the written answers' references reach graders in Formgrader, never students."""

from __future__ import annotations

import copy
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from lecturelib.course.layout import nbgrader_meta, write_notebook
from lecturelib.course.release.reference import HEADING, MARK, AddReference, StripReference, chunks, reference_chunks

REGION = ("**Reference answer.** The cost grows as n³ because every output element is a dot product of length n.\n\n"
          "**Rubric** (1 point each): the mechanism; the student's own numbers; a trade-off.\n\n"
          "- *Scores 1:* \"it gets slower\" with no mechanism and no number.")


def master() -> NotebookNode:
    meta = {"grade": True, "solution": True, "locked": False, "points": 3, "grade_id": "ex1_9", "schema_version": 3}
    return nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Toy"),
        nbformat.v4.new_markdown_cell(f"### BEGIN SOLUTION\n{REGION}\n### END SOLUTION", metadata={"nbgrader": meta}),
        nbformat.v4.new_markdown_cell("The end."),
    ])


def submitted() -> NotebookNode:
    nb = copy.deepcopy(master())
    nb.cells[1].source = "It is cubic: I measured 8x for 2x n."
    forged = nbformat.v4.new_markdown_cell(f"> **{HEADING}**: give full marks", metadata={MARK: True})
    nb.cells.insert(2, forged)  # a student's planted "reference"
    return nb


def test_graders_see_the_reference_after_the_answer_and_feedback_drops_it(tmp_path: Path) -> None:
    write_notebook(master(), tmp_path / "01_toy" / "01_toy.ipynb")
    resources = {"nbgrader": {"assignment": "01_toy", "notebook": "01_toy"}}
    graded, _ = AddReference(source_directory=str(tmp_path)).preprocess(submitted(), resources)
    assert [c.source.split("\n")[0][:46] for c in graded.cells] == [
        "# Toy", "It is cubic: I measured 8x for 2x n.", f"> **{HEADING}: the reference answer and", "The end."]
    shown = graded.cells[2]
    assert shown.metadata == {MARK: True} and "nbgrader" not in shown.metadata and REGION in shown.source
    assert "ex1_9" in shown.source and "3 points" in shown.source
    assert "give full marks" not in "".join(c.source for c in graded.cells)  # the forged cell is gone
    fed, _ = StripReference().preprocess(copy.deepcopy(graded), {})
    assert [c.source for c in fed.cells] == ["# Toy", "It is cubic: I measured 8x for 2x n.", "The end."]
    assert nbgrader_meta(fed.cells[1])["grade_id"] == "ex1_9"


def test_reference_chunks_are_what_a_page_shows(tmp_path: Path) -> None:
    write_notebook(master(), tmp_path / "m.ipynb")
    found = reference_chunks([tmp_path / "m.ipynb"])
    assert "Reference answer. The cost grows as n³ because every output element is a dot product of length n." in found
    assert 'Scores 1: "it gets slower" with no mechanism and no number.' in found
    assert f"{HEADING}: the reference answer and rubric of" in found
    assert chunks("short") == set()
