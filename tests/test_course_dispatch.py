"""`course autograde --scheduler` on a real Dask cluster (a scheduler and worker processes on 127.0.0.1, mutual TLS
with the course's own certificates), against the one-machine run; the per-submission task (`task.grade`) that both
dispatch; a run interrupted and resumed; the course's scheduler refusing whoever has no course certificate, or the
wrong one, and a worker that grades another notebook than the submission it was sent.

The class: honest, blank, wrong and attacking (its kernel kills itself) submissions of the toy course. Every score
below is a literal: the cluster, `--workers 2` and the resumed run must each give exactly these, one row each in the
gradebook, though a worker is killed halfway through the cluster's run and another one swaps every submission it gets
for the master's answers.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sqlite3
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lecturelib.course.grading import credentials, dispatch, task
from lecturelib.course.__main__ import main
from lecturelib.course.grading.autograde import autograde
from lecturelib.course.layout import Course
from lecturelib.course.grading.worker import COURSE_ENV, command
from test_course_autograde import ASSIGNMENT, RIGHT, built, course, needs_sandbox, submit  # noqa: F401 - fixtures

distributed = pytest.importorskip("distributed")

CLASS = {
    "honest": RIGHT,
    "blank": "def double(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()",
    "wrong": "def double(x):\n    return 3 * x",
    "crash": "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",  # its kernel dies: only it loses points
}
EXPECTED = {"honest": 2.0, "blank": 0.0, "wrong": 0.0, "crash": 0.0}
# A worker's preload that grades the master's answers in place of every submission it is sent (the forger of issue
# 32: it passes the task on to the real grading, with the notebook swapped).
ROGUE = """
import dataclasses
from lecturelib.course.grading import task

_grade = getattr(task, "honest_grade_data", task.grade_data)  # Dask imports a preload file twice
task.honest_grade_data = _grade


def grade_data(t, kit):
    masters = {f"{n}.ipynb": kit.source[f"{n}.ipynb"] for n in kit.notebooks()}
    return _grade(dataclasses.replace(t, files={**t.files, **masters}), kit)


