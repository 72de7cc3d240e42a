"""The graders' reference: each written answer's reference answer and rubric, for instructors only.

A manually graded answer's master holds, inside its solution region, a reference answer and an analytic rubric
with sample answers. The release strips that region; autograding (`AddReference`) puts it back into the
autograded notebook, as a clearly marked cell right after the student's answer, so that Formgrader's Manual
Grading shows it next to what it grades; feedback (`StripReference`) removes it again, and `course feedback`
checks that no page shows it (`reference_chunks`).
"""

from __future__ import annotations

import functools
import html
import re
from pathlib import Path
from typing import Any

from nbconvert.filters import markdown2html
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from lecturelib.course.layout import SOLUTION_MARKS, nbgrader_meta, read_notebook

MARK = "lecturelib_reference"  # cell metadata: a cell AddReference wrote (graders only)
HEADING = "For graders only"
MIN_CHUNK_CHARS = 20  # shorter pieces ("the mechanism") stand in students' own answers too


def is_written_answer(cell: NotebookNode) -> bool:
    """A manually graded answer: a cell that is both a solution and graded, in markdown (a written reflection)."""
    m = nbgrader_meta(cell)
    return cell.cell_type == "markdown" and bool(m.get("solution")) and bool(m.get("grade"))


def solution_region(source: str) -> str:
    """The text between the solution markers (all of them, in order), without the markers."""
    begin, end = SOLUTION_MARKS
    out, inside = [], False
    for line in source.split("\n"):
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out).strip("\n")


def references(master: NotebookNode) -> dict[str, str]:
    """grade_id -> the solution region of every written answer of a master notebook."""
    return {nbgrader_meta(c)["grade_id"]: solution_region(c.source) for c in master.cells
            if is_written_answer(c) and solution_region(c.source).strip()}


def reference_cell(grade_id: str, region: str, points: float | None) -> NotebookNode:
    worth = f", {points:g} points" if points is not None else ""
    banner = (f"> **{HEADING}: the reference answer and rubric of `{grade_id}`**{worth} (from `source/`; "
              "feedback removes this cell, students never see it)")
    return from_dict({"cell_type": "markdown", "metadata": {MARK: True}, "source": f"{banner}\n\n{region}"})


class AddReference(NbGraderPreprocessor):
    """After grading: a marked cell with the master's reference and rubric after each written answer (graders only).

    Cells a submission brought with the mark are dropped first: a student cannot plant a "reference" for graders.
    """

    source_directory = Unicode("", help="the folder of the masters (source/)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        nb.cells = [c for c in nb.cells if not c.get("metadata", {}).get(MARK)]
        info = resources.get("nbgrader", {})
        path = Path(self.source_directory, info.get("assignment", ""), info.get("notebook", "") + ".ipynb")
        if not self.source_directory or not path.is_file():
            return nb, resources
        found = references(read_notebook(path))
        cells = []
        for cell in nb.cells:
            cells.append(cell)
            gid = nbgrader_meta(cell).get("grade_id")
            if is_written_answer(cell) and gid in found:
                cells.append(reference_cell(gid, found[gid], nbgrader_meta(cell).get("points")))
        nb.cells = cells
        return nb, resources


class StripReference(NbGraderPreprocessor):
    """Feedback: remove every cell AddReference wrote (and any cell that carries its mark)."""

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        nb.cells = [c for c in nb.cells if not c.get("metadata", {}).get(MARK)]
        return nb, resources


@functools.lru_cache(maxsize=4096)  # a class's submissions repeat the release's markdown cell for cell
def chunks(markdown: str) -> frozenset[str]:
    """The pieces of text a page shows for `markdown` (each paragraph, list item or table cell, whitespace folded)."""
    rendered = re.sub(r"</(p|li|h\d|td|th|blockquote|pre)>|<br\s*/?>", "\n", markdown2html(markdown))
    text = html.unescape(re.sub(r"<[^>]+>", "", rendered))
    pieces = (" ".join(piece.split()) for piece in text.split("\n"))
    return frozenset(p for p in pieces if len(p) >= MIN_CHUNK_CHARS)


def reference_chunks(masters: list[Path]) -> set[str]:
    """What a feedback page would show of the references of these masters (the leak check looks for it)."""
    out: set[str] = set()
    for master in masters:
        for region in references(read_notebook(master)).values():
            out |= chunks(region)
    return out | {HEADING + ": the reference answer and rubric of"}
