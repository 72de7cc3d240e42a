"""`build` regenerates notebooks/ and solutions/ from source/; `check` finds every way they can go wrong."""

from __future__ import annotations

import copy
import filecmp
import json
import platform
import shutil
import subprocess
import tempfile
import time
from collections import Counter
from pathlib import Path

from jupyter_client.manager import AsyncKernelManager
from jupyter_core.utils import run_sync
from nbclient import NotebookClient
from nbformat.notebooknode import NotebookNode

from lecturelib.course.layout import (
    Course,
    cell_stdout,
    is_test_cell,
    iter_source_notebooks,
    kernel_env,
    make_solution,
    nbgrader_meta,
    read_notebook,
    write_notebook,
)
from lecturelib.course.isolation import connection_paths, socket_folder
from lecturelib.grading import InvalidTestCell, judge, parse_test_cell, prepare_test_cell

CELL_TIMEOUT_S = 300


# What the Python kernel reports about itself (ipykernel): a notebook whose language_info differs opens modified.
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}


def with_language_info(nb: NotebookNode) -> NotebookNode:
    """The notebook with the complete language_info of this Python's kernel, as JupyterLab would write it on opening
    (the masters hold only the name): an untouched notebook opens unmodified. The version is this interpreter's;
    the student's copy gets the student's (lecturelib.workspace), and `check` ignores it."""
    nb.metadata["language_info"] = {**LANGUAGE_INFO, "version": platform.python_version()}
    return nb


def build(course: Course, notes: list[str] | None = None) -> list[str]:
    """Regenerate the release (nbgrader generate_assignment) and the solutions; return problems. A file of notebooks/
    or solutions/ that git does not have as it is (someone worked in it) and that the build changes or removes is
    first kept in logs/build/kept-TIME/, and `notes` says so: a build never destroys work silently."""
    problems = []
    with tempfile.TemporaryDirectory(prefix="lecturelib-build-") as scratch:
        held = _hold_unsaved(course, Path(scratch))
        for folder in (course.release, course.solutions):
            shutil.rmtree(folder, ignore_errors=True)
        assignments = course.assignments()
        # every assignment in one nbgrader process (its start is most of the time); on a failure, one by one, to
        # say which assignment failed and why
        everything = len(assignments) > 1 and course.nbgrader("generate_assignment", "*", "--force").returncode == 0
        for assignment in [] if everything else assignments:
            done = course.nbgrader("generate_assignment", assignment, "--force")
            if done.returncode != 0:
                last = [ln for ln in done.stderr.splitlines() if "ERROR" in ln or "Error" in ln][-1:]
                problems.append(f"{assignment}: nbgrader generate_assignment failed: {' '.join(last) or done.stderr[-300:]}")
        for path in sorted(course.release.rglob("*.ipynb")):
            write_notebook(with_language_info(read_notebook(path)), path)
        for _, path in iter_source_notebooks(course):
            write_notebook(with_language_info(make_solution(read_notebook(path))), course.solutions / path.name)
        kept = _keep_what_changed(course, Path(scratch), held)
    if kept and notes is not None:
        notes += [f"{rel} had work that git does not have; the build replaced it: kept in {kept_in}"
                  for rel, kept_in in kept]
    return problems