task.grade_data = grade_data
"""
NOT_THE_SUBMISSION = "the worker returned a notebook that is not the submission"


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


def _start_rogue(course: Course, address: str, tmp_path: Path) -> subprocess.Popen:
    """A worker started as `course worker` starts one (the course's worker certificate), with the ROGUE preload."""
    (tmp_path / "rogue.py").write_text(ROGUE)
    cmd = command(address, 1, "rogue", ["--preload", str(tmp_path / "rogue.py")], course.root / "cluster")
    env = {**os.environ, **credentials.WORKER_ENV, COURSE_ENV: str(course.root)}
    return subprocess.Popen(cmd, cwd=course.root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


@pytest.fixture
def cluster(course: Course, tmp_path: Path) -> Iterator[tuple[Course, str, object, object]]:
    """The course's certificates; a scheduler guarded as `course scheduler` guards it, two single-thread worker
    processes started for the course (lecturelib.course.grading.worker, nannies guarded), all over mutual TLS; and a
    rogue worker with the course's worker certificate (it is one of the instructor's machines, compromised)."""
    from distributed import Client, LocalCluster

    folder = course.root / "cluster"
    credentials.create(folder, "127.0.0.1")
    security = credentials.security(folder, "scheduler", "worker", "coordinator")
    os.environ[COURSE_ENV] = str(course.root)  # the nannies' workers inherit it (as `course worker` sets it)
    rogue = None
    try:
        with LocalCluster(n_workers=0, threads_per_worker=1, processes=True, host="127.0.0.1", scheduler_port=0,
                          protocol="tls://", security=security, dashboard_address="127.0.0.1:0", memory_limit=0,
                          preload=["lecturelib.course.grading.worker"],
                          preload_nanny=["lecturelib.course.grading.credentials"],
                          scheduler_kwargs={"preload": ["lecturelib.course.grading.credentials"]},
                          silence_logs=50) as lc, Client(lc, security=security, set_as_default=False) as client:
            rogue = _start_rogue(course, lc.scheduler_address, tmp_path)  # starts while the two honest ones do
            lc.scale(2)
            client.wait_for_workers(3, timeout=180)
            yield course, lc.scheduler_address, client, lc
    finally:
        if rogue is not None:
            os.killpg(rogue.pid, signal.SIGKILL)
            rogue.wait()
        os.environ.pop(COURSE_ENV, None)


@needs_sandbox
def test_cluster_grades_like_one_machine_though_a_worker_is_killed_and_one_forges(cluster) -> None:  # noqa: ANN001
    course, address, client, local = cluster
    submit(course, CLASS)
    rogue = next(w for w, info in client.scheduler_info(n_workers=-1)["workers"].items() if info["name"] == "rogue")
    killed: list[str] = []

    def kill_a_busy_worker() -> None:  # SIGKILL the process of the first honest worker seen grading, mid-submission
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            busy = [w for w, keys in client.processing().items() if keys and w != rogue]
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
    assert scores(report) == EXPECTED  # the forger's 2/2 for the master's answers counted for no one
    assert {o.student: o.graded for o in report.outcomes} == {s: True for s in CLASS}
    assert gradebook_rows(course) == {s: (1, 1) for s in CLASS}
    assert [n for n in report.notes if n.startswith("grading on 3 Dask workers")]
    forged = [o.student for o in report.outcomes if any(f"refused the result of worker {rogue}: {NOT_THE_SUBMISSION}"
                                                        in p for p in o.problems)]
    assert forged  # the rogue got a submission (three idle workers: one each), and its result was refused, said so
    assert [n for n in report.notes if n.startswith(f"worker {rogue} returned a notebook that is not the submission")]
    crash = next(o for o in report.outcomes if o.student == "crash")
    assert any("stopped at" in n for n in crash.notes)  # its kernel died at its own cell; the others never knew
    assert (course.root / "logs" / "autograde" / f"crash--{ASSIGNMENT}.log").stat().st_size > 0

    # A coordinator of another course version finds no worker for it, and says so; nothing is graded.
    with pytest.raises(dispatch.ClusterError, match="no worker of .* grades for this course version"):
        list(dispatch.Cluster(address, "0" * 64, root=course.root).run([], {}))

    # With the forger alone left, the blank submission is not graded, says why, and keeps its earlier grade.
    local.scale(0)
    deadline = time.monotonic() + 60
    while (set(client.scheduler_info(n_workers=-1)["workers"]) != {rogue} or local.workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert set(client.scheduler_info(n_workers=-1)["workers"]) == {rogue}
    graded_before = (course.autograded / "blank" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes()
    # --force: whether the first run recorded blank as graded depends on which submission the rogue drew then (a
    # submission whose result was refused is graded again next time, the others are "unchanged")
    alone = autograde(course, [ASSIGNMENT], students=["blank"], scheduler=address, cell_timeout_s=60, force=True)
    blank = alone.outcomes[0]
    assert (blank.graded, blank.score) == (False, None)
    assert any(p.startswith(f"not graded: {NOT_THE_SUBMISSION}, and no other worker") for p in blank.problems)
    assert (course.autograded / "blank" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes() == graded_before
    assert gradebook_rows(course)["blank"] == (1, 1)


def test_answer_check_refuses_another_notebook_and_accepts_the_submission(course: Course) -> None:
    """`task.not_the_submission` on results made by hand: the submission itself passes; the master's answers, another
    notebook list, or an answer cell changed do not."""
    submit(course, {"blank": CLASS["blank"]})
    t = task.make_task(course, "blank", ASSIGNMENT, task.Settings())
    kit = task.make_kit(course.root, ASSIGNMENT, task.course_version(course.root))
    config = task.load_config(course.root)
    name = f"{ASSIGNMENT}.ipynb"

    def result(files: dict[str, bytes], notebooks: list[str]) -> task.Result:
        return task.Result("blank", ASSIGNMENT, graded=True, files=files, notebooks=notebooks)

    assert task.not_the_submission(t, result({name: t.files[name]}, [ASSIGNMENT]), config, kit.notebooks()) == ""
    master = task.not_the_submission(t, result({name: kit.source[name]}, [ASSIGNMENT]), config, kit.notebooks())
    assert master.startswith("the answer cells ex1_1 of its 01_toy.ipynb are not the submission's")
    assert "returned notebooks []" in task.not_the_submission(t, result({}, []), config, kit.notebooks())
    edited = t.files[name].replace(b"raise NotImplementedError()", b"return 2 * x")
    assert "ex1_1" in task.not_the_submission(t, result({name: edited}, [ASSIGNMENT]), config, kit.notebooks())
    # what travels back is plain data, checked field by field; a result for someone else is refused
    data = result({name: t.files[name]}, [ASSIGNMENT]).to_data()
    assert task.Result.from_data(data, t).files == {name: t.files[name]}
    with pytest.raises(ValueError, match="the result of honest/01_toy for blank/01_toy"):
        task.Result.from_data(data.replace(b'"student": "blank"', b'"student": "honest"'), t)
    with pytest.raises(ValueError, match="not a result's JSON"):
        task.Result.from_data(task.Result("blank", ASSIGNMENT), t)  # type: ignore[arg-type]


def _tls_without_certificate(address: str, ca: Path) -> bytes | Exception:
    host, port = address.removeprefix("tls://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    try:
        with socket.create_connection((host, int(port)), timeout=10) as raw, context.wrap_socket(raw) as tls:
            tls.sendall(b"\0" * 8)
            return tls.recv(16)  # TLS 1.3: the server's refusal arrives after the handshake
    except (ssl.SSLError, OSError) as e:
        return e


def test_course_scheduler_accepts_only_the_course_certificates_by_role(course: Course, tmp_path: Path) -> None:
    """`course scheduler` makes the course's authority in cluster/ (private), and then refuses a TLS connection
    without a client certificate, a Dask client of another authority, a worker of another authority that declares
    the course's resource, and a worker certificate asking what only the coordinator may."""
    from distributed import Client, Worker
    from distributed.core import rpc

    scheduler = subprocess.Popen([sys.executable, "-m", "lecturelib.course", "scheduler", "--host", "127.0.0.1",
                                  "--port", "0"], cwd=course.root, stdout=subprocess.PIPE, text=True,
                                 stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        made = scheduler.stdout.readline()  # type: ignore[union-attr]
        listening = scheduler.stdout.readline()  # type: ignore[union-attr]
        assert made.startswith("made ca, scheduler, worker, coordinator certificates in ")
        address = listening.split(" listens on ")[1].split()[0]
        folder = course.root / "cluster"
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        assert {p.name: oct(p.stat().st_mode & 0o777) for p in folder.glob("*.key")} == {
            f"{r}.key": "0o600" for r in ("ca", "scheduler", "worker", "coordinator")}

        refused = _tls_without_certificate(address, folder / "ca.pem")
        assert refused == b"" or isinstance(refused, (ssl.SSLError, ConnectionResetError)), refused
        other = tmp_path / "other"
        credentials.create(other, "127.0.0.1")
        with pytest.raises(OSError):
            Client(address, security=credentials.security(other, "coordinator"), timeout=2, set_as_default=False)

        async def attempts() -> tuple[str, str]:
            forged = Worker(address, security=credentials.security(other, "worker"), nthreads=1, death_timeout=2,
                            resources={task.worker_resource(task.course_version(course.root)): 1})
            try:
                await forged
                joined = "joined"
            except Exception as e:  # noqa: BLE001 - the refusal is what is tested
                joined = type(e).__name__
            finally:
                await forged.close()
            own = credentials.security(folder, "worker")
            async with rpc(address, connection_args=own.get_connection_args("worker")) as r:
                try:
                    await r.run_function(function=b"", args=b"", kwargs=b"")
                    asked = "ran"
                except PermissionError as e:
                    asked = str(e)
            return joined, asked

        joined, asked = asyncio.run(attempts())
        assert joined != "joined"
        assert asked == "the course's scheduler refuses 'run_function' from a worker certificate"
        with Client(address, security=credentials.security(folder, "coordinator"), timeout=10,
                    set_as_default=False) as client:
            credentials.check_scheduler(client, address)  # the real scheduler, found by its certificate's role
            assert client.scheduler_info()["workers"] == {}  # the forged worker never registered
    finally:
        os.killpg(scheduler.pid, signal.SIGKILL)
        scheduler.wait()


def test_worker_and_autograde_refuse_an_unauthenticated_scheduler(course: Course, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    submit(course, {"honest": RIGHT})
    monkeypatch.chdir(course.root)
    for argv in (["worker", "tcp://127.0.0.1:8786"], ["autograde", ASSIGNMENT, "--scheduler", "tcp://127.0.0.1:8786"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == ("tcp://127.0.0.1:8786 is not the course's scheduler: start it with `python -m lecturelib.course "
                       "scheduler` (mutual TLS) and give its tls://HOST:PORT address\n")
    assert main(["worker", "tls://127.0.0.1:8786"]) == 2  # no certificates here yet
    err = capsys.readouterr().err
    assert err.startswith("no ca.pem, worker.pem, worker.key in ") and err.count("\n") == 1
    assert not (course.autograded / "honest").exists()


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


def test_worker_command_runs_dask_worker_with_the_course_certificate_and_the_preloads() -> None:
    cmd = command("tls://10.0.0.1:8786", 4, "lab-3", [], Path("/c/cluster"))
    assert cmd[1:] == ["-m", "distributed.cli.dask_worker", "tls://10.0.0.1:8786", "--nworkers", "1", "--nthreads", "4",
                       "--memory-limit", "0", "--protocol", "tls", "--tls-ca-file", "/c/cluster/ca.pem",
                       "--tls-cert", "/c/cluster/worker.pem", "--tls-key", "/c/cluster/worker.key", "--no-dashboard",
                       "--dashboard-address", "127.0.0.1:0", "--preload", "lecturelib.course.grading.worker",
                       "--preload-nanny", "lecturelib.course.grading.credentials", "--name", "lab-3"]
    assert Path(cmd[0]).name.startswith("python")
