"""Autograde every collected submission with nbgrader, one worker process per submission."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from lecturelib.course.layout import Course, nbgrader_env

SUBMISSION_TIMEOUT_S = 1800  # a whole submission; each cell also has nbgrader's Execute.timeout


@dataclass
class Outcome:
    """What happened to one submission: its score, or why it could not be graded."""

    student: str
    assignment: str
    score: float | None = None
    max_score: float | None = None
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


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


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


def _grade_one(course: Course, student: str, assignment: str, timeout_s: float, cell_timeout_s: int | None,
               log_dir: Path) -> Outcome:
    """Run `nbgrader autograde` for one submission in its own process group; never raises."""
    out = Outcome(student, assignment)
    start = time.perf_counter()
    folder = course.submitted / student / assignment
    out.problems = _invalid_notebooks(folder, course.root)
    if out.problems:
        return out
    before = _digest(folder)
    with tempfile.TemporaryDirectory() as backup:
        shutil.copytree(folder, Path(backup) / "copy")
        cmd = [sys.executable, "-m", "nbgrader", "autograde", assignment, "--student", student, "--force"]
        if cell_timeout_s is not None:
            cmd.append(f"--Execute.timeout={cell_timeout_s}")
        log_path = log_dir / f"{student}--{assignment}.log"
        with open(log_path, "w") as log:
            proc = subprocess.Popen(cmd, cwd=course.root, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=nbgrader_env())
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)  # nbgrader and the kernel it started
                proc.wait()
                rc = None
        if _digest(folder) != before:
            shutil.rmtree(folder)
            shutil.copytree(Path(backup) / "copy", folder)
            out.problems.append("the submission changed its own submitted files while graded (restored)")
    if rc is None:
        out.problems.append(f"could not be graded: took longer than {timeout_s:.0f} s")
    elif rc != 0:
        out.problems.append(f"could not be graded: {_last_error(log_path.read_text(errors='replace'))}")
    else:
        out.graded = True
    restored = re.findall(r"cell (\S+) was missing from the submission", log_path.read_text(errors="replace"))
    if restored:
        out.notes.append(f"restored deleted cells: {', '.join(restored)}")
    out.seconds = time.perf_counter() - start
    return out


GRADE_ROWS = """
select g.id, sa.student_id, a.name, g.auto_score, g.manual_score, g.extra_credit
from grade g join submitted_notebook sn on g.notebook_id = sn.id
join submitted_assignment sa on sn.assignment_id = sa.id join assignment a on sa.assignment_id = a.id
"""


class Guard:
    """What grading a submission must leave alone: the course's files and every other grade in the gradebook.

    A kernel runs with the grader's own rights, so it could rewrite nbgrader_config.py, lecturelib or
    the gradebook. Each submission is checked when it finishes: changed files and grades are put back
    and the submission is reported. (Isolation proper needs an OS sandbox; see the README.)
    """

    def __init__(self, course: Course) -> None:
        import lecturelib

        self.db = course.gradebook
        roots = [course.source, course.release, Path(lecturelib.__file__).parent]
        paths = [course.root / "nbgrader_config.py"] + [p for r in roots for p in sorted(r.rglob("*"))
                                                         if p.is_file() and "__pycache__" not in p.parts]
        self.files = {p: p.read_bytes() for p in paths}
        self.grades = {row[0]: row[1:] for row in self._rows()}
        self.lock = threading.Lock()

    def _rows(self) -> list[tuple]:
        with sqlite3.connect(self.db, timeout=120) as db:
            return db.execute(GRADE_ROWS).fetchall()

    def verify(self, current: tuple[str, str], in_flight: set[tuple[str, str]]) -> dict[tuple[str, str], list[str]]:
        """Put back what changed since the last check, and say so to every submission that was running then.

        With several workers, the change happened while `current` or one of `in_flight` ran: each of them
        is told, with the others named (`audit` then shows which one's code did it).
        """
        found = []
        changed = [p for p, data in self.files.items() if not p.exists() or p.read_bytes() != data]
        for p in changed:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(self.files[p])
        if changed:
            found.append(f"(restored): {', '.join(p.name for p in changed)}")
        restore = []
        for gid, student, assignment, auto, manual, extra in self._rows():
            # a row created since the last check: autograding never sets manual grades or extra credit
            old = self.grades.get(gid, (student, assignment, auto, None, None))
            running = (student, assignment) == current or (student, assignment) in in_flight
            if (manual, extra) != old[3:] or (not running and auto != old[2]):
                restore.append((auto if running else old[2], old[3], old[4], gid))
        if restore:
            with sqlite3.connect(self.db, timeout=120) as db:
                db.executemany("update grade set auto_score=?, manual_score=?, extra_credit=? where id=?", restore)
            found.append(f"({len(restore)} grades restored): the gradebook")
        self.grades.update({row[0]: row[1:] for row in self._rows() if (row[1], row[2]) == current})
        suspects = {current} | in_flight
        return {
            s: ["course files or grades changed while it was graded"
                + (f" alongside {', '.join(sorted(o[0] for o in suspects - {s}))}" if len(suspects) > 1 else "")
                + f" {what}" for what in found]
            for s in suspects
        } if found else {}


def _ensure_gradebook(course: Course, assignments: list[str]) -> None:
    """The assignments must be in the gradebook; WAL lets workers read while one writes."""
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        known = {a.name for a in gb.assignments}
    for a in assignments:
        if a not in known:
            course.nbgrader("generate_assignment", a, "--force")
    with sqlite3.connect(course.gradebook) as db:
        db.execute("PRAGMA journal_mode=WAL")


def _read_scores(course: Course, outcomes: list[Outcome]) -> None:
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        for o in outcomes:
            if not o.graded:
                continue
            try:
                sub = gb.find_submission(o.assignment, o.student)
            except MissingEntry:
                o.graded = False
                o.problems.append("could not be graded: no grades were saved")
                continue
            o.score, o.max_score = sub.score, sub.max_score


def autograde(course: Course, assignments: list[str], *, workers: int = 1, students: list[str] | None = None,
              timeout_s: float = SUBMISSION_TIMEOUT_S, cell_timeout_s: int | None = None) -> list[Outcome]:
    """Autograde every submission of `assignments` (of `students`) with `workers` in parallel."""
    pairs = submissions(course, assignments, students)
    if not pairs:
        return []
    _ensure_gradebook(course, sorted({a for _, a in pairs}))
    log_dir = course.root / "logs" / "autograde"
    log_dir.mkdir(parents=True, exist_ok=True)
    guard, in_flight = Guard(course), set()
    told: dict[tuple[str, str], list[str]] = {}  # what the guard found while a submission was running

    def grade(pair: tuple[str, str]) -> Outcome:
        with guard.lock:
            in_flight.add(pair)
        out = _grade_one(course, pair[0], pair[1], timeout_s, cell_timeout_s, log_dir)
        with guard.lock:
            in_flight.discard(pair)
            for suspect, problems in guard.verify(pair, in_flight).items():
                told.setdefault(suspect, []).extend(problems)
            out.problems += told.pop(pair, [])
        return out

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        outcomes = list(pool.map(grade, pairs))
    _read_scores(course, outcomes)
    return outcomes


def format_table(outcomes: list[Outcome]) -> str:
    """The summary an instructor reads: one row a submission."""
    rows = [("student", "assignment", "score", "max", "seconds", "problems")]
    for o in outcomes:
        score = f"{o.score:g}" if o.score is not None else "-"
        top = f"{o.max_score:g}" if o.max_score is not None else "-"
        rows.append((o.student, o.assignment, score, top, f"{o.seconds:.1f}", "; ".join(o.problems + o.notes) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[5] for r in rows)