def _unsaved(course: Course) -> list[Path] | None:
    """Files of notebooks/ and solutions/ that git does not have as they are (modified, untracked, ignored; not
    Jupyter's checkpoints); None where git cannot tell (not a git repository: then every file counts)."""
    try:
        top = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=course.root, capture_output=True, text=True,
                             timeout=60, check=False)
        done = subprocess.run(["git", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignored=traditional",
                               "--", course.release.name, course.solutions.name], cwd=course.root, capture_output=True,
                              timeout=60, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if top.returncode != 0 or done.returncode != 0:
        return None
    repo = Path(top.stdout.strip())  # porcelain paths are relative to the repository's top, wherever the course sits
    paths = [repo / entry[3:].decode() for entry in done.stdout.split(b"\0") if len(entry) > 3]
    return [p for p in paths if ".ipynb_checkpoints" not in p.parts and p.is_file()]


def _hold_unsaved(course: Course, scratch: Path) -> list[Path]:
    """Copy what a rebuild could destroy into `scratch`; the paths, relative to the course root."""
    found = _unsaved(course)
    if found is None:
        found = [p for folder in (course.release, course.solutions) if folder.is_dir() for p in folder.rglob("*")
                 if p.is_file() and ".ipynb_checkpoints" not in p.parts]
    held, root = [], course.root.resolve()
    for path in found:
        rel = path.resolve().relative_to(root)
        (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, scratch / rel)
        held.append(rel)
    return held


def _keep_what_changed(course: Course, scratch: Path, held: list[Path]) -> list[tuple[Path, Path]]:
    """Move each held file that the build did not reproduce into logs/build/kept-TIME/; (file, where it went)."""
    kept = []
    folder = course.root / "logs" / "build" / f"kept-{time.strftime('%Y%m%d-%H%M%S')}"
    for rel in held:
        built = course.root / rel
        if built.is_file() and _same_file(built, scratch / rel):
            continue
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(scratch / rel), folder / rel)
        kept.append((rel, (folder / rel).relative_to(course.root)))
    return kept


def _same_file(a: Path, b: Path) -> bool:
    """Equal bytes, or the same notebook but for the Python version in language_info (each machine writes its own)."""
    if filecmp.cmp(a, b, shallow=False):
        return True
    if a.suffix != ".ipynb":
        return False
    try:
        x, y = (json.loads(p.read_text(encoding="utf-8")) for p in (a, b))
        for nb in (x, y):
            nb.get("metadata", {}).get("language_info", {}).pop("version", None)
    except (OSError, ValueError, AttributeError):
        return False
    return bool(x == y)


def _static_problems(course: Course) -> list[str]:
    problems = []
    for _, path in iter_source_notebooks(course):
        rel = path.relative_to(course.root)
        nb = read_notebook(path)
        n_outputs = sum(len(c.get("outputs", [])) for c in nb.cells if c.cell_type == "code")
        if n_outputs:
            problems.append(f"{rel}: {n_outputs} stored outputs (keep source/ free of outputs)")
        ids = [nbgrader_meta(c).get("grade_id") for c in nb.cells if nbgrader_meta(c)]
        if None in ids or "" in ids:
            problems.append(f"{rel}: {ids.count(None) + ids.count('')} nbgrader cells without a grade_id")
        for gid, n in Counter(i for i in ids if i).items():
            if n > 1:
                problems.append(f"{rel}: grade_id {gid!r} is used by {n} cells")
        for i, cell in enumerate(nb.cells):
            if not is_test_cell(cell):
                continue
            try:
                parse_test_cell(cell.source)
            except InvalidTestCell as e:
                problems.append(f"{rel}: {nbgrader_meta(cell).get('grade_id')}: {str(e).split(': ', 1)[-1]}")
            before = nb.cells[i - 1] if i else None
            m = nbgrader_meta(before) if before is not None else {}
            if not (m.get("solution") or m.get("grade")):
                # nbgrader 0.9.6 can only restore a deleted test cell after an answer or test cell
                problems.append(
                    f"{rel}: test cell {nbgrader_meta(cell).get('grade_id')} must follow an answer or test cell"
                )
    return problems


def _drift(course: Course) -> list[str]:
    """Build into a scratch copy of the course and compare with the committed notebooks/ and solutions/."""
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Course(Path(tmp))
        shutil.copy2(course.root / "nbgrader_config.py", scratch.root)
        shutil.copytree(course.source, scratch.source)
        problems = build(scratch)
        for name in ("release", "solutions"):
            built, committed = getattr(scratch, name), getattr(course, name)
            hint = "(run `python -m lecturelib.course build`)"
            problems += [f"{committed.name}/{p} {hint}" for p in _tree_differences(built, committed)]
    return problems


