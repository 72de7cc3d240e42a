"""Autograde every collected submission with nbgrader, one worker process per submission, each kernel sandboxed."""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader.api import Gradebook
from nbgrader.converters.base import NbGraderException

from lecturelib.course import sandbox
from lecturelib.course.collect import screen
from lecturelib.course.guard import Guard, RunCheck, digest, gradebook_cells, release_points
from lecturelib.course.layout import Course, repair_gradebook, scripts_on_path
from lecturelib.course.preprocessors import SANDBOX_ENV
from lecturelib.course.run import Run, read_log

SUBMISSION_TIMEOUT_S = 1800  # a whole submission; each cell also has nbgrader's Execute.timeout
NO_SANDBOX_RISK = (
    "without a sandbox every kernel runs with your rights: a submission can read the hidden tests in "
    "gradebook.db, change other students' files and grades, plant code that later grading runs, and start "
    "processes that outlive it; the checks after each submission and after the run catch some of it, not all"
)


class SandboxUnavailable(RuntimeError):
    """No sandbox can run here, and --no-sandbox was not given."""


class GradeWithTheCourse(NbGraderException):
    """nbgrader's autograde was started outside `python -m lecturelib.course autograde` (see OnlyFromTheCourse)."""


class OnlyFromTheCourse(NotebookExporter):
    """The exporter of nbgrader's Autograde (nbgrader_config.py), made before nbgrader touches anything of a
    submission: outside `course autograde` it refuses, with one line, and nothing is changed.

    Formgrader's Autograde button and plain `nbgrader autograde` would run kernels without the sandbox, and nbgrader
    removes autograded/STUDENT/ASSIGNMENT before its first preprocessor runs (GradingExecute refuses too, but only
    then): the submission would vanish from Manual Grading. nbgrader makes its exporter after finding the
    submissions and before that removal, so refusing here leaves every file and grade as it was.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if os.environ.get(SANDBOX_ENV) not in ("bwrap", "none"):
            coursedir = getattr(kwargs.get("parent"), "coursedir", None)
            assignment, student = getattr(coursedir, "assignment_id", ""), getattr(coursedir, "student_id", "*")
            command = ".venv/bin/python -m lecturelib.course autograde" + (f" {assignment}" if assignment else "") + (
                f" --student {student}" if student not in ("", "*") else "")
            message = (f"not graded, nothing changed: grade with `python -m lecturelib.course autograde`, which runs "
                       f"every kernel in a sandbox (in the course root: {command}); Formgrader's Autograde button and "
                       f"plain `nbgrader autograde` do not")
            log = getattr(kwargs.get("parent"), "log", None)
            if log is not None:
                log.error(message)
            raise GradeWithTheCourse(message)
        super().__init__(*args, **kwargs)


@dataclass
class Outcome:
    """What happened to one submission: its score, or why it could not be graded."""

    student: str
    assignment: str
    score: float | None = None  # autograded points (the test cells' scores)
    max_score: float | None = None  # autograded points available
    manual_max: float = 0.0  # points of the cells graded by hand (written answers)
    manual_score: float | None = None  # their points once all are graded by hand
    graded: bool = False
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # worth knowing, not a failure (e.g. cells restored)
    seconds: float = 0.0


def submissions(course: Course, assignments: list[str], students: list[str] | None = None) -> list[tuple[str, str]]:
    """(student, assignment) of every collected submission of these assignments (of these students)."""
    if not course.submitted.is_dir():
        return []
    return sorted(
        (student.name, a)
        for student in course.submitted.iterdir()
        if student.is_dir() and (students is None or student.name in students)
        for a in assignments
        if (student / a).is_dir()
    )


def _invalid_notebooks(folder: Path, root: Path) -> list[str]:
    problems = []
    for path in sorted(folder.glob("*.ipynb")):
        try:
            nbformat.validate(nbformat.read(str(path), as_version=4))
        except Exception as e:  # noqa: BLE001 - any unreadable file is reported, never fatal
            reason = str(e).splitlines()[0][:120] if str(e) else type(e).__name__
            problems.append(f"{path.relative_to(root)} is not a valid notebook ({reason})")
    return problems


def _last_error(log: str) -> str:
    """The most telling line of a failed nbgrader run: the exception that ended it, else its first ERROR."""
    raised = [ln.strip() for ln in log.splitlines() if re.match(r"\s*[\w.]*(Error|Exception)\b.*:", ln)]
    errors = [ln.split("] ", 1)[-1] for ln in log.splitlines() if "| ERROR]" in ln]
    useful = [e for e in errors if not e.startswith(("There was an error", "Traceback", "Please see"))]
    return (raised[-1:] or useful or ["nbgrader autograde failed"])[0][:200]


def _kill_leftovers(state: Path) -> bool:
    """Kill whatever of a submission's sandboxes still runs after its nbgrader ended (there should be nothing)."""
    pids = [int(p) for line in (state / "pids").read_text().split("\n") if line
            for p in line.split() if p.isdigit() and int(p) > 0] if (state / "pids").exists() else []
    alive = []
    deadline = time.monotonic() + 3  # a kernel shut down a moment ago may still be exiting
    for pid in pids:
        while _sandbox_process(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _sandbox_process(pid):
            alive.append(pid)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return bool(alive)


def _sandbox_process(pid: int) -> bool:
    """Whether `pid` is still a sandbox's supervisor or bwrap (not a zombie, not a recycled pid)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except (OSError, IndexError):
        return False
    return b"lecturelib.course.sandbox" in cmdline or b"bwrap" in cmdline


def _grade_one(course: Course, run: Run, student: str, assignment: str, timeout_s: float,
               cell_timeout_s: int | None, log_dir: Path) -> Outcome:
    """Run `nbgrader autograde` for one submission in its own process group and private folder; never raises."""
    out = Outcome(student, assignment)
    start = time.perf_counter()
    folder = course.submitted / student / assignment
    out.problems = _invalid_notebooks(folder, course.root)
    if out.problems:
        return out
    before = digest(folder)
    private = run.submission_folder()
    log_path = log_dir / f"{student}--{assignment}.log"
    rc: int | None = -1
    try:
        backup = private / "submitted"
        shutil.copytree(folder, backup)
        cmd = [sys.executable, "-I", "-W", "ignore", "-m", "nbgrader", "autograde", assignment,
               "--student", student, "--force"]
        if cell_timeout_s is not None:
            cmd.append(f"--Execute.timeout={cell_timeout_s}")
        with open(log_path, "w") as log_file:
            proc = subprocess.Popen(cmd, cwd=course.root, stdout=log_file, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=run.env(private), preexec_fn=_die_with_parent)
            run.processes.add(proc)
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # nbgrader; its kernel's supervisor dies with it, and the sandbox
                proc.wait()
                rc = None
            finally:
                run.processes.discard(proc)
        if _kill_leftovers(private / "state"):
            out.problems.append("a process of its sandbox outlived grading (killed)")
        if digest(folder) != before:
            shutil.rmtree(folder)
            shutil.copytree(backup, folder)
            out.problems.append("the submission changed its own submitted files while graded (restored)")
    finally:
        shutil.rmtree(private, ignore_errors=True)  # TMPDIR, scratch folder, kernel sockets: always
    log = read_log(log_path)  # bounded: never a whole file in memory
    if rc is None:
        out.problems.append(f"could not be graded: took longer than {timeout_s:.0f} s")
    elif rc != 0:
        out.problems.append(f"could not be graded: {_last_error(log)}")
    else:
        out.graded = True
    stopped = re.findall(r"cell (\S+): the grader stopped here: (.*); the cells after it were not run", log)
    if stopped:
        out.notes.append(f"stopped at {stopped[0][0]}: {stopped[0][1]}; the cells after it scored 0")
    restored = re.findall(r"cell (\S+) was missing from the submission", log)
    if restored:
        out.notes.append(f"restored deleted cells: {', '.join(restored)}")
    out.seconds = time.perf_counter() - start
    return out


_PRCTL: Any = None  # prctl, resolved here and not in the child: the child of a threaded process must not import
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    pass


def _die_with_parent() -> None:
    """In nbgrader's process: die (SIGKILL) with the autograde process, so a killed run leaves no grading behind."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _ensure_gradebook(course: Course, assignments: list[str], students: list[str]) -> list[str]:
    """Every assignment and every student must be in the gradebook before the workers start (two nbgrader processes
    that both create a new student collide: UNIQUE constraint failed: student.id), and its copies of the test cells
    right; WAL lets workers read while one writes. Returns what had to be repaired."""
    notes = repair_gradebook(course)
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        known = {a.name for a in gb.assignments if a.notebooks}  # `nbgrader db assignment add` (a due date) adds none
        for student in students:  # names and emails from a roster import stay as they are
            gb.update_or_create_student(student)
    for a in assignments:
        if a not in known:  # its notebooks and cells into the gradebook; the release it writes is thrown away (the
            with tempfile.TemporaryDirectory(prefix="lecturelib-release-") as scratch:  # committed one is build's)
                course.nbgrader("generate_assignment", a, "--force", f"--CourseDirectory.release_directory={scratch}")
    with sqlite3.connect(course.gradebook) as db:
        db.execute("PRAGMA journal_mode=WAL")
    for a in assignments:
        notes += gradebook_cells(course, a, repair=True)
    return notes


def _read_scores(course: Course, outcomes: list[Outcome]) -> None:
    """Autograded and manual points of each graded submission, from the gradebook (verified by RunCheck)."""
    rows: dict[tuple[str, str], list[tuple[str, str, float | None, float | None, float]]] = {}
    with sqlite3.connect(course.gradebook, timeout=120) as db:
        for student, assignment, notebook, cell, auto, manual, max_score in db.execute(
                "select sa.student_id, a.name, n.name, c.name, g.auto_score, g.manual_score, gc.max_score"
                " from grade g join submitted_notebook sn on g.notebook_id = sn.id"
                " join notebook n on sn.notebook_id = n.id join submitted_assignment sa on sn.assignment_id = sa.id"
                " join assignment a on sa.assignment_id = a.id join base_cell c on g.cell_id = c.id"
                " join grade_cells gc on gc.id = c.id"):
            rows.setdefault((student, assignment), []).append((notebook, cell, auto, manual, max_score))
    tests: dict[str, dict[tuple[str, str], float]] = {}
    for o in outcomes:
        if not o.graded:
            continue
        if (o.student, o.assignment) not in rows:
            o.graded = False
            o.problems.append("could not be graded: no grades were saved")
            continue
        auto_cells = tests.setdefault(o.assignment, release_points(course, o.assignment))
        o.score = o.max_score = 0.0
        manual_done = True
        o.manual_score = 0.0
        for notebook, cell, auto, manual, max_score in rows[(o.student, o.assignment)]:
            if (notebook, cell) in auto_cells:
                o.score += manual if manual is not None else (auto or 0.0)
                o.max_score += auto_cells[(notebook, cell)]
            else:
                o.manual_max += max_score
                manual_done = manual_done and manual is not None
                o.manual_score += manual or 0.0
        if not manual_done:
            o.manual_score = None


def check_sandbox(sandboxed: bool) -> None:
    """Refuse to grade without a sandbox unless the instructor said --no-sandbox (SandboxUnavailable)."""
    if sandboxed:
        reason = sandbox.unavailable()
        if reason:
            raise SandboxUnavailable(
                f"cannot sandbox the kernels: {reason}. Install bubblewrap (Debian/Ubuntu: `sudo apt-get install "
                f"bubblewrap`; Fedora: `sudo dnf install bubblewrap`) and allow user namespaces, or pass "
                f"--no-sandbox to grade anyway ({NO_SANDBOX_RISK})")


@dataclass
class Report:
    """A whole run: one outcome a submission, and what was found about the course or other submissions."""

    outcomes: list[Outcome]
    notes: list[str] = field(default_factory=list)


def autograde(course: Course, assignments: list[str], *, workers: int = 1, students: list[str] | None = None,
              timeout_s: float = SUBMISSION_TIMEOUT_S, cell_timeout_s: int | None = None, sandboxed: bool = True,
              limits: sandbox.Limits | None = None) -> Report:
    """Autograde every submission of `assignments` (of `students`) with `workers` in parallel, each kernel in a
    sandbox (`sandboxed=False` only when the instructor accepts NO_SANDBOX_RISK), then verify the whole run."""
    scripts_on_path()
    pairs = submissions(course, assignments, students)
    if not pairs:
        return Report([])
    check_sandbox(sandboxed)
    screened = screen(course, pairs)  # before anything reads submitted/: links, devices, stray files moved out
    # CPU time per process: what all cores could use in the submission's time, a backstop only
    limits = (limits or sandbox.Limits())._replace(cpu_s=int(timeout_s) * (os.cpu_count() or 1))
    with Run(course, sandboxed=sandboxed, limits=limits, workers=workers) as run:
        notes = run.notes + _ensure_gradebook(course, sorted({a for _, a in pairs}), sorted({s for s, _ in pairs}))
        if not sandboxed:
            notes.append(f"graded with --no-sandbox: {NO_SANDBOX_RISK}")
        log_dir = course.root / "logs" / "autograde"
        guard, check, in_flight = Guard(course), RunCheck(course, run.state / "submitted"), set()
        told: dict[tuple[str, str], list[str]] = {}  # what the guard found while a submission was running

        def grade(pair: tuple[str, str]) -> Outcome:
            with guard.lock:
                in_flight.add(pair)
                run.mark(pair, done=False)
            found = screened[pair]
            out = (_grade_one(course, run, pair[0], pair[1], timeout_s, cell_timeout_s, log_dir) if found.gradable
                   else Outcome(*pair))
            out.problems[:0], out.notes[:0] = found.problems, found.notes
            check.graded(pair, out.graded)
            with guard.lock:
                in_flight.discard(pair)
                for suspect, problems in guard.verify(pair, in_flight).items():
                    told.setdefault(suspect, []).extend(problems)
                out.problems += told.pop(pair, [])
                run.mark(pair, done=True)
            return out

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            try:
                outcomes = list(pool.map(grade, pairs))
            except BaseException:
                run.stop()
                raise
        by_pair, others = check.finish()
        for o in outcomes:
            o.problems += by_pair.get((o.student, o.assignment), [])
        _read_scores(course, outcomes)
    return Report(outcomes, notes + others)


def score_text(o: Outcome) -> str:
    """'9/9 autograded, 3 manual points to grade': what the autograder gave and what waits for a person."""
    if o.score is None or o.max_score is None:
        return "-"
    text = f"{o.score:g}/{o.max_score:g} autograded"
    if o.manual_max and o.manual_score is None:
        text += f", {o.manual_max:g} manual points to grade"
    elif o.manual_max:
        text += f", {o.manual_score:g}/{o.manual_max:g} graded by hand"
    return text


def printable(text: str) -> str:
    """Text safe for a terminal: a student's folder name or exception message cannot send escape sequences."""
    return "".join(c if c.isprintable() else "?" for c in text)


def format_table(outcomes: list[Outcome]) -> str:
    """The summary an instructor reads: one row a submission, then what waits for manual grading."""
    rows = [("student", "assignment", "score", "seconds", "problems")]
    for o in outcomes:
        rows.append((printable(o.student), printable(o.assignment), score_text(o), f"{o.seconds:.1f}",
                     printable("; ".join(o.problems + o.notes)) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4] for r in rows]
    graded = [o for o in outcomes if o.graded]
    waiting = [o for o in graded if o.manual_max and o.manual_score is None]
    lines.append(f"{len(graded)} of {len(outcomes)} submissions autograded"
                 + (f"; {len(waiting)} wait for manual grading of their written answers "
                    f"(jupyter lab at the course root: Nbgrader > Formgrader > Manual Grading)" if waiting else ""))
    return "\n".join(lines)
