"""`course autograde` on a one-exercise toy course: the run's checks, a killed run, the gradebook, the commands.

The round trip (test_course_roundtrip.py) grades the real notebooks in the sandbox; these tests cover what it
cannot: grading with --no-sandbox (the guard), a run killed halfway, a gradebook damaged before the run, every
course command run without the venv on PATH, and a term in the exchange flow (times the students wrote, a save that
fails, totals and feedback before manual grading).
"""

from __future__ import annotations

import csv
import datetime
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode
from nbgrader.utils import compute_checksum

from lecturelib.course.grading import autograde as autograde_module
from lecturelib.course.isolation import sandbox
from lecturelib.course.grading import task
from lecturelib.course.__main__ import main
from lecturelib.course.grading.autograde import autograde, format_table
from lecturelib.course.release.build import build
from lecturelib.course.term.collect import read_time, time_text
from lecturelib.course.grading.guard import RunCheck, gradebook_cells
from lecturelib.course.grading.run import Run
from lecturelib.course.layout import Course, alembic_head, nbgrader_meta, read_notebook, write_notebook
from test_course_build import cell, toy, toy_course
from test_course_collect import other_assignment, readme_commands

ASSIGNMENT = "01_toy"
RIGHT = "def double(x):\n    return 2 * x"
NO_SANDBOX = sandbox.unavailable()
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None and not os.environ.get("CI"),
                                   reason=f"no sandbox on this machine: {NO_SANDBOX}")

# Without a sandbox, a kernel finds the course through its parents' working folders and changes it.
TAMPER = '''
import os, pathlib, sqlite3
pid, root = os.getpid(), None
while pid > 1 and root is None:
    cwd = pathlib.Path(os.readlink(f"/proc/{pid}/cwd"))
    root = next((d for d in (cwd, *cwd.parents) if (d / "gradebook.db").exists()), None)
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()[1])
with open(root / "nbgrader_config.py", "a") as config:
    config.write("\\n# changed by a submission\\n")
db = sqlite3.connect(root / "gradebook.db", timeout=60)
db.execute("update grade set auto_score = 0, extra_credit = 5 where notebook_id in (select n.id from submitted_notebook n"
           " join submitted_assignment a on n.assignment_id = a.id where a.student_id = 'honest')")
db.commit()
'''

# Without a sandbox, a kernel edits the course's config, then kills `autograde` itself (its ancestor).
EDIT_AND_KILL = TAMPER.split("db = sqlite3")[0] + '''
import signal
pid = os.getpid()
while pid > 1:
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()[1])
    if b"lecturelib.course\\0autograde" in open(f"/proc/{pid}/cmdline", "rb").read():
        os.kill(pid, signal.SIGKILL)
'''


def submission(release: NotebookNode, answer: str) -> NotebookNode:
    nb = nbformat.from_dict(nbformat.reads(nbformat.writes(release), as_version=4))
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == "ex1_1":
            cell.source = answer
    return nb


