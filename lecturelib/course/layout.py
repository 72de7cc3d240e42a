"""Where the course's files live, and the small notebook transforms that build and check share."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.notebooknode import NotebookNode

from lecturelib.runmode import QUICK_ENV

SOLUTION_MARKS = ("### BEGIN SOLUTION", "### END SOLUTION")
HIDDEN_MARKS = ("### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS")


def find_root(start: Path | None = None) -> Path:
    """The course root: the nearest folder at or above `start` holding nbgrader_config.py."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "nbgrader_config.py").is_file():
            return folder
    raise FileNotFoundError(f"no nbgrader_config.py at or above {here}")


@dataclass(frozen=True)
class Course:
    """The folders of one course, from its root."""

    root: Path

    @property
    def source(self) -> Path:
        return self.root / "source"

    @property
    def release(self) -> Path:
        return self.root / "notebooks"

    @property
    def solutions(self) -> Path:
        return self.root / "solutions"

    @property
    def submitted(self) -> Path:
        return self.root / "submitted"

    @property
    def autograded(self) -> Path:
        return self.root / "autograded"

    @property
    def feedback(self) -> Path:
        return self.root / "feedback"

    @property
    def gradebook(self) -> Path:
        return self.root / "gradebook.db"

    def assignments(self) -> list[str]:
        """Assignment names: the folders of source/, in order."""
        return sorted(p.name for p in self.source.iterdir() if p.is_dir() and not p.name.startswith("."))

    def source_notebooks(self, assignment: str) -> list[Path]:
        return sorted((self.source / assignment).glob("*.ipynb"))

    def nbgrader(self, *args: str, timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run `nbgrader ARGS` in the course root with this interpreter; output captured."""
        return subprocess.run(
            [sys.executable, "-m", "nbgrader", *args],
            cwd=self.root,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=nbgrader_env(),
        )


def nbgrader_env() -> dict[str, str]:
    """The environment nbgrader runs in: this interpreter's scripts first (it calls `alembic`), no warnings,
    and quick measurements in the kernels it starts (nothing graded depends on their size)."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYTHONWARNINGS": "ignore", QUICK_ENV: "1"}


def iter_source_notebooks(course: Course) -> Iterator[tuple[str, Path]]:
    """(assignment, path) of every master notebook in source/."""
    for assignment in course.assignments():
        for path in course.source_notebooks(assignment):
            yield assignment, path


def nbgrader_meta(cell: NotebookNode) -> dict:
    """A cell's nbgrader metadata, or {} for a cell nbgrader does not manage."""
    return dict(cell.get("metadata", {}).get("nbgrader", {}))


def is_test_cell(cell: NotebookNode) -> bool:
    """An autograder test cell: a graded code cell that is not an answer cell."""
    m = nbgrader_meta(cell)
    return cell.cell_type == "code" and bool(m.get("grade")) and not m.get("solution")


def cell_stdout(cell: NotebookNode) -> str:
    """Everything an executed code cell printed to stdout."""
    return "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream" and o.name == "stdout")


def _drop_regions(source: str, begin: str, end: str, keep_inside: bool) -> str:
    lines, out, inside = source.split("\n"), [], False
    for line in lines:
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif keep_inside or not inside:
            out.append(line)
    return "\n".join(out)


def make_solution(nb: NotebookNode) -> NotebookNode:
    """The worked solution: solution markers and hidden tests removed, no outputs, no nbgrader metadata."""
    sol = copy.deepcopy(nb)
    for cell in sol.cells:
        cell.source = _drop_regions(cell.source, *SOLUTION_MARKS, keep_inside=True)
        cell.source = _drop_regions(cell.source, *HIDDEN_MARKS, keep_inside=False).rstrip("\n")
        cell.metadata.pop("nbgrader", None)
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    sol.metadata.pop("celltoolbar", None)
    return sol


def fill_answers(release: NotebookNode, source: NotebookNode) -> NotebookNode:
    """A release notebook with every answer cell filled in from the master (the reference submission)."""
    answers = {
        nbgrader_meta(c)["grade_id"]: _drop_regions(c.source, *SOLUTION_MARKS, keep_inside=True)
        for c in source.cells
        if nbgrader_meta(c).get("solution")
    }
    filled = copy.deepcopy(release)
    for cell in filled.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if nbgrader_meta(cell).get("solution") and gid in answers:
            cell.source = answers[gid]
    return filled


def write_notebook(nb: NotebookNode, path: Path) -> None:
    """Write a notebook the way nbgrader does (stable bytes, so rebuilding leaves git clean)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(nbformat.writes(nb) + "\n", encoding="utf-8")


def read_notebook(path: str | os.PathLike[str]) -> NotebookNode:
    return nbformat.read(str(path), as_version=4)
