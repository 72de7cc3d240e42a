"""`course autograde --scheduler` on a real Dask cluster (a scheduler and two worker processes on 127.0.0.1), against
the one-machine run; the per-submission task (`task.grade`) that both dispatch; a run interrupted and resumed.

The class: honest, blank, wrong and attacking (its kernel kills itself) submissions of the toy course. Every score
below is a literal: the cluster, `--workers 2` and the resumed run must each give exactly these, one row each in the
gradebook, though a worker is killed halfway through the cluster's run.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lecturelib.course import dispatch, task
from lecturelib.course.autograde import autograde
from lecturelib.course.layout import Course
from lecturelib.course.worker import COURSE_ENV
from test_course_autograde import ASSIGNMENT, RIGHT, built, course, needs_sandbox, submit  # noqa: F401 - fixtures

distributed = pytest.importorskip("distributed")

CLASS = {
    "honest": RIGHT,
    "blank": "def double(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()",
    "wrong": "def double(x):\n    return 3 * x",
    "crash": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",  # its kernel dies: only it loses points
}
EXPECTED = {"honest": 2.0, "blank": 0.0, "wrong": 0.0, "crash": 0.0}


def scores(report) -> dict[str, float | None]:  # noqa: ANN001
    return {o.student: o.score for o in report.outcomes}


def gradebook_rows(course: Course) -> dict[str, tuple[int, int]]:
    """Each student's (submissions, grade rows) in the gradebook: exactly one submission, one row a graded cell."""
    with sqlite3.connect(course.gradebook) as db:
        subs = dict(db.execute("select student_id, count(*) from submitted_assignment group by student_id").fetchall())
        grades = dict(db.execute("select sa.student_id, count(*) from grade g join submitted_notebook sn on "
                                 "g.notebook_id = sn.id join submitted_assignment sa on sn.assignment_id = sa.id "
                                 "group by sa.student_id").fetchall())
    return {s: (subs.get(s, 0), grades.get(s, 0)) for s in subs}


@pytest.fixture
def cluster(course: Course) -> Iterator[tuple[Course, str, object]]:
    """A scheduler and two single-thread worker processes started for the course (lecturelib.course.worker)."""
    from distributed import Client, LocalCluster

    os.environ[COURSE_ENV] = str(course.root)  # the nannies' workers inherit it (as `course worker` sets it)
    try:
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", scheduler_port=0,
                          dashboard_address=":0", memory_limit=0, preload=["lecturelib.course.worker"],
                          silence_logs=50) as lc, Client(lc, set_as_default=False) as client:
            yield course, lc.scheduler_address, client
    finally:
        os.environ.pop(COURSE_ENV, None)


@needs_sandbox
def test_cluster_grades_like_one_machine_though_a_worker_is_killed(cluster) -> None:  # noqa: ANN001
    course, address, client = cluster
    submit(course, CLASS)
    killed: list[str] = []

    def kill_a_busy_worker() -> None:  # SIGKILL the process of the first worker seen grading, mid-submission
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            busy = [w for w, keys in client.processing().items() if keys]
            if busy:
                time.sleep(1.0)  # its grading process and sandboxed kernel are running by now
                pids = client.run(os.getpid, workers=busy[:1])
                killed.extend(pids)
                os.kill(pids[busy[0]], signal.SIGKILL)
            time.sleep(0.1)

    killer = threading.Thread(target=kill_a_busy_worker)
    killer.start()
    report = autograde(course, [ASSIGNMENT], scheduler=address, cell_timeout_s=60)
    killer.join()
    assert len(killed) == 1
    assert scores(report) == EXPECTED
    assert {o.student: o.graded for o in report.outcomes} == {s: True for s in CLASS}
    assert gradebook_rows(course) == {s: (1, 1) for s in CLASS}
    assert [n for n in report.notes if n.startswith("grading on 2 Dask workers")]
    crash = next(o for o in report.outcomes if o.student == "crash")
    assert any("stopped at" in n for n in crash.notes)  # its kernel died at its own cell; the others never knew
    assert (course.root / "logs" / "autograde" / f"crash--{ASSIGNMENT}.log").stat().st_size > 0

    # A coordinator of another course version finds no worker for it, and says so; nothing is graded.
    with pytest.raises(dispatch.ClusterError, match="no worker of .* grades for this course version"):
        list(dispatch.Cluster(address, "0" * 64).run([], {}))


def test_worker_refuses_another_course_version_and_a_missing_sandbox(course: Course,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    submit(course, {"honest": RIGHT})
    task.use_course(course.root)
    version = task.course_version(course.root)
    honest = task.make_task(course, "honest", ASSIGNMENT, task.Settings())
    other = task.grade(honest, task.make_kit(course.root, ASSIGNMENT, "f" * 64))
    assert (other.graded, other.files) == (False, {})
    assert "runs another version of the course" in other.refused and "bring its checkout" in other.refused
    monkeypatch.setattr(task._HOST, "sandbox_unavailable", lambda: "bwrap is not installed")
    boxless = task.grade(honest, task.make_kit(course.root, ASSIGNMENT, version))
    assert "cannot sandbox the kernels (bwrap is not installed)" in boxless.refused and "--no-sandbox" in boxless.refused


@needs_sandbox
def test_interrupted_run_resumes_with_what_is_not_graded(course: Course, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C after the first saved submission; the next run grades only the others, with `--workers 2`."""
    expected = {s: EXPECTED[s] for s in ("honest", "blank", "crash")}
    submit(course, {s: CLASS[s] for s in expected})
    done = dispatch.Progress.done

    def interrupt(self, failed: bool) -> None:  # noqa: ANN001
        done(self, failed)
        raise KeyboardInterrupt

    monkeypatch.setattr(dispatch.Progress, "done", interrupt)
    with pytest.raises(KeyboardInterrupt):
        autograde(course, [ASSIGNMENT], workers=2, cell_timeout_s=60)
    monkeypatch.setattr(dispatch.Progress, "done", done)
    graded: list[str] = []
    grade = task.grade
    monkeypatch.setattr(task, "grade", lambda t, kit: graded.append(t.student) or grade(t, kit))
    report = autograde(course, [ASSIGNMENT], workers=2, cell_timeout_s=60)
    assert scores(report) == expected
    resumed = [o.student for o in report.outcomes if "graded by the autograde run that was interrupted" in o.notes]
    assert len(resumed) == 1 and sorted(graded + resumed) == sorted(expected)
    assert gradebook_rows(course) == {s: (1, 1) for s in expected}
    again = autograde(course, [ASSIGNMENT], workers=2, students=resumed, cell_timeout_s=60, force=True)  # --force: regrades
    assert scores(again) == {resumed[0]: EXPECTED[resumed[0]]} and graded.count(resumed[0]) == 1


def test_worker_command_runs_dask_worker_with_the_preload() -> None:
    from lecturelib.course.worker import command

    cmd = command("tcp://10.0.0.1:8786", 4, "lab-3", [])
    assert cmd[1:] == ["-m", "distributed.cli.dask_worker", "tcp://10.0.0.1:8786", "--nworkers", "1", "--nthreads", "4",
                       "--memory-limit", "0", "--preload", "lecturelib.course.worker", "--name", "lab-3"]
    assert Path(cmd[0]).name.startswith("python")
