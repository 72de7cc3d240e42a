"""nbgrader preprocessors that make autograding trust only plain values, judged outside the kernel.

The pipeline (nbgrader_config.py): RestoreMissingCells and RedactTests while nbgrader sanitizes a submission; then
PrepareChecks, GradingExecute (`execute`: the sandboxed kernel, its output capped, a fair stop), JudgeChecks and
SanitizeNotebook.
"""

from __future__ import annotations

import copy
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Any

from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from lecturelib.course.grading.execute import STOPPED
from lecturelib.course.isolation import clean_notebook
from lecturelib.course.layout import cell_stdout, is_test_cell, nbgrader_meta, read_notebook
from lecturelib.grading import Check, InvalidTestCell, Verdict, judge, prepare_test_cell

STASH = "lecturelib_checks"  # key in nbconvert's resources: the checks, from PrepareChecks to JudgeChecks
SCRATCH = "lecturelib_scratch"  # key in nbconvert's resources: (the notebook's folder, the kernel's folder)


def verdict_outputs(verdict: Verdict, n_checks: int, note: str = "") -> list[NotebookNode]:
    """The outputs a judged test cell shows: a line on success, an error naming each failed check."""
    if verdict.passed:
        text = f"{verdict.grade_id}: all {n_checks} checks passed\n"
        return [from_dict({"output_type": "stream", "name": "stdout", "text": text})]
    lines = [f"{verdict.grade_id}: {len(verdict.messages)} of {n_checks} checks failed{note}"] + [
        f"  - {m}" for m in verdict.messages
    ]
    return [
        from_dict(
            {"output_type": "error", "ename": "CheckFailed", "evalue": lines[0], "traceback": lines}
        )
    ]


class RestoreMissingCells(NbGraderPreprocessor):
    """Before grading: the release decides every managed cell; deleted cells come back where they stood.

    In place of nbgrader's OverwriteCells, which reads the gradebook (rows a kernel could once rewrite):
    the release's metadata replaces the submission's, so edited points or cell kinds count for nothing,
    and read-only cells (setup, tests) get the release's source back. Cells the submission deleted are put
    back from the release, read-only setup cells included (nbgrader's add_missing_cells restores deleted
    test cells only after an answer cell the submission still has, and stops grading otherwise).
    """

    release_directory = Unicode("", help="the folder of the student release (notebooks/)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        info = resources["nbgrader"]
        path = os.path.join(self.release_directory, info["assignment"], info["notebook"] + ".ipynb")
        if not self.release_directory or not os.path.exists(path):
            return nb, resources
        release = read_notebook(path).cells
        managed = {nbgrader_meta(c)["grade_id"]: c for c in release if nbgrader_meta(c).get("grade_id")}
        for cell in nb.cells:  # a cell's nbgrader metadata is the release's, never the submission's
            twin = managed.get(nbgrader_meta(cell).get("grade_id"))
            if twin is not None and twin.cell_type == cell.cell_type:
                cell.metadata["nbgrader"] = copy.deepcopy(twin.metadata["nbgrader"])  # points, kind, checksum
                if nbgrader_meta(twin).get("locked"):
                    cell.source = twin.source  # a read-only cell as released (a test: its visible part)
            elif "nbgrader" in cell.metadata:  # {} left by DeduplicateIds on a pasted copy, an invented
                del cell.metadata["nbgrader"]  # grade cell, a cell whose type was changed: the student's own
        present = {nbgrader_meta(c).get("grade_id") for c in nb.cells} - {None}
        by_id = {c.get("id"): c for c in release  # managed cells: one without a grade_id has nothing to restore
                 if nbgrader_meta(c).get("grade_id") not in present | {None}}
        for cell in nb.cells:  # an editor dropped the metadata but kept the cell's id: it is that cell
            twin = by_id.get(cell.get("id")) if not nbgrader_meta(cell) else None
            if twin is not None and nbgrader_meta(twin)["grade_id"] not in present:
                cell.metadata["nbgrader"] = copy.deepcopy(twin.metadata["nbgrader"])
                present.add(nbgrader_meta(twin)["grade_id"])
        position = 0  # where the next restored cell goes: after the last release cell found so far
        for cell in release:
            gid = nbgrader_meta(cell).get("grade_id")
            if gid in present:
                position = 1 + next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == gid)
            elif gid is not None:
                self.log.warning("cell %s was missing from the submission: restored from the release", gid)
                restored = copy.deepcopy(cell)
                if restored.cell_type == "code" and nbgrader_meta(restored).get("solution"):
                    # not the stub: it would redefine, as NotImplementedError, an answer written elsewhere
                    restored.source = "# this answer cell was missing from the submission"
                nb.cells.insert(position, restored)
                present.add(gid)
                position += 1
        return nb, resources