def submit(course: Course, students: dict[str, str]) -> None:
    release = read_notebook(course.release / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    for student, answer in students.items():
        folder = course.submitted / student / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{ASSIGNMENT}.ipynb").write_text(nbformat.writes(submission(release, answer)))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A built toy course with no submission yet (copy it: tests change it)."""
    course = toy_course(tmp_path_factory.mktemp("toy"), toy())
    assert build(course) == []
    return course.root


@pytest.fixture
def course(built: Path, tmp_path: Path) -> Course:
    shutil.copytree(built, tmp_path / "course")
    return Course(tmp_path / "course")


def scores(report) -> dict[str, float | None]:  # noqa: ANN001
    return {o.student: o.score for o in report.outcomes}


def test_autograde_without_sandbox_undoes_and_reports_tampering(course: Course, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guard, with --no-sandbox: course files and other students' grades are put back, the run says so."""
    monkeypatch.chdir(course.root)  # as `course autograde` runs: the kernel finds the course through its ancestors
    config = (course.root / "nbgrader_config.py").read_bytes()
    submit(course, {"honest": RIGHT, "tamper": RIGHT + "\n" + TAMPER})
    report = autograde(course, [ASSIGNMENT], sandboxed=False, cell_timeout_s=60)
    assert scores(report) == {"honest": 2.0, "tamper": 2.0}  # its answer is right; its tampering undone
    assert (course.root / "nbgrader_config.py").read_bytes() == config
    problems = {o.student: " ".join(o.problems) for o in report.outcomes}
    assert "(restored): nbgrader_config.py" in problems["tamper"]
    assert "grades restored): the gradebook" in problems["tamper"]
    assert any(n.startswith("graded with --no-sandbox: without a sandbox") for n in report.notes)


def test_run_check_restores_submissions_and_scores_changed_after_grading(course: Course) -> None:
    """The whole-run check, on changes made behind the graders' back (by a process that outlived its kernel)."""
    submit(course, {"honest": RIGHT, "other": RIGHT})
    autograde(course, [ASSIGNMENT], sandboxed=False, cell_timeout_s=60)
    kept = course.root / "kept"
    shutil.copytree(course.submitted, kept)
    check = RunCheck(course, kept)
    check.graded(("honest", ASSIGNMENT), ok=True)
    (course.submitted / "other" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text("{}")  # blanked
    (course.autograded / "other" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").write_text("{}")
    with sqlite3.connect(course.gradebook) as db:
        db.execute("update grade set auto_score = 0")  # both students zeroed
    by_pair, others = check.finish()
    assert by_pair == {("honest", ASSIGNMENT): ["the gradebook's score of ex1_1_test was 0.0, not 2.0 (set to 2.0)"]}
    assert sorted(others) == [
        f"other/{ASSIGNMENT}: autograded/other/{ASSIGNMENT}/{ASSIGNMENT}.ipynb changed during the run: grade it again",
        f"other/{ASSIGNMENT}: submitted file {ASSIGNMENT}.ipynb was changed during the run (restored)",
        f"other/{ASSIGNMENT}: the gradebook's score of ex1_1_test was 0.0, not 2.0 (set to 2.0)",
    ]
    assert (course.submitted / "other" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes() == \
        (kept / "other" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb").read_bytes()


def test_killed_run_is_found_and_repaired_at_the_next_start(course: Course) -> None:
    """A submission (no sandbox) edits nbgrader_config.py and kills autograde: the next run restores the file."""
    config = (course.root / "nbgrader_config.py").read_bytes()
    submit(course, {"edit-and-kill": RIGHT + "\n" + EDIT_AND_KILL})
    killed = subprocess.Popen([sys.executable, "-m", "lecturelib.course", "autograde", "--no-sandbox"],
                              cwd=course.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert killed.wait(timeout=600) == -9 and (course.root / "nbgrader_config.py").read_bytes() != config
    submit(course, {"honest": RIGHT})
    report = autograde(course, [ASSIGNMENT], sandboxed=False, students=["honest"], cell_timeout_s=60)
    (note,) = [n for n in report.notes if "was killed before it ended" in n]
    assert "restored 1 file it had kept (nbgrader_config.py)" in note
    assert f"it had not finished grading edit-and-kill/{ASSIGNMENT}: grade them again" in note
    assert (course.root / "nbgrader_config.py").read_bytes() == config
    (aside,) = (course.root / "logs" / "autograde").glob("interrupted-*/nbgrader_config.py")
    assert b"changed by a submission" in aside.read_bytes()
    assert scores(report) == {"honest": 2.0}
    time.sleep(2)  # the killed run's nbgrader died with it (PR_SET_PDEATHSIG), and its kernel with nbgrader
    private = f"lecturelib-autograde-{killed.pid}-".encode()
    assert not [p for p in os.listdir("/proc") if p.isdigit() and (private in _cmdline(p) or _cwd(p) == course.root)]


def test_killed_sandboxed_run_keeps_what_the_instructor_changed_since(course: Course) -> None:
    """A sandboxed kernel can reach neither the course's files nor submitted/: after a killed sandboxed run, a master
    edited and a submission collected again since are the instructor's work, and the next run leaves them."""
    submit(course, {"honest": RIGHT})
    Run(course, sandboxed=True, limits=sandbox.Limits())._save_state()  # what a killed run leaves behind
    master = course.source_notebooks(ASSIGNMENT)[0]
    edited = master.read_bytes().replace(b"Toy", b"Toy, edited")
    master.write_bytes(edited)
    resubmitted = course.submitted / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    collected_again = resubmitted.read_text() + "\n"
    resubmitted.write_text(collected_again)
    with Run(course, sandboxed=False, limits=sandbox.Limits()) as run:
        (note,) = [n for n in run.notes if "was killed before it ended" in n]
    assert "restored" not in note
    assert master.read_bytes() == edited and resubmitted.read_text() == collected_again
    assert not list((course.root / "logs" / "autograde").glob("interrupted-*"))


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _cwd(pid: str) -> Path | None:
    try:
        return Path(os.readlink(f"/proc/{pid}/cwd"))
    except OSError:
        return None


@needs_sandbox
def test_gradebook_copies_of_test_cells_are_never_trusted(course: Course) -> None:
    """Test cells rewritten in the gradebook (valid checksums, 100 points): grading reads source/; rows repaired."""
    with sqlite3.connect(course.gradebook) as db:
        rows = db.execute("select s.id, s.name, g.id from source_cell s join base_cell b on b.name = s.name"
                          " join grade_cells g on g.id = b.id").fetchall()
        for sid, name, gid in rows:
            cell = nbformat.from_dict({"cell_type": "code", "source": "pass", "metadata": {"nbgrader": {
                "grade": True, "solution": False, "locked": True, "points": 100, "grade_id": name}}})
            db.execute("update source_cell set source = 'pass', checksum = ? where id = ?", (compute_checksum(cell), sid))
            db.execute("update grade_cells set max_score = 100 where id = ?", (gid,))
    submit(course, {"honest": RIGHT, "blank": "def double(x):\n    raise NotImplementedError()"})
    report = autograde(course, [ASSIGNMENT], cell_timeout_s=60)
    assert scores(report) == {"blank": 0.0, "honest": 2.0}
    assert "gradebook.db's copy of test cell ex1_1_test differed from source/ (repaired)" in report.notes
    assert gradebook_cells(course, ASSIGNMENT, repair=False) == []


def test_broken_gradebook_is_repaired_and_reported(course: Course, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A gradebook.db left without alembic_version (nbgrader could not run `alembic`) is stamped, and said so."""
    with sqlite3.connect(course.gradebook) as db:
        db.execute("drop table alembic_version")
    monkeypatch.chdir(course.root)
    assert main(["feedback"]) == 0
    out = capsys.readouterr().out
    assert "repaired gradebook.db: it had no alembic_version" in out
    assert "no autograded submissions: no feedback to write" in out
    with sqlite3.connect(course.gradebook) as db:
        assert db.execute("select version_num from alembic_version").fetchall() == [(alembic_head(),)]


@needs_sandbox
def test_course_commands_work_without_the_venv_on_path(course: Course) -> None:
    """No activated venv: PATH without it, the gradebook created afresh by autograde (nbgrader runs `alembic`)."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
    assert shutil.which("alembic", path=env["PATH"]) is None
    course.gradebook.unlink()
    submit(course, {"honest": RIGHT})
    run = lambda *args: subprocess.run([sys.executable, "-m", "lecturelib.course", *args], cwd=course.root,  # noqa: E731
                                       env=env, capture_output=True, text=True, timeout=600)
    graded = run("autograde", "--cell-timeout", "60")
    assert graded.returncode == 0, graded.stderr + graded.stdout
    assert "honest   01_toy      2/2 autograded" in graded.stdout
    with sqlite3.connect(course.gradebook) as db:
        assert db.execute("select version_num from alembic_version").fetchall() == [(alembic_head(),)]
    fed = run("feedback")
    assert fed.returncode == 0 and "wrote 1 feedback page in feedback/" in fed.stdout, fed.stderr
    (page,) = course.feedback.glob(f"honest/{ASSIGNMENT}/*.html")  # formulas offline: the local MathJax, copied
    assert "../../mathjax/MathJax.js" in page.read_text() and (course.feedback / "mathjax" / "MathJax.js").is_file()
    checked = run("check")
    assert checked.returncode == 0 and "the course is sound" in checked.stdout, checked.stdout + checked.stderr
    built = run("build")
    assert built.returncode == 0 and "built notebooks/" in built.stdout, built.stderr
    for done in (graded, fed, checked, built):  # IPC sockets, not TCP: no warning in the instructor's terminal
        assert "without encryption" not in done.stdout + done.stderr
    assert "without encryption" not in "".join(p.read_text() for p in (course.root / "logs").rglob("*.log"))


def test_autograde_cli_refuses_without_a_sandbox_and_says_what_to_do(course: Course, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    submit(course, {"honest": RIGHT})
    monkeypatch.chdir(course.root)
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert main(["autograde"]) == 2
    err = capsys.readouterr().err
    assert "bubblewrap (bwrap) is not installed" in err and "--no-sandbox" in err
    assert not course.autograded.exists()


def test_plain_nbgrader_autograde_refuses_to_grade(course: Course) -> None:
    """Formgrader's Autograde button and `nbgrader autograde` run no sandbox: the course's config refuses them."""
    submit(course, {"honest": RIGHT})
    done = course.nbgrader("autograde", ASSIGNMENT)
    assert done.returncode != 0
    assert "grade with `python -m lecturelib.course autograde`" in done.stdout + done.stderr


@needs_sandbox
def test_first_autograde_of_a_class_on_a_new_gradebook_with_two_workers(built: Path, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A new gradebook, three students with two assignments each, two workers: every submission graded. nbgrader
    creates a missing student in the worker that grades it, and each student's two submissions, graded at once,
    could collide (`UNIQUE constraint failed: student.id`): autograde creates every student before the workers
    start, which the spy checks deterministically (the collision itself is a matter of milliseconds)."""
    course = Course(tmp_path / "course")
    shutil.copytree(built, course.root)
    second = "02_toy"
    for folder in (course.source, course.release):  # a second assignment: the same notebook
        shutil.copytree(folder / ASSIGNMENT, folder / second)
        (folder / second / f"{ASSIGNMENT}.ipynb").rename(folder / second / f"{second}.ipynb")
    course.gradebook.unlink()
    students = ["ann", "bob", "cy"]
    for student in students:
        for assignment in (ASSIGNMENT, second):
            release = read_notebook(course.release / assignment / f"{assignment}.ipynb")
            write_notebook(submission(release, RIGHT), course.submitted / student / assignment / f"{assignment}.ipynb")
    known_at_start = []
    grade_one = task.grade

    def spy(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        with sqlite3.connect(course.gradebook, timeout=60) as db:
            known_at_start.append(sorted(r[0] for r in db.execute("select id from student")))
        return grade_one(*args, **kwargs)

    monkeypatch.setattr(task, "grade", spy)
    report = autograde(course, [ASSIGNMENT, second], workers=2, cell_timeout_s=60)
    assert known_at_start == [students] * 6
    assert {(o.student, o.assignment): (o.score, o.problems) for o in report.outcomes} == {
        (s, a): (2.0, []) for s in students for a in (ASSIGNMENT, second)}


def test_formgrader_autograde_button_refuses_before_touching_anything(course: Course) -> None:
    """Formgrader's Autograde button (NbGraderAPI.autograde, in the Jupyter server) refuses with one line and
    leaves the earlier grading as it was: nbgrader would first remove autograded/STUDENT/ASSIGNMENT."""
    submit(course, {"honest": RIGHT})
    graded = course.autograded / "honest" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"
    graded.parent.mkdir(parents=True)
    graded.write_text("graded before")
    code = ("import json, sys; from nbgrader.apps import NbGraderAPI; from nbgrader.apps.baseapp import NbGrader\n"
            "app = NbGrader(); app.load_config_file()\n"
            f"print(json.dumps(NbGraderAPI(config=app.config).autograde({ASSIGNMENT!r}, 'honest')))")
    env = {k: v for k, v in os.environ.items() if k != "LECTURELIB_SANDBOX"}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    done = subprocess.run([sys.executable, "-c", code], cwd=course.root, env=env, capture_output=True, text=True,
                          timeout=120)
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["success"] is False
    assert result["log"].strip() == (
        "[ERROR] not graded, nothing changed: grade with `python -m lecturelib.course autograde`, which runs every "
        "kernel in a sandbox (in the course root: .venv/bin/python -m lecturelib.course autograde 01_toy --student "
        "honest); Formgrader's Autograde button and plain `nbgrader autograde` do not")
    assert graded.read_text() == "graded before"
    assert sorted(p.name for p in course.root.iterdir()) == sorted(
        ["autograded", "gradebook.db", "jupyter", "nbgrader_config.py", "notebooks", "solutions", "source", "submitted"])


def test_feedback_names_every_submission_it_could_not_write(course: Course, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    submit(course, {"honest": RIGHT, "ungraded": RIGHT})
    monkeypatch.chdir(course.root)
    assert main(["feedback"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert [line.split(" not written: ")[0] for line in out if " not written: " in line] == [
        f"feedback/{s}/{ASSIGNMENT}/{ASSIGNMENT}.html" for s in ("honest", "ungraded")]
    assert out[0].endswith(f"is not autograded (no autograded/honest/{ASSIGNMENT}/{ASSIGNMENT}.ipynb); grade it with "
                           f"`python -m lecturelib.course autograde {ASSIGNMENT} --student honest`, then run feedback again")


def test_format_table_says_what_waits_for_manual_grading() -> None:
    from lecturelib.course.grading.autograde import Outcome

    table = format_table([Outcome("ann", "02", 9.0, 9.0, 3.0, None, True), Outcome("bob", "02", 9.0, 9.0, 3.0, 2.0, True),
                          Outcome("cy", "02", problems=["could not be graded: x"])])
    assert "9/9 autograded, 3 manual points to grade" in table
    assert "9/9 autograded, 2/3 graded by hand" in table
    assert table.splitlines()[-1].startswith("2 of 3 submissions autograded; 1 wait for manual grading")


@pytest.mark.parametrize(("cores", "workers", "threads"), [(2, 2, "1"), (16, 4, "4"), (2, 3, "1"), (8, 1, "8")])
def test_parallel_kernels_share_the_cores(monkeypatch: pytest.MonkeyPatch, cores: int, workers: int, threads: str) -> None:
    from lecturelib.course.grading.folders import thread_env
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    assert thread_env(workers) == {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
    monkeypatch.setenv("OMP_NUM_THREADS", "3")  # the instructor's setting wins; the sandbox passes it on
    assert thread_env(workers) == {}
    assert "OMP_NUM_THREADS" in sandbox.PASS_ENV


def test_restore_missing_cells_leaves_a_cell_the_release_does_not_manage(tmp_path: Path) -> None:
    """A release cell without nbgrader metadata (the course's prose) whose id a submission cell shares is no
    managed cell to restore: that cell stays the student's, and cells whose metadata an editor dropped still get
    the release's back by their ids (formerly a KeyError on 'grade_id' that stopped grading)."""
    from lecturelib.course.grading.preprocessors import RestoreMissingCells

    release = toy()
    release.cells.insert(1, nbformat.v4.new_markdown_cell("Some prose the course does not grade."))
    for k, c in enumerate(release.cells):
        c["id"] = f"cell-{k}"
    write_notebook(release, tmp_path / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    nb = nbformat.from_dict(json.loads(nbformat.writes(release)))
    for c in nb.cells:
        c.metadata.pop("nbgrader", None)  # an editor that drops cell metadata but keeps cell ids
    nb.cells[1].source = "My own notes, in the cell that held the prose."
    nb.cells[3].source = RIGHT
    restore = RestoreMissingCells(release_directory=str(tmp_path))
    done, _ = restore.preprocess(nb, {"nbgrader": {"assignment": ASSIGNMENT, "notebook": ASSIGNMENT}})
    assert [c["id"] for c in done.cells] == [f"cell-{k}" for k in range(5)]  # nothing restored twice
    assert [nbgrader_meta(c).get("grade_id") for c in done.cells] == ["intro", None, "setup", "ex1_1", "ex1_1_test"]
    assert done.cells[1].source == "My own notes, in the cell that held the prose." and done.cells[3].source == RIGHT


# The submission makes a Unix socket of its own, where multiprocessing puts them (its TMPDIR): graded 2/2 only if it
# can (without the sandbox the kernel's TMPDIR is the run's private folder).
OWN_SOCKET = "\nimport multiprocessing.connection\nmultiprocessing.connection.Listener(family='AF_UNIX').close()"


def test_autograde_under_a_long_tmpdir_keeps_every_socket_short(course: Course, tmp_path: Path) -> None:
    """A 120-character TMPDIR (a Unix socket's path has at most 107 bytes): multiprocessing's forkserver, the
    kernel's IPC sockets and the submission's own socket all live in short folders; nothing is left in TMPDIR.
    (--no-sandbox: the kernel's TMPDIR is then the run's private folder; in the sandbox it is the sandbox's /tmp.)"""
    tmpdir = tmp_path / "t"
    tmpdir = Path(str(tmpdir) + "x" * (120 - len(str(tmpdir))))
    tmpdir.mkdir()
    assert len(str(tmpdir)) == 120
    submit(course, {"honest": RIGHT + OWN_SOCKET})
    graded = subprocess.run([sys.executable, "-m", "lecturelib.course", "autograde", "--cell-timeout", "60",
                             "--no-sandbox"], cwd=course.root, env={**os.environ, "TMPDIR": str(tmpdir)},
                            capture_output=True, text=True, timeout=600)
    assert graded.returncode == 0, graded.stderr[-2000:] + graded.stdout
    assert "honest   01_toy      2/2 autograded" in graded.stdout
    assert list(tmpdir.iterdir()) == []


def _state(course: Course) -> dict:
    try:
        return json.loads((course.root / "logs" / "autograde" / "run" / "state.json").read_text())
    except (OSError, ValueError):
        return {}


def test_ctrl_c_stops_autograde_with_one_line(course: Course) -> None:
    """Ctrl-C (SIGINT to the terminal's process group) while the second of two submissions runs: one line on stderr
    that says how many are left, nothing on stdout, exit status 130 (what a shell reports for Ctrl-C)."""
    submit(course, {"ann": RIGHT, "bob": RIGHT + "\nimport time\ntime.sleep(600)"})
    # As a shell starts a command: SIGINT at its default and not blocked (exec keeps an ignored or blocked signal, and
    # a test worker's disposition is no terminal's)
    as_a_shell = ("import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                  "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); os.execv(sys.executable, sys.argv[1:])")
    command = [sys.executable, "-c", as_a_shell, sys.executable, "-m", "lecturelib.course", "autograde", "--no-sandbox",
               "--cell-timeout", "60"]
    run = subprocess.Popen(command, cwd=course.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           start_new_session=True)
    deadline = time.monotonic() + 300
    while f"ann/{ASSIGNMENT}" not in _state(course).get("done", []) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _state(course)["running"] == [f"bob/{ASSIGNMENT}"]
    signals = [ln for ln in Path(f"/proc/{run.pid}/status").read_text().splitlines() if ln.startswith("Sig")]
    os.killpg(run.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    out, err = run.communicate(timeout=120)
    assert (run.returncode, out, err) == (130, "", "stopped; run it again to grade the 1 left\n"), signals
    assert not (course.root / "logs" / "autograde" / "run").exists()  # ended, not killed: the next run resumes
    private = f"lecturelib-autograde-{run.pid}-"  # nothing of it runs on: bob's kernel (its cwd is in there) is gone
    assert not [p for p in os.listdir("/proc") if p.isdigit() and (private.encode() in _cmdline(p) or
                                                                    private in str(_cwd(p)) or _cwd(p) == course.root)]


def test_second_autograde_grades_only_what_changed(course: Course, monkeypatch: pytest.MonkeyPatch) -> None:
    """A second run grades nothing unchanged ("unchanged" in the table, same scores); a new submission, an autograded
    folder changed since, or a changed master is graded again; force grades again what did not change."""
    graded: list[str] = []
    grade = task.grade
    monkeypatch.setattr(task, "grade", lambda t, kit: graded.append(t.student) or grade(t, kit))

    def again(**kwargs: object) -> dict[str, tuple[float | None, bool]]:
        graded.clear()
        report = autograde(course, [ASSIGNMENT], sandboxed=False, cell_timeout_s=60, **kwargs)  # type: ignore[arg-type]
        return {o.student: (o.score, o.unchanged) for o in report.outcomes}

    submit(course, {"ann": RIGHT, "bob": "def double(x):\n    return x"})
    assert again() == {"ann": (2.0, False), "bob": (0.0, False)} and sorted(graded) == ["ann", "bob"]
    graded.clear()
    report = autograde(course, [ASSIGNMENT], sandboxed=False, cell_timeout_s=60)
    table = format_table(report.outcomes)
    assert graded == [] and [o.notes for o in report.outcomes] == [["unchanged: not graded again"]] * 2
    assert "ann      01_toy      2/2 autograded  -        unchanged: not graded again" in table
    assert table.splitlines()[-1] == ("2 of 2 submissions autograded (2 unchanged since their last grading: --force "
                                      "grades them again)")
    submit(course, {"bob": RIGHT})  # bob uploads again
    (course.autograded / "ann" / ASSIGNMENT / "stray.txt").write_text("not what grading left")
    assert again() == {"ann": (2.0, False), "bob": (2.0, False)} and sorted(graded) == ["ann", "bob"]
    (course.source / ASSIGNMENT / "data.txt").write_text("a data file the masters gained")
    assert again(students=["ann"]) == {"ann": (2.0, False)} and graded == ["ann"]
    assert again() == {"ann": (2.0, True), "bob": (2.0, False)} and graded == ["bob"]
    assert again(force=True, students=["ann"]) == {"ann": (2.0, False)} and graded == ["ann"]
    ledger = json.loads((course.root / "logs" / "autograde" / "graded.json").read_text())
    assert sorted(ledger) == [f"ann/{ASSIGNMENT}", f"bob/{ASSIGNMENT}"]


# -- a term in the exchange flow ----------------------------------------------------------------------------------------

NOTEBOOK = f"{ASSIGNMENT}.ipynb"
GARBAGE = "the day before the deadline, honest"  # issue 32, item 2: a timestamp.txt that is no time


@pytest.fixture(scope="module")
def written_built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The toy with a written answer graded by hand (3 points), built."""
    nb = toy()
    nb.cells.append(cell("markdown", "### BEGIN SOLUTION\nDoubling is one multiply.\n### END SOLUTION", "ex1_2",
                         grade=True, solution=True, points=3))
    course = toy_course(tmp_path_factory.mktemp("written"), nb)
    assert build(course) == []
    return course.root


def hand_in(course: Course, student: str, name_time: str, stamp: str | None, notebook: bytes) -> Path:
    """A submission as nbgrader submit leaves it in the exchange (the student's own process writes all of it)."""
    folder = course.root / "exchange" / "resource-accounting" / "inbound" / f"{student}+{ASSIGNMENT}+{name_time}+x1"
    folder.mkdir(parents=True)
    (folder / NOTEBOOK).write_bytes(notebook)
    if stamp is not None:
        (folder / "timestamp.txt").write_text(stamp)
    return folder


def test_a_term_in_the_exchange_flow(written_built: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 32, items 2-3, and issue 33, items 1, 2, 3, 5, 8, as an instructor meets them: the README's due-date and
    collect commands from a shell without the venv on PATH; submissions written to the exchange 8 days after the due
    date, one claiming (timestamp.txt, folder name, file times set back with os.utime) the day before, one whose
    timestamp.txt and folder name are no time, one not a notebook, one another assignment's notebook; two put into
    submitted/ by hand, one with a timestamp.txt that is no time, one whose save fails. Every student is collected or
    refused alone, graded or reported alone; late is late; no total and no feedback page counts a written answer
    nobody graded."""
    course = Course(tmp_path / "course")
    shutil.copytree(written_built, course.root)
    (course.root / ".venv").symlink_to(sys.prefix)
    write_notebook(other_assignment(), course.release / "02_other" / "02_other.ipynb")  # another release
    release = read_notebook(course.release / ASSIGNMENT / NOTEBOOK)
    answered = submission(release, RIGHT)
    for c in answered.cells:
        if nbgrader_meta(c).get("grade_id") == "ex1_2":
            c.source = "One multiply per element."  # a written answer: a person grades it
    right = nbformat.writes(answered).encode()
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None, microsecond=0)
    due = now - datetime.timedelta(days=8)
    claimed = time_text(due - datetime.timedelta(days=1))  # "the day before"
    liar = hand_in(course, "liar", claimed, claimed, right)
    for path in (*liar.iterdir(), liar):  # every time a student may set, set back: only st_ctime stays
        os.utime(path, (due.timestamp() - 86400, due.timestamp() - 86400))
    hand_in(course, "garbage", "not a time", GARBAGE, right)
    hand_in(course, "pdf", time_text(now), time_text(now), b"%PDF-1.7 the notebook, printed")
    hand_in(course, "stray", time_text(now), time_text(now), (course.release / "02_other" / "02_other.ipynb").read_bytes())

    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    shell = lambda command: subprocess.run(command, shell=True, cwd=course.root, env=env, capture_output=True,  # noqa: E731
                                           text=True, timeout=300)
    (due_command,) = readme_commands("due date")
    done = shell(due_command.replace("NN_topic", ASSIGNMENT).replace("2026-12-01 17:00:00 UTC", f"{due} UTC"))
    assert done.returncode == 0, done.stderr[-3000:]
    (collect_command,) = [c for c in readme_commands("collect") if c.startswith(".venv/bin/nbgrader collect")]
    done = shell(collect_command.replace("NN_topic", ASSIGNMENT))
    assert done.returncode == 0, done.stderr[-3000:]
    log = done.stdout + done.stderr
    assert "stray: refused 01_toy.ipynb: it is the notebook of 02_other (its graded cells are 02_other's)" in log, log
    assert sorted(p.name for p in course.submitted.iterdir()) == ["garbage", "liar", "pdf"]
    times = {p.parts[-3]: read_time(p.read_text()) for p in course.submitted.glob(f"*/{ASSIGNMENT}/timestamp.txt")}
    assert all(t is not None and t >= now for t in times.values()), times  # all handed in now: 8 days late
    notes = {p.parts[-3]: p.read_text() for p in course.submitted.glob(f"*/{ASSIGNMENT}/collect-notes.txt")}
    assert sorted(notes) == ["garbage", "liar"]
    assert notes["liar"].startswith(f"timestamp.txt claimed {claimed[:19]} UTC, but the exchange received it at ")
    assert notes["liar"].rstrip().endswith("(the last change of its files there, which no student can set back): the "
                                           "later time counts")
    assert notes["garbage"].startswith(f"timestamp.txt read {GARBAGE!r}, which is no time: ignored; the exchange "
                                       "received it at ")

    for student in ("handmade", "broken"):  # put into submitted/ by hand, past collect's checks
        folder = course.submitted / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / NOTEBOOK).write_bytes(right)
        (folder / "timestamp.txt").write_text(GARBAGE)
    save = autograde_module.task_save

    def failing(course_: Course, result: task.Result) -> list[str]:
        if result.student == "broken":
            raise OSError("No space left on device")
        return save(course_, result)

    monkeypatch.setattr(autograde_module, "task_save", failing)
    monkeypatch.chdir(course.root)
    assert main(["autograde", "--no-sandbox", "--cell-timeout", "60", "--workers", "2"]) == 1
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.split()}
    assert "2/2 autograded, 3 manual points to grade" in rows["liar"] and "timestamp.txt claimed" in rows["liar"]
    assert "which is no time: ignored; the exchange received it" in rows["garbage"] and "2/2 autograded" in rows["garbage"]
    assert (f"timestamp.txt read {GARBAGE!r}, which is no time: graded with no submission time (so not late): "
            "collect it again, or correct timestamp.txt") in rows["handmade"] and "2/2 autograded" in rows["handmade"]
    assert "not saved: OSError: No space left on device; grade it again" in rows["broken"]
    assert f"submitted/pdf/{ASSIGNMENT}/{NOTEBOOK} is not a valid notebook" in rows["pdf"]
    assert rows["3"].startswith("3 of 5 submissions autograded; 3 wait for manual grading")
    assert not (course.autograded / "broken").exists()

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course.gradebook}") as gb:  # liar's written answer graded in Formgrader; no other
        gb.find_grade("ex1_2", ASSIGNMENT, ASSIGNMENT, "liar").manual_score = 2.5
        gb.db.commit()
    assert main(["grades"]) == 0
    csv_rows = {r[2]: r for r in list(csv.reader((course.exports / "canvas-grades.csv").open()))[2:]}
    assert csv_rows["liar"][5] == "4.5"  # 2 autograded + 2.5 by hand
    assert csv_rows["liar"][6].startswith("01_toy: late by 8 d") and "01_toy: timestamp.txt claimed" in csv_rows["liar"][6]
    assert csv_rows["garbage"][5] == ""  # its written answer waits for a grader
    assert csv_rows["garbage"][6].startswith("01_toy: late by 8 d") and csv_rows["garbage"][6].endswith(
        "01_toy: ex1_2 not graded by hand yet; total left blank")
    assert csv_rows["handmade"] == ["handmade", "", "handmade", "", "", "",
                                    "01_toy: ex1_2 not graded by hand yet; total left blank"]
    assert csv_rows["pdf"][5:] == csv_rows["broken"][5:] == ["", "01_toy: not graded (collected but not autograded)"]
    capsys.readouterr()

    assert main(["feedback"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert (course.feedback / "liar" / ASSIGNMENT / f"{ASSIGNMENT}.html").is_file()  # graded through: its page
    assert sorted(p.parts[-3] for p in course.feedback.glob(f"*/{ASSIGNMENT}/*.html")) == ["liar"]
    for student in ("garbage", "handmade"):
        assert (f"feedback/{student}/{ASSIGNMENT}/{ASSIGNMENT}.html not written: ex1_2 (3 points) not graded by hand "
                "yet (its score would read 0 and the total would be partial): grade it (make instructor: Nbgrader > "
                "Formgrader > Manual Grading), then run feedback again") in out, out
    (pdf,) = [line for line in out if line.startswith(f"feedback/pdf/{ASSIGNMENT}/")]
    assert f"not written: pdf's upload submitted/pdf/{ASSIGNMENT}/{NOTEBOOK} is not a notebook (" in pdf
    assert pdf.endswith("so there is nothing to grade: the student must hand in the notebook itself (the .ipynb file, "
                        "JupyterLab: File > Download), which you then collect again (--force) and autograde")
    (broken,) = [line for line in out if line.startswith(f"feedback/broken/{ASSIGNMENT}/")]
    assert broken.endswith(f"grade it with `python -m lecturelib.course autograde {ASSIGNMENT} --student broken`, then "
                           "run feedback again")
