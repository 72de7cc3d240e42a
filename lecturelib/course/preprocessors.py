"""nbgrader preprocessors that make autograding trust only plain values, judged outside the kernel."""

from __future__ import annotations

import copy
import os
from typing import Any

from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from lecturelib.course.layout import cell_stdout, is_test_cell, nbgrader_meta, read_notebook
from lecturelib.grading import InvalidTestCell, Verdict, judge, prepare_test_cell

STASH = "lecturelib_checks"  # key in nbconvert's resources shared by the two preprocessors


def verdict_outputs(verdict: Verdict, n_checks: int) -> list[NotebookNode]:
    """The outputs a judged test cell shows: a line on success, an error naming each failed check."""
    if verdict.passed:
        text = f"{verdict.grade_id}: all {n_checks} checks passed\n"
        return [from_dict({"output_type": "stream", "name": "stdout", "text": text})]
    lines = [f"{verdict.grade_id}: {len(verdict.messages)} of {n_checks} checks failed"] + [
        f"  - {m}" for m in verdict.messages
    ]
    return [
        from_dict(
            {"output_type": "error", "ename": "CheckFailed", "evalue": lines[0], "traceback": lines}
        )
    ]


class RestoreMissingCells(NbGraderPreprocessor):
    """Before grading: put back every cell of the release that a submission deleted, where it stood.

    nbgrader's add_missing_cells restores deleted test cells only after an answer cell the submission
    still has, and stops grading the whole submission otherwise (a skipped exercise: answer and test
    deleted). Restoring from the release first covers every case, read-only setup cells included.
    """

    release_directory = Unicode("", help="the folder of the student release (notebooks/)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        info = resources["nbgrader"]
        path = os.path.join(self.release_directory, info["assignment"], info["notebook"] + ".ipynb")
        if not self.release_directory or not os.path.exists(path):
            return nb, resources
        present = {nbgrader_meta(c).get("grade_id") for c in nb.cells} - {None}
        position = 0  # where the next restored cell goes: after the last release cell found so far
        for cell in read_notebook(path).cells:
            gid = nbgrader_meta(cell).get("grade_id")
            if gid in present:
                position = 1 + next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == gid)
            elif gid is not None:
                self.log.warning("cell %s was missing from the submission: restored from the release", gid)
                nb.cells.insert(position, copy.deepcopy(cell))
                present.add(gid)
                position += 1
        return nb, resources


class PrepareChecks(NbGraderPreprocessor):
    """Before execution: keep each test cell's expected literals here and send the kernel only the rest."""

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        stash: dict[str, tuple[str, list]] = {}
        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            try:
                rewritten, checks = prepare_test_cell(cell.source, grade_id)
            except InvalidTestCell as e:  # an instructor's mistake: `course check` reports it
                self.log.warning("test cell left to the kernel, not judged: %s", e)
                continue
            stash[grade_id] = (cell.source, checks)
            cell.source = rewritten
        resources[STASH] = stash
        return nb, resources


class JudgeChecks(NbGraderPreprocessor):
    """After execution: judge the reported values and make the verdict the test cell's only output."""

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        stash = resources.get(STASH, {})
        for cell in nb.cells:
            if not is_test_cell(cell) or cell.metadata.nbgrader["grade_id"] not in stash:
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            source, checks = stash[grade_id]
            verdict = judge(grade_id, checks, cell_stdout(cell))
            cell.source = source  # the instructor's test, as nbgrader restored it
            cell.outputs = verdict_outputs(verdict, len(checks))
        return nb, resources