class RedactTests(NbGraderPreprocessor):
    """Sanitize step: test cells lose their expected literals before the notebook is written to disk.

    nbgrader writes the sanitized notebook into the folder the kernel then runs in, so the literals
    must be gone from it: a kernel could otherwise read them from its own working folder.
    """

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        for cell in nb.cells:
            if is_test_cell(cell):
                try:
                    cell.source = prepare_test_cell(cell.source, cell.metadata.nbgrader["grade_id"])[0]
                except InvalidTestCell as e:  # an instructor's mistake: `course check` reports it
                    self.log.warning("test cell left to the kernel, not judged: %s", e)
        return nb, resources


class PrepareChecks(NbGraderPreprocessor):
    """Before execution: read each test cell's checks from the master in source/ and give the kernel a folder.

    The checks come from the instructors' masters, never from the gradebook or anything a kernel could
    have written, and are read before the kernel starts. The kernel starts in a scratch copy of the
    submission's folder (inside the sandbox, copies of its data files in a private working folder).
    """

    source_directory = Unicode("", help="the folder of the masters (source/): where the checks are read").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        info = resources["nbgrader"]
        path = Path(self.source_directory, info["assignment"], info["notebook"] + ".ipynb")
        if not self.source_directory or not path.exists():
            raise FileNotFoundError(f"no master {path} to read the checks from (PrepareChecks.source_directory)")
        masters = {nbgrader_meta(c)["grade_id"]: c.source for c in read_notebook(path).cells if is_test_cell(c)}
        stash: dict[str, tuple[str, list[Check]]] = {}
        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            try:
                source = masters[grade_id]
                cell.source, checks = prepare_test_cell(source, grade_id)
            except KeyError:
                self.log.warning("test cell %s is not in %s: left to the kernel, not judged", grade_id, path)
                continue
            except InvalidTestCell as e:
                self.log.warning("test cell %s left to the kernel, not judged: %s", grade_id, e)
                continue
            stash[grade_id] = (source, checks)
        resources[STASH] = stash
        # The kernel starts in a scratch folder outside the course tree (in TMPDIR, which `autograde` makes private
        # to this submission and removes after it, whatever happens) holding copies of the assignment's own data
        # files, from source/: never a file of the submission (it could be a link to anything the grader may read).
        metadata = resources.setdefault("metadata", {})
        folder = metadata.get("path") or "."
        scratch = tempfile.mkdtemp(prefix="lecturelib-kernel-")
        for name, data in data_files(path.parent).items():
            Path(scratch, name).write_bytes(data)
        resources[SCRATCH], metadata["path"] = (folder, scratch), scratch
        return nb, resources


def data_files(folder: Path) -> dict[str, bytes]:
    """The regular files of an assignment's folder that are not notebooks (its data files), never through a link."""
    found = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".ipynb"):
            continue
        try:
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            if stat.S_ISREG(os.fstat(fd).st_mode):
                found[name] = f.read()
    return found


class JudgeChecks(NbGraderPreprocessor):
    """After execution: judge the reported values and make the verdict the test cell's only output."""

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        if SCRATCH in resources:
            folder, scratch = resources.pop(SCRATCH)
            resources["metadata"]["path"] = folder
            shutil.rmtree(scratch, ignore_errors=True)
        stash = resources.get(STASH, {})
        for cell in nb.cells:
            if not is_test_cell(cell) or cell.metadata.nbgrader["grade_id"] not in stash:
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            source, checks = stash[grade_id]
            verdict = judge(grade_id, checks, cell_stdout(cell))
            stops = [o.evalue for o in cell.outputs if o.output_type == "error" and o.ename == STOPPED]
            note = f" ({stops[0]})" if stops else ""
            cell.source = source  # the instructor's test, as the gradebook holds it
            cell.outputs = verdict_outputs(verdict, len(checks), note)
        return nb, resources


class SanitizeNotebook(NbGraderPreprocessor):
    """After judging (and before feedback): nothing a student wrote or a kernel printed can run script where the
    notebook is shown (Formgrader, feedback pages): see `lecturelib.course.isolation.sanitize`. Markdown cells as
    released are the course's own and stay as they are."""

    release_directory = Unicode("", help="the folder of the student release (notebooks/)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        info = resources.get("nbgrader", {})
        path = os.path.join(self.release_directory, info.get("assignment", ""), info.get("notebook", "") + ".ipynb")
        trusted = set()
        if self.release_directory and os.path.isfile(path):
            trusted = {c.source for c in read_notebook(path).cells if c.cell_type == "markdown"}
        return clean_notebook(nb, trusted), resources
