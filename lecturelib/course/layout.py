"""Where the course's files live, and the small notebook transforms that build and check share."""

from __future__ import annotations

import copy
import os
import sqlite3
import subprocess
import sys
import tempfile
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


class _Below:
    """A path below a course's root, read as an attribute of the course."""

    def __init__(self, *parts: str) -> None:
        self.parts = parts

    def __get__(self, course: Course, owner: type | None = None) -> Path:
        return course.root.joinpath(*self.parts)


@dataclass(frozen=True)
class Course:
    """The folders of one course, from its root."""

    root: Path

    source = _Below("source")  # the masters: the only place notebooks are edited
    release = _Below("notebooks")  # what students get
    solutions = _Below("solutions")
    submitted = _Below("submitted")
    autograded = _Below("autograded")
    feedback = _Below("feedback")
    gradebook = _Below("gradebook.db")
    exports = _Below("exports")
    templates = _Below("jupyter", "share")  # Jupyter data of the instructor's pages (JUPYTER_PATH): a local MathJax

    def assignments(self) -> list[str]:
        """Assignment names: the folders of source/, in order."""
        return sorted(p.name for p in self.source.iterdir() if p.is_dir() and not p.name.startswith("."))

    def source_notebooks(self, assignment: str) -> list[Path]:
        return sorted((self.source / assignment).glob("*.ipynb"))

    def nbgrader(self, *args: str, timeout_s: float | None = None) -> subprocess.CompletedProcess[str]:
        """Run `nbgrader ARGS` in the course root with this interpreter, in a clean environment; output captured."""
        if args[:1] != ("validate",):  # every other command opens the gradebook, and nbgrader's own way to make one
            new_gradebook(self.gradebook)  # runs `alembic heads` in a subprocess: seconds of every new course's first command
        with tempfile.TemporaryDirectory(prefix="lecturelib-nbgrader-") as private:
            env = nbgrader_env(Path(private))
            if self.templates.is_dir():  # the course's nbconvert templates: feedback pages load a local MathJax
                env["JUPYTER_PATH"] = str(self.templates)
            return subprocess.run(
                [sys.executable, "-I", "-W", "ignore", "-m", "nbgrader", *args],
                cwd=self.root,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env=env,
            )


def scripts_on_path() -> None:
    """Put this interpreter's scripts (its venv's bin/) first on PATH, for this process and what it starts.

    nbgrader runs the `alembic` program by name, also inside this process when a Gradebook creates
    gradebook.db: without an activated venv it is not found, and a gradebook without an `alembic_version`
    table is left behind. Every course command calls this first, so none needs an activated venv.
    """
    scripts = str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "").split(os.pathsep)
    if path[:1] != [scripts]:
        os.environ["PATH"] = os.pathsep.join([scripts, *[p for p in path if p and p != scripts]])


# What nbgrader may keep of the instructor's environment: locale, time zone, thread counts, GPUs. Nothing else
# (no PYTHONPATH, PYTHONSTARTUP, JUPYTER_* or IPYTHONDIR): what it loads is the course's, never a leftover.
KEEP_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "TERM", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def nbgrader_env(private: Path) -> dict[str, str]:
    """A clean environment for nbgrader: HOME, Jupyter and IPython folders of its own under `private` (no
    ~/.jupyter/nbgrader_config.py, no IPython startup files, no config but the course's nbgrader_config.py),
    this interpreter's scripts first on PATH (it calls `alembic`), no warnings, and quick measurements in the
    kernels it starts (nothing graded depends on their size)."""
    scripts = str(Path(sys.executable).parent)
    for sub in ("home", "tmp", "runtime"):
        (private / sub).mkdir(parents=True, exist_ok=True)
    env = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    env.update({
        "PATH": os.pathsep.join([scripts, os.environ.get("PATH", "/usr/bin:/bin")]),
        "HOME": str(private / "home"),
        "TMPDIR": str(private / "tmp"),
        "JUPYTER_NO_CONFIG": "1",  # config: the course's nbgrader_config.py (in the working folder) and nothing else
        "JUPYTER_CONFIG_DIR": str(private / "home" / ".jupyter"),
        "JUPYTER_DATA_DIR": str(private / "home" / ".local" / "share" / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(private / "runtime"),
        "IPYTHONDIR": str(private / "home" / ".ipython"),
        "PYTHONWARNINGS": "ignore",
        QUICK_ENV: "1",
    })
    return env


def kernel_env() -> dict[str, str]:
    """The environment of a kernel that runs the course's own notebooks (`check`): quick measurements, no warnings."""
    scripts_on_path()
    return {**os.environ, "PYTHONWARNINGS": "ignore", QUICK_ENV: "1"}


def repair_gradebook(course: Course) -> list[str]:
    """Find a gradebook.db that nbgrader left without its `alembic_version` (it could not run `alembic` when it
    created the tables) and stamp it with the revision its tables have: nbgrader's head. Returns what was done."""
    if not course.gradebook.exists() or course.gradebook.stat().st_size == 0:
        return []
    with sqlite3.connect(course.gradebook, timeout=120) as db:
        tables = {row[0] for row in db.execute("select name from sqlite_master where type = 'table'")}
        if not tables or ("alembic_version" in tables and db.execute("select count(*) from alembic_version").fetchone()[0]):
            return []
        head = alembic_head()
        db.execute("create table if not exists alembic_version (version_num VARCHAR(32) NOT NULL)")
        db.execute("delete from alembic_version")
        db.execute("insert into alembic_version (version_num) values (?)", (head,))
    return [f"repaired gradebook.db: it had no alembic_version (nbgrader could not run `alembic` when it created "
            f"the gradebook, e.g. without the venv on PATH); its tables are nbgrader's current schema, stamped {head}"]


def new_gradebook(path: Path) -> None:
    """An empty gradebook at `path` as nbgrader makes one (its tables, stamped with the schema's head), unless one is
    there already; two processes may race to make it: one wins, the other keeps the winner's."""
    if path.exists():
        return
    from nbgrader.api import Base
    from sqlalchemy import create_engine

    fd, made = tempfile.mkstemp(prefix=".gradebook-", suffix=".db", dir=path.parent)
    os.close(fd)
    try:
        engine = create_engine(f"sqlite:///{made}")
        Base.metadata.create_all(bind=engine)
        engine.dispose()
        with sqlite3.connect(made) as db:
            db.execute("create table alembic_version (version_num VARCHAR(32) NOT NULL)")
            db.execute("insert into alembic_version (version_num) values (?)", (alembic_head(),))
        db.close()
        os.link(made, path)  # atomic, and never over a gradebook another process made meanwhile
    except FileExistsError:
        pass
    finally:
        os.unlink(made)


def alembic_head() -> str:
    """The newest revision of nbgrader's database schema (what `alembic heads` prints), read without running alembic."""
    from alembic.config import Config
    from alembic.script import ScriptDirectory
    from nbgrader.dbutil import ALEMBIC_DIR

    config = Config()
    config.set_main_option("script_location", ALEMBIC_DIR)
    return str(ScriptDirectory.from_config(config).get_current_head())


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