def _tree_differences(built: Path, committed: Path) -> list[str]:
    files = lambda root: {p.relative_to(root) for p in root.rglob("*") if p.is_file()} if root.exists() else set()
    want, have = files(built), files(committed)
    out = [f"{p}: missing" for p in sorted(want - have)] + [f"{p}: stale, not built from source/" for p in sorted(have - want)]
    out += [f"{p}: differs from what source/ builds" for p in sorted(want & have)
            if not _same_file(built / p, committed / p)]
    return out


def execute(nb: NotebookNode, cwd: Path, timeout_s: int = CELL_TIMEOUT_S) -> NotebookNode:
    """Run every cell of a copy of `nb` in a fresh kernel, errors recorded, not raised."""
    ran = copy.deepcopy(nb)
    # IPC sockets in a short private folder whatever TMPDIR is: no TCP port, no "running over TCP without
    # encryption" warning, no path too long for a socket
    runtime = socket_folder()
    try:
        connection, ip = connection_paths(runtime, sandboxed=False)
        km = AsyncKernelManager(kernel_name="python3", transport="ipc", connection_file=connection, ip=ip)
        try:
            NotebookClient(ran, km=km, timeout=timeout_s, allow_errors=True,
                           resources={"metadata": {"path": str(cwd)}}).execute(env=kernel_env())
        finally:
            if run_sync(km.is_alive)():
                run_sync(km.shutdown_kernel)(now=True)
    finally:
        shutil.rmtree(runtime, ignore_errors=True)
    return ran


def _outcomes(nb: NotebookNode) -> dict[str, tuple[bool, bool]]:
    """grade_id -> (raised an error, wrote to stderr) for every test cell of an executed notebook."""
    return {
        nbgrader_meta(c)["grade_id"]: (
            any(o.output_type == "error" for o in c.outputs),
            any(o.output_type == "stream" and o.name == "stderr" for o in c.outputs),
        )
        for c in nb.cells
        if is_test_cell(c)
    }


def _executed_problems(course: Course) -> list[str]:
    """Run the master (the solution) and the untouched release with the full tests, as autograding would."""
    problems = []
    for assignment, path in iter_source_notebooks(course):
        rel = path.relative_to(course.root)
        source = read_notebook(path)
        solved = execute(source, path.parent)
        for i, cell in enumerate(solved.cells):
            if cell.cell_type == "code" and not is_test_cell(cell) and any(o.output_type == "error" for o in cell.outputs):
                problems.append(f"{rel}: cell {i} raises on the solution")
        for gid, (error, stderr) in _outcomes(solved).items():
            if error:
                problems.append(f"{rel}: {gid} fails on the solution")
            if stderr:
                problems.append(f"{rel}: {gid} writes to stderr on the solution (nbgrader would give it 0)")
        release_path = course.release / assignment / path.name
        if not release_path.exists():
            continue  # reported as drift
        problems += [f"{rel}: {p}" for p in _release_problems(source, read_notebook(release_path), path.parent)]
    return problems


def _release_problems(source: NotebookNode, release: NotebookNode, cwd: Path) -> list[str]:
    """Grade the untouched release as the autograder would: every check must fail on it."""
    tests = {nbgrader_meta(c)["grade_id"]: c.source for c in source.cells if is_test_cell(c)}
    checks = {}
    for cell in release.cells:
        gid = str(nbgrader_meta(cell).get("grade_id"))
        if is_test_cell(cell) and gid in tests:
            cell.source, checks[gid] = prepare_test_cell(tests[gid], gid)  # hidden tests back, literals out
    problems = []
    for cell in execute(release, cwd).cells:
        gid = str(nbgrader_meta(cell).get("grade_id"))
        if not is_test_cell(cell) or gid not in checks:
            continue
        verdict = judge(gid, checks[gid], cell_stdout(cell))
        if verdict.passed:
            problems.append(f"{gid} passes on the untouched release")
        else:
            problems += [f"{gid}: check {c.index + 1} passes on the untouched release (it does not use the answer)"
                         for c in checks[gid] if c.index not in verdict.failed]
    return problems


def check(course: Course, *, run: bool = True) -> list[str]:
    """Every problem with source/ and what is built from it; empty when the course is sound."""
    problems = _static_problems(course) + _drift(course)
    return problems + (_executed_problems(course) if run and not problems else [])
