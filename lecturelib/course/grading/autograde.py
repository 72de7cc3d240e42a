"""Autograde every collected submission with nbgrader, one worker process per submission, each kernel sandboxed."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sqlite3
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nbformat
from nbconvert.exporters import NotebookExporter
from nbgrader.api import Gradebook
from nbgrader.converters.base import NbGraderException

import lecturelib
from lecturelib.course.isolation import sandbox
from lecturelib.course.term import screen, valid_student
from lecturelib.course.grading.guard import Guard, RunCheck, digest, gradebook_cells, release_points
from lecturelib.course.layout import Course, new_gradebook, repair_gradebook, scripts_on_path
from lecturelib.course.grading.execute import SANDBOX_ENV
from lecturelib.course.grading.dispatch import Cluster, ClusterError, Local, Progress
from lecturelib.course.grading.run import Run
from lecturelib.course.grading.task import Kit, Result, Settings, Task, course_version, make_kit, make_task
from lecturelib.course.grading.task import save as task_save

SUBMISSION_TIMEOUT_S = 1800  # a whole submission; each cell also has nbgrader's Execute.timeout
UNCHANGED = "unchanged: not graded again"  # the note of a submission skipped as unchanged (`--force` grades it)
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
    unchanged: bool = False  # graded before from the same files, release, masters and settings: not graded again


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


def _tell(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _outcome(result: Result, log_dir: Path) -> Outcome:
    """The Outcome of a worker's Result; its log in logs/autograde/STUDENT--ASSIGNMENT.log."""
    (log_dir / f"{result.student}--{result.assignment}.log").write_text(result.log)
    return Outcome(result.student, result.assignment, graded=result.graded, problems=list(result.problems),
                   notes=list(result.notes), seconds=result.seconds)


def _save(course: Course, result: Result) -> list[str] | str:
    """Save one result (task.save): its notes, or why it could not be saved (then nothing of it stays in autograded/,
    and the run goes on with the other submissions)."""
    try:
        return task_save(course, result)
    except Exception as e:  # noqa: BLE001 - one submission's failure is its problem, never the run's
        shutil.rmtree(course.autograded / result.student / result.assignment, ignore_errors=True)
        reason = str(e).splitlines()[0][:200] if str(e) else ""
        return f"not saved: {type(e).__name__}: {reason}; grade it again"


def _ensure_gradebook(course: Course, assignments: list[str], students: list[str]) -> list[str]:
    """Every assignment and every student must be in the gradebook before the workers start (two nbgrader processes
    that both create a new student collide: UNIQUE constraint failed: student.id), and its copies of the test cells
    right; WAL lets workers read while one writes. Returns what had to be repaired."""
    notes = repair_gradebook(course)
    new_gradebook(course.gradebook)
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        known = {a.name for a in gb.assignments if a.notebooks}  # `nbgrader db assignment add` (a due date) adds none
        for student in students:  # names and emails from a roster import stay as they are
            gb.update_or_create_student(student)
    missing = [a for a in assignments if a not in known]
    # its notebooks and cells into the gradebook; the release it writes is thrown away (the committed one is build's);
    # when no assignment of source/ is in it yet, all in one nbgrader process (its start is most of the time; an
    # assignment already there is never regenerated), one by one if that fails
    with tempfile.TemporaryDirectory(prefix="lecturelib-release-") as scratch:
        scratch_release = f"--CourseDirectory.release_directory={scratch}"
        everything = len(missing) > 1 and set(missing) == set(course.assignments()) and not known
        if everything and course.nbgrader("generate_assignment", "*", "--force", scratch_release).returncode == 0:
            missing = []
        for a in missing:
            course.nbgrader("generate_assignment", a, "--force", scratch_release)
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


def _with_grades(course: Course) -> set[tuple[str, str]]:
    """(student, assignment) of every submission the gradebook holds grades of."""
    with sqlite3.connect(course.gradebook, timeout=120) as db:
        return set(db.execute("select sa.student_id, a.name from submitted_assignment sa"
                              " join assignment a on sa.assignment_id = a.id"))


def _due_dates(course: Course) -> dict[str, str]:
    """Each assignment's due date in the gradebook (late penalties are assigned when a submission is graded)."""
    with sqlite3.connect(course.gradebook, timeout=120) as db:
        return {name: str(due) for name, due in db.execute("select name, duedate from assignment")}


def _files_digest(label: str, files: dict[str, bytes]) -> str:
    return hashlib.sha256("".join(f"{label}/{rel}\0{hashlib.sha256(data).hexdigest()}\0"
                                  for rel, data in sorted(files.items())).encode()).hexdigest()


def release_key(kit: Kit) -> str:
    """sha256 of what every grading of an assignment depends on: nbgrader_config.py, the assignment's release and
    masters (hidden tests and data files), and lecturelib (the notebooks import it; the preprocessors are its)."""
    package = Path(lecturelib.__file__).parent
    code = {rel: h.encode() for rel, h in digest(package).items() if "__pycache__" not in rel}
    return _files_digest("", {"config": kit.config, "release": _files_digest("release", kit.release).encode(),
                              "source": _files_digest("source", kit.source).encode(),
                              "lecturelib": _files_digest("lecturelib", code).encode()})


def grading_key(release: str, submission: Task, due: str) -> str:
    """sha256 of everything a submission's grade depends on: its assignment's `release_key`, its files
    (timestamp.txt included), the run's settings but its threads, and the assignment's due date (late penalties)."""
    settings = dataclasses.replace(submission.settings, threads=None)
    return _files_digest("", {"release": release.encode(), "settings": repr(settings).encode(), "due": due.encode(),
                              "submitted": _files_digest("submitted", submission.files).encode()})


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
              limits: sandbox.Limits | None = None, scheduler: str = "", credentials: str | Path | None = None,
              progress_bar: bool = False, force: bool = False) -> Report:
    """Autograde every submission of `assignments` (of `students`) with `workers` in parallel, or on the Dask
    cluster of the course's `scheduler` (tls://HOST:8786, with the certificates in `credentials`, default cluster/),
    each kernel in a sandbox (`sandboxed=False` only when the instructor accepts NO_SANDBOX_RISK), then verify the
    whole run. Submissions a run that was interrupted had graded are not graded again (`Run.finished`), nor, unless
    `force`, those unchanged since their last grading (`grading_key`). Ctrl-C raises run.Stopped."""
    scripts_on_path()
    pairs = submissions(course, assignments, students)
    if not pairs:
        return Report([])
    cluster = (Cluster(scheduler, course_version(course.root), tell=_tell if progress_bar else None, root=course.root,
                       credentials_dir=Path(credentials) if credentials else None) if scheduler else None)
    if not scheduler:  # on a cluster each worker checks its own sandbox (and refuses without one)
        check_sandbox(sandboxed)
    screened = screen(course, pairs)  # before anything reads submitted/: links, devices, stray files moved out
    # CPU time per process: what all cores could use in the submission's time, a backstop only
    limits = (limits or sandbox.Limits())._replace(cpu_s=int(timeout_s) * (os.cpu_count() or 1))
    with Run(course, sandboxed=sandboxed, limits=limits, workers=workers) as run:
        # a folder name that is no student id is not graded, and never becomes a student (a name in Formgrader's pages)
        notes = run.notes + _ensure_gradebook(course, sorted({a for _, a in pairs}),
                                              sorted({s for s, _ in pairs if valid_student(s)}))
        if not sandboxed:
            notes.append(f"graded with --no-sandbox: {NO_SANDBOX_RISK}")
        log_dir = course.root / "logs" / "autograde"
        guard, check, in_flight = Guard(course), RunCheck(course, run.state / "submitted"), set()
        told: dict[tuple[str, str], list[str]] = {}  # what the guard found while a submission was running
        version = course_version(course.root)
        run.resume(version)
        kits = {a: make_kit(course.root, a, version) for a in sorted({a for _, a in pairs})}
        settings = Settings(sandboxed=sandboxed, limits=limits, timeout_s=timeout_s, cell_timeout_s=cell_timeout_s,
                            threads=None if scheduler else run.threads)
        outcomes: dict[tuple[str, str], Outcome] = {}
        tasks = []
        with_grades, due = _with_grades(course), _due_dates(course)
        releases = {a: release_key(kit) for a, kit in kits.items()}
        for pair in pairs:
            found = screened[pair]
            # what screening refused (a link, a pipe) is reported, and the notebook graded all the same; a notebook
            # that cannot be read is not graded
            invalid = _invalid_notebooks(course.submitted / pair[0] / pair[1], course.root) if found.gradable else []
            out = Outcome(*pair, problems=found.problems + invalid, notes=list(found.notes))
            if pair in run.finished and (course.autograded / pair[0] / pair[1]).is_dir():
                out.graded = True  # graded and verified by the run that was interrupted: not graded twice
                out.notes.append("graded by the autograde run that was interrupted")
            elif found.gradable and not invalid:
                submission = make_task(course, *pair, settings)
                key = grading_key(releases[pair[1]], submission, due.get(pair[1], ""))
                if force or pair not in with_grades or not run.ledger.unchanged(pair, key):
                    tasks.append(submission)
                    in_flight.add(pair)
                    run.mark(pair, done=False, grading_key=key)
                    continue
                out.graded = out.unchanged = True
                out.notes.append(UNCHANGED)
            outcomes[pair] = out
        engine: Local | Cluster = cluster if cluster is not None else Local(course.root, workers)
        progress = Progress(len(tasks), enabled=progress_bar)
        results = engine.run(tasks, kits)
        try:
            for result in results:
                pair = (result.student, result.assignment)
                if pair in outcomes:  # already saved: a result never counts twice
                    continue
                with guard.lock:
                    in_flight.discard(pair)
                    saved: list[str] | str = []
                    if not result.refused:
                        saved = _save(course, result)
                        check.graded(pair, result.graded and not isinstance(saved, str))
                    out = _outcome(result, log_dir)
                    out.problems[:0], out.notes[:0] = screened[pair].problems, screened[pair].notes
                    if isinstance(saved, str):
                        out.graded = False
                        out.problems.append(saved)
                    else:
                        out.notes += saved
                    for suspect, problems in guard.verify(pair, in_flight).items():
                        told.setdefault(suspect, []).extend(problems)
                    out.problems += told.pop(pair, [])
                    if not result.refused and not isinstance(saved, str):
                        run.mark(pair, done=True)
                outcomes[pair] = out
                progress.done(failed=not out.graded)
        finally:
            results.close()  # interrupted: the engine stops what still runs (no kernel outlives the run)
            progress.close()
        notes += engine.notes
        by_pair, others = check.finish()
        ordered = [outcomes[pair] for pair in pairs]
        for o in ordered:
            o.problems += by_pair.get((o.student, o.assignment), [])
        _read_scores(course, ordered)
        for o in ordered:
            if o.problems:  # graded again next time, changed or not
                run.ledger.forget((o.student, o.assignment))
    return Report(ordered, notes + others)


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
        seconds = "-" if o.unchanged else f"{o.seconds:.1f}"
        rows.append((printable(o.student), printable(o.assignment), score_text(o), seconds,
                     printable("; ".join(o.problems + o.notes)) or "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4] for r in rows]
    graded = [o for o in outcomes if o.graded]
    waiting = [o for o in graded if o.manual_max and o.manual_score is None]
    unchanged = sum(o.unchanged for o in outcomes)
    lines.append(f"{len(graded)} of {len(outcomes)} submissions autograded"
                 + (f" ({unchanged} unchanged since their last grading: --force grades them again)" if unchanged else "")
                 + (f"; {len(waiting)} wait for manual grading of their written answers "
                    f"(jupyter lab at the course root: Nbgrader > Formgrader > Manual Grading)" if waiting else ""))
    return "\n".join(lines)
