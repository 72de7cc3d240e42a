"""The course in a real browser: the student's and the instructor's flows in JupyterLab, driven by Playwright.

A headless Chromium (the system's: nothing downloads a browser) drives JupyterLab servers started on free
localhost ports with a token. The student's server is the one `make lab` starts (jupyter/student); the
instructor's the one `make instructor` starts (jupyter/share). The student's kernels run the full sizes, as a
student's do: this is the one full-size run of every solution (nbval's, where no browser runs them: conftest);
the instructor's run with LECTURELIB_QUICK=1, as the autograder's do. Screenshots of every step go to browser-screenshots/ (or
$BROWSER_SCREENSHOTS); the test session lists them at its end, one line a file.
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import os
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest

from lecturelib.course.term.feedback import _plain, hidden_lines
from lecturelib.course.layout import Course, fill_answers, nbgrader_meta, read_notebook, write_notebook
from lecturelib.course.term.roster import plain_text
from lecturelib.runmode import QUICK_ENV

from chromium import find_chromium
from gradebook_helpers import grade_the_written_answers

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
ASSIGNMENTS = Course(ROOT).assignments()
PILOT = "02_matmul_flops" if "02_matmul_flops" in ASSIGNMENTS else (ASSIGNMENTS or [""])[0]
SHOTS = Path(os.environ.get("BROWSER_SCREENSHOTS", ROOT / "browser-screenshots"))


CHROMIUM = find_chromium()
try:
    from playwright.sync_api import Page, sync_playwright
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # pragma: no cover - requirements.txt pins playwright
    sync_playwright = None  # type: ignore[assignment]

pytestmark = pytest.mark.skipif(
    CHROMIUM is None or sync_playwright is None,
    reason="browser tests skipped: no Chromium found (apt-get install chromium, or set CHROMIUM=/path/to/chrome)",
)
# Chromium as root in a container, with no network to talk to (see README, "Browser tests")
CHROMIUM_ARGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"]
TIMEOUT_MS = 180_000  # one notebook's Run All or Validate on a loaded 2-core machine
# Every page: a laptop's window, and the motion a user's "reduce motion" setting asks for. A JupyterLab page that
# animates keeps Chromium's renderer at 0.9 of a core while it waits, idle (4.3-4.5 CPU-s in 5 s, 0.2-0.3 s with
# reduced motion: /proc/stat around a JupyterLab tab doing nothing), on CI's two cores shared with the grading.
PAGE = {"viewport": {"width": 1400, "height": 1000}, "reduced_motion": "reduce"}

# The open notebook as JupyterLab's own objects see it (JupyterLab started with expose_app_in_browser).
NOTEBOOK_STATE = """() => {
  const app = window.jupyterapp; if (!app) return null;
  const w = app.shell.currentWidget; if (!w || !w.context || !w.sessionContext || !w.content) return null;
  const kernel = w.sessionContext.session && w.sessionContext.session.kernel;
  const code = w.content.widgets.filter(c => c.model.type === 'code');
  const out = {path: w.context.path, ready: w.context.isReady && !!kernel, status: kernel ? kernel.status : null,
               pending: code.filter(c => c.model.executionCount === null || c.model.executionState === 'running').length,
               errors: [], images: 0, widgets: 0};
  code.forEach((c, i) => { for (const o of c.model.outputs.toJSON()) {
    if (o.output_type === 'error') out.errors.push(`cell ${i}: ${o.ename}: ${o.evalue}`.slice(0, 300));
    if (o.data && o.data['image/png']) out.images++;
    if (o.data && o.data['application/vnd.jupyter.widget-view+json']) out.widgets++; } });
  return out;
}"""
IMAGE_SOURCES = "() => Array.from(document.querySelectorAll('.jp-OutputArea-output img')).map(e => e.src)"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def jupyter_lab(root: Path, env: dict[str, str], log: Path, *, quick: bool) -> Iterator[tuple[str, str]]:
    """A JupyterLab server on a free port with a token, serving `root`, its kernels at quick sizes or a student's
    (full); yields (base URL, token)."""
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [str(BIN / "jupyter"), "lab", "--no-browser", f"--ServerApp.root_dir={root}", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}",
           "--LabApp.expose_app_in_browser=True"] + (["--allow-root"] if os.geteuid() == 0 else [])
    # one intra-op thread per kernel: the other half of CI's two cores grades the round trip meanwhile
    full_env = {"OMP_NUM_THREADS": "1", **{k: v for k, v in os.environ.items() if k != QUICK_ENV}, **env,
                "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", **({QUICK_ENV: "1"} if quick else {})}
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=full_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                with urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start: {log.read_text()[-2000:]}")
            time.sleep(0.5)
        yield base, token
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.fixture(scope="module")
def browser():  # type: ignore[no-untyped-def]
    SHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def shot(page: Page, name: str) -> None:
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=False)


def open_notebook(page: Page, base: str, token: str, path: str) -> dict:
    """Open a notebook in a fresh workspace and wait until its kernel is idle; its state."""
    page.goto(f"{base}/lab/workspaces/w{secrets.token_hex(4)}/tree/{path}?token={token}&reset")
    page.wait_for_function(
        f"(p) => {{ const s = ({NOTEBOOK_STATE})(); return s && s.path === p && s.ready && s.status === 'idle'; }}",
        arg=path, timeout=TIMEOUT_MS)
    return page.evaluate(NOTEBOOK_STATE)


def run_all(page: Page) -> dict:
    """Kernel → Run All Cells, then wait until every code cell has run and the kernel is idle; the state."""
    page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
    page.wait_for_function(
        f"() => {{ const s = ({NOTEBOOK_STATE})(); return s.pending === 0 && s.status === 'idle'; }}", timeout=TIMEOUT_MS)
    page.wait_for_timeout(500)  # let the last outputs render
    return page.evaluate(NOTEBOOK_STATE)


def move_a_widget(page: Page) -> bool:
    """Move the first slider (or pick another option of the first dropdown); True if a figure changed after it."""
    before = page.evaluate(IMAGE_SOURCES)
    slider, dropdown = page.locator(".jp-OutputArea-output .noUi-handle"), page.locator(".jp-OutputArea-output select")
    if slider.count():
        handle = slider.first
        handle.scroll_into_view_if_needed()
        handle.focus()
        handle.press("End" if handle.get_attribute("aria-valuenow") != handle.get_attribute("aria-valuemax") else "Home")
    elif dropdown.count():
        menu = dropdown.first
        menu.scroll_into_view_if_needed()
        count, current = menu.evaluate("(s) => [s.options.length, s.selectedIndex]")
        menu.select_option(index=(current + 1) % count)  # by position: a label may be rendered differently
    else:
        return False
    page.wait_for_function(f"(b) => ({IMAGE_SOURCES})().join() !== b.join()", arg=before, timeout=60_000)
    return True


def validate(page: Page) -> tuple[str, str]:
    """Press nbgrader's Validate button; (class of the message, its text)."""
    page.get_by_role("button", name="Validate").click()
    message = page.locator("#validation-message")
    message.wait_for(timeout=TIMEOUT_MS)
    return message.get_attribute("class") or "", message.inner_text()


def close_dialog(page: Page) -> None:
    page.keyboard.press("Escape")
    page.locator(".jp-Dialog").wait_for(state="detached", timeout=10_000)


# ---------------------------------------------------------------------------------------------
# The student: every notebook solved (and the pilot's untouched release)


def _git_status() -> str:
    """What git sees changed in the repository (tracked and untracked files): running the course must change none."""
    done = subprocess.run(["git", "status", "--porcelain", "--", "notebooks", "jupyter", "solutions", "source"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    return done.stdout if done.returncode == 0 else ""


@pytest.fixture(scope="module")
def student_course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """The student's course as `make lab` makes it: the release in notebooks/, the student's copy in work/ (by
    lecturelib.workspace), JupyterLab with the student's settings (jupyter/student) on work/. Each notebook also
    solved in work/NN_topic/solved/ (the student's finished work)."""
    root = tmp_path_factory.mktemp("student")
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    env = {"JUPYTER_CONFIG_DIR": str(ROOT / "jupyter" / "student")}
    made = subprocess.run([sys.executable, "-m", "lecturelib.workspace", "notebooks", "work"], cwd=root,
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    for assignment in ASSIGNMENTS:
        for master in Course(ROOT).source_notebooks(assignment):
            release = read_notebook(root / "work" / assignment / master.name)
            write_notebook(fill_answers(release, read_notebook(master)), root / "work" / assignment / "solved" / master.name)
    # full sizes, as `make lab` runs them: this is CI's one full-size run of every solution (conftest: nbval then
    # leaves solutions/ out); the round trip runs each at quick sizes under the grader
    with jupyter_lab(root / "work", env, root / "lab.log", quick=False) as (base, token):
        yield root, base, token


@pytest.fixture(scope="module")
def student_lab(student_course: tuple[Path, str, str]) -> tuple[str, str]:
    return student_course[1], student_course[2]


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_browser_student_runs_and_validates_each_notebook(browser, student_lab, assignment: str) -> None:
    base, token = student_lab
    page = browser.new_page(**PAGE)
    try:
        for master in Course(ROOT).source_notebooks(assignment):
            path = f"{assignment}/solved/{master.name}"
            open_notebook(page, base, token, path)
            assert page.get_by_text("Nbgrader", exact=True).count() == 0  # the student's view: no instructor menu
            state = run_all(page)
            shot(page, f"student-{assignment}-1-ran")
            assert state["errors"] == [], state["errors"]
            rendered = page.locator(".jp-OutputArea-output img").count()
            assert state["images"] >= 1 and rendered == state["images"], (state["images"], rendered)
            assert page.get_by_text("Error displaying widget").count() == 0
            if state["widgets"]:
                assert page.locator(".jp-OutputArea-output .jupyter-widgets").count() >= state["widgets"]
                assert move_a_widget(page), "a widget is shown but no control moved a figure"
                shot(page, f"student-{assignment}-2-widget-moved")
            if assignment != PILOT:
                # Validate runs the notebook once more through nbgrader: the round trip grades every solution (full
                # marks) and every untouched release (0, check by check) with the same run; the pilot shows the button
                continue
            kind, text = validate(page)
            shot(page, f"student-{assignment}-3-validated")
            assert "validation-success" in kind and "Success! Your notebook passes all the tests." in text, text[:500]
            close_dialog(page)
            open_notebook(page, base, token, f"{assignment}/{master.name}")  # the student's copy, untouched
            kind, text = validate(page)
            shot(page, f"student-{assignment}-4-untouched-validated")
            assert "validation-failed" in kind, text[:500]
            close_dialog(page)
    finally:
        page.close()
        shut_down_kernels(base, token)  # an idle kernel keeps ~0.5 GB and a little CPU for the rest of the run


def shut_down_kernels(base: str, token: str) -> None:
    """Shut down every kernel of a JupyterLab server (as Kernel > Shut Down All Kernels does)."""
    headers = {"Authorization": f"token {token}"}
    with urllib.request.urlopen(urllib.request.Request(f"{base}/api/kernels", headers=headers), timeout=30) as r:
        kernels = json.load(r)
    for kernel in kernels:
        request = urllib.request.Request(f"{base}/api/kernels/{kernel['id']}", headers=headers, method="DELETE")
        urllib.request.urlopen(request, timeout=30).close()


def test_browser_student_works_in_an_own_copy_that_updates_never_overwrite(browser, student_course) -> None:
    """`make lab`'s work/: an untouched copy opens unmodified; the student's answer is saved there; a course update
    (the pilot changed, a notebook added) brings the new notebook and keeps the answer, in JupyterLab and in the
    Notebook 7 view (whose fonts load); the course's repository has no changed file after any of it."""
    root, base, token = student_course
    before = _git_status()
    (master,) = Course(ROOT).source_notebooks(PILOT)
    path = f"{PILOT}/{master.name}"
    page = browser.new_page(**PAGE)
    try:
        open_notebook(page, base, token, path)
        page.wait_for_timeout(2000)  # JupyterLab writes the kernel's language_info into the model once it knows it
        assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty") is False
        answer = "def matmul_flops(m: int, k: int, n: int) -> int:\n    return 2 * m * k * n  # my own answer"
        page.evaluate("""async (answer) => {
            const w = window.jupyterapp.shell.currentWidget;
            const cell = w.content.widgets.find(c => c.model.sharedModel.getSource().startsWith('def matmul_flops('));
            cell.model.sharedModel.setSource(answer);
            await window.jupyterapp.commands.execute('docmanager:save');
        }""", answer)
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000)
        shot(page, "student-own-copy-1-answer-saved")
        mine = root / "work" / path
        assert "# my own answer" in mine.read_text()
        # the course publishes an update: the pilot changed, a new notebook; the next `make lab` syncs work/
        release = root / "notebooks" / path
        release.write_text(release.read_text().replace("# 02 · ", "# 02 (updated) · "))
        shutil.copytree(root / "notebooks" / ASSIGNMENTS[0], root / "notebooks" / "09_new")
        (root / "notebooks" / "09_new" / f"{ASSIGNMENTS[0]}.ipynb").rename(root / "notebooks" / "09_new" / "09_new.ipynb")
        synced = subprocess.run([sys.executable, "-m", "lecturelib.workspace", "notebooks", "work"], cwd=root,
                                capture_output=True, text=True, timeout=120)
        assert synced.returncode == 0, synced.stderr
        assert f"kept your work/{path}: the course updated notebooks/{path} since your copy was made" in synced.stdout
        assert "copied notebooks/09_new/09_new.ipynb to work/09_new/09_new.ipynb" in synced.stdout
        assert "# my own answer" in mine.read_text() and "(updated)" not in mine.read_text()
        open_notebook(page, base, token, path)  # reopened after the update: the answer is there
        assert page.evaluate("""() => window.jupyterapp.shell.currentWidget.content.widgets
            .some(c => c.model.sharedModel.getSource().includes('# my own answer'))""")
        shot(page, "student-own-copy-2-after-update")
        failed: list[str] = []  # the Notebook 7 view of the same notebook: every request answered, its fonts too
        fonts: list[int] = []
        page.on("response", lambda r: (failed.append(f"{r.status} {r.url.split('?')[0]}") if r.status >= 400 else None,
                                       fonts.append(r.status) if ".woff" in r.url else None))
        page.goto(f"{base}/notebooks/{path}?token={token}", wait_until="networkidle", timeout=TIMEOUT_MS)
        for _ in range(20):  # scroll through: formulas render (MathJax's .woff fonts load) as they come into view
            page.mouse.wheel(0, 2000)
            page.wait_for_timeout(300)
        shot(page, "student-own-copy-3-notebook-view")
        assert failed == [] and set(fonts) <= {200}, (failed, fonts)
    finally:
        page.close()
    assert _git_status() == before  # no tracked file changed, nothing new in the course's folders


# ---------------------------------------------------------------------------------------------
# The instructor: Formgrader, manual grading, feedback


DUE = "2026-12-01 17:00:00 UTC"
ROSTER = ("id,first_name,last_name,email,lms_user_id\nann,Ann,Lee,ann@example.edu,101\nblank,Bo,Lank,bo@example.edu,102\n"
          "solved,Sol,Ved,,103\n")
WORKSHEET = ("Identifier,Full name,Email address,Status,Grade,Maximum grade,Grade can be changed,Last modified (submission),"
             "Last modified (grade),Feedback comments\nParticipant 1234,Bo Lank,bo@example.edu,Submitted for grading,,"
             "10.00,Yes,,-,\n")  # Moodle's grading worksheet of the pilot: participant numbers are drawn per assignment


@pytest.fixture(scope="module")
def instructor_course(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Course, str, str]]:
    """The instructor's first grading of the pilot, as the README's Instructor guide does it: the roster imported,
    the due date set, the LMS's downloads collected (`course collect`: files named by hand, Canvas's and Moodle's), then
    `course autograde --workers 2` on a new gradebook with three students (one late, one blank)."""
    root = tmp_path_factory.mktemp("course")
    shutil.copy2(ROOT / "nbgrader_config.py", root)
    shutil.copytree(ROOT / "source", root / "source")
    shutil.copytree(ROOT / "jupyter" / "share", root / "jupyter" / "share")
    course = Course(root)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    run = lambda *args: subprocess.run([sys.executable, "-m", "lecturelib.course", *args], cwd=root, env=env,
                                       capture_output=True, text=True, timeout=900)
    # the committed release (test_course_build checks it is what `build` makes); autograde adds the pilot's notebooks
    # to the gradebook itself, and Formgrader lists the assignments of source/
    shutil.copytree(ROOT / course.release.name, course.release)
    (root / "roster.csv").write_text(ROSTER)
    done = run("roster", "roster.csv")
    assert done.returncode == 0 and "imported 3 students" in done.stdout, done.stdout + done.stderr
    done = course.nbgrader("db", "assignment", "add", PILOT, f"--duedate={DUE}")
    assert done.returncode == 0, done.stderr[-2000:]
    (master,) = course.source_notebooks(PILOT)
    release = read_notebook(course.release / PILOT / master.name)
    solved = fill_answers(release, read_notebook(master))
    # the LMS's downloads, each collected as the guide says: files named by hand, Canvas's, Moodle's (the participant
    # number found in the assignment's grading worksheet); the submission times in timestamps.csv
    downloaded = root / "downloaded" / PILOT
    downloaded.mkdir(parents=True)
    (downloaded / "timestamps.csv").write_text("student,timestamp\nsolved,2026-12-01 16:00:00 UTC\n"
                                               "blank,2026-12-01 16:30:00 UTC\nann,2026-12-01 18:05:00 UTC\n")
    (downloaded / "worksheet.csv").write_text(WORKSHEET)
    archive = downloaded / "archive"
    for lms, name, nb in (("course", f"solved--{master.name}", solved),
                          ("canvas", f"leeann_LATE_101_9001_ann--{master.name}", solved),
                          ("moodle", f"Bo Lank_1234_assignsubmission_file_/blank--{master.name}", hostile(release))):
        shutil.rmtree(archive, ignore_errors=True)
        write_notebook(nb, archive / name)
        done = run("collect", PILOT, "--lms", lms)
        assert done.returncode == 0 and "collected 1 submission into submitted/" in done.stdout, done.stdout + done.stderr
    assert sorted(p.name for p in course.submitted.iterdir()) == ["ann", "blank", "solved"]
    assert (course.submitted / "ann" / PILOT / "timestamp.txt").read_text().strip() == "2026-12-01 18:05:00 UTC"
    graded = run("autograde", PILOT, "--workers", "2")
    assert graded.returncode == 0, graded.stdout + graded.stderr
    assert "3 of 3 submissions autograded" in graded.stdout, graded.stdout
    (root / "exchange").mkdir()  # as `make instructor` does
    instructor = {"JUPYTER_PATH": str(ROOT / "jupyter" / "share"), "JUPYTER_CONFIG_PATH": str(ROOT / "jupyter" / "instructor")}
    with jupyter_lab(root, instructor, root / "lab.log", quick=True) as (base, token):  # as `make instructor` starts it
        yield course, base, token


XSS = "__lecturelib_xss"  # what a student's script would set in the instructor's page
HOSTILE_REFLECTION = (f"My answer <img src=x onerror=\"window.{XSS}='reflection'\"> "
                      f"<script>window.{XSS}='script'</script> <iframe srcdoc=\"<script>parent.{XSS}='iframe'</script>\">")
HOSTILE_OUTPUT = f"""from IPython.display import HTML, Javascript, display
display(HTML("<img src=x onerror=\\"window.{XSS}='output'\\"><b>hostile output</b>"))
display(Javascript("window.{XSS} = 'javascript'"))"""


def hostile(release):  # type: ignore[no-untyped-def]
    """The untouched release, its first written answer and a cell of its own trying to run script in the browser of
    whoever grades it (issue 29, item 2): still a blank submission for the autograder."""
    nb = copy.deepcopy(release)
    written = [c for c in nb.cells if c.cell_type == "markdown" and nbgrader_meta(c).get("solution")]
    if written:
        written[0].source = HOSTILE_REFLECTION
    nb.cells.append(nbformat.v4.new_code_cell(HOSTILE_OUTPUT))
    return nb


def instructor_page(browser, token: str) -> Page:  # type: ignore[no-untyped-def]
    """A page whose every request (Formgrader's own API calls too) carries the server's token."""
    context = browser.new_context(**PAGE, extra_http_headers={"Authorization": f"token {token}"})
    return context.new_page()


def test_browser_instructor_formgrader_lists_every_assignment(browser, instructor_course) -> None:
    _, base, token = instructor_course
    page = instructor_page(browser, token)
    try:
        page.goto(f"{base}/formgrader/manage_assignments")
        for assignment in ASSIGNMENTS:
            page.get_by_text(assignment, exact=True).first.wait_for(timeout=60_000)
        assert page.locator("#warning-exchange").count() == 0  # the course's exchange folder exists
        shot(page, "instructor-1-formgrader")
    finally:
        page.close()


def test_browser_instructor_formgrader_lists_the_class_and_its_autograde_button_changes_nothing(
        browser, instructor_course) -> None:
    """Names from the roster and the submission times (not "None, None"); the Autograde button refuses in one line
    and the submission stays graded (nbgrader would remove autograded/STUDENT/ASSIGNMENT before refusing)."""
    course, base, token = instructor_course
    graded = course.autograded / "solved" / PILOT
    before = sorted((p.name, p.stat().st_mtime_ns) for p in graded.iterdir())
    page = instructor_page(browser, token)
    try:
        page.goto(f"{base}/formgrader/manage_submissions/{PILOT}")
        page.get_by_text("Lee, Ann").wait_for(timeout=60_000)
        rows = page.locator("tbody tr").all_inner_texts()
        assert not [r for r in rows if "None" in r], rows
        assert [r for r in rows if "Lee, Ann" in r and "2026-12-01 18:05:00" in r], rows
        shot(page, "instructor-1-submissions")
        page.locator("tbody tr", has_text="Ved, Sol").locator(".autograde a").click()
        modal = page.locator("#error-modal")
        modal.wait_for(timeout=120_000)
        log = modal.locator(".panel-warning .panel-body").inner_text().strip()
        shot(page, "instructor-1-autograde-button-refused")
        assert log.splitlines() == [
            "[ERROR] not graded, nothing changed: grade with `python -m lecturelib.course autograde`, which runs every "
            f"kernel in a sandbox (in the course root: .venv/bin/python -m lecturelib.course autograde {PILOT} "
            "--student solved); Formgrader's Autograde button and plain `nbgrader autograde` do not"]
    finally:
        page.close()
    assert sorted((p.name, p.stat().st_mtime_ns) for p in graded.iterdir()) == before


def test_browser_instructor_grades_a_reflection_and_it_is_saved(browser, instructor_course) -> None:
    course, base, token = instructor_course
    from nbgrader.api import Gradebook

    (master,) = course.source_notebooks(PILOT)
    notebook = master.stem
    written = [nbgrader_meta(c)["grade_id"] for c in read_notebook(master).cells
               if c.cell_type == "markdown" and nbgrader_meta(c).get("grade") and nbgrader_meta(c).get("solution")]
    assert written, f"{PILOT} has no manually graded answer"
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        submission_id = gb.find_submission_notebook(notebook, PILOT, "solved").id
    page = instructor_page(browser, token)
    try:
        page.goto(f"{base}/formgrader/submissions/{submission_id}/")
        score = page.locator(f"input.score#{written[0]}")
        score.wait_for(timeout=60_000)
        assert page.get_by_text("Reference answer").count() >= 1  # the solved submission's written answer is shown
        # and the master's reference and rubric, for graders, right after it
        assert page.get_by_text("For graders only: the reference answer and rubric of").count() == len(written)
        page.wait_for_function("() => document.querySelectorAll('.MathJax, .MathJax_CHTML, mjx-container').length > 0",
                               timeout=60_000)  # formulas typeset, with no internet: MathJax came from the server
        saved = lambda r: "/formgrader/api/grade/" in r.url and r.request.method == "PUT"  # noqa: E731
        for attempt in range(3):  # a field filled before Formgrader has bound it is reset: type again
            try:
                with page.expect_response(saved, timeout=30_000) as response:
                    score.fill("2")
                    score.press("Tab")  # Formgrader saves on change
                assert response.value.ok, response.value.status
                break
            except PlaywrightTimeout:
                if attempt == 2:
                    raise
        deadline = time.monotonic() + 30
        while True:
            with Gradebook(f"sqlite:///{course.gradebook}") as gb:
                grade = gb.find_grade(written[0], notebook, PILOT, "solved")
                if grade.manual_score == 2.0 or time.monotonic() > deadline:
                    break
            time.sleep(0.5)
        shot(page, "instructor-2-manual-grade")
        assert grade.manual_score == 2.0
    finally:
        page.close()


def test_browser_instructor_feedback_shows_no_hidden_test(browser, instructor_course) -> None:
    course, base, token = instructor_course
    grade_the_written_answers(course)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "lecturelib.course", "feedback", PILOT], cwd=course.root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wrote 3 feedback pages in feedback/ (no hidden test shown)" in done.stdout
    pages = sorted(course.feedback.glob(f"*/{PILOT}/*.html"))
    assert pages
    secret = hidden_lines(course, PILOT)
    assert secret
    page = browser.new_page(**PAGE)
    try:
        for html in pages:
            page.goto(html.as_uri())
            page.wait_for_load_state()
            page.wait_for_function("() => document.querySelectorAll('.MathJax, .MathJax_Display').length > 0",
                                   timeout=60_000)  # formulas typeset from disk: feedback/mathjax/, no CDN
            shown = _plain(page.inner_text("body"))
            assert not [line for line in secret if line in shown]
            assert "For graders only" not in shown
            shot(page, f"instructor-3-feedback-{html.parent.parent.name}")
    finally:
        page.close()


def test_browser_instructor_pages_run_no_student_script(browser, instructor_course) -> None:
    """A hostile written answer and hostile outputs (issue 29, item 2), opened where instructors and students read
    them: Formgrader's manual grading page and the feedback page. The markup is there, shown as text; none runs."""
    course, base, token = instructor_course
    from nbgrader.api import Gradebook

    (master,) = course.source_notebooks(PILOT)
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        submission_id = gb.find_submission_notebook(master.stem, PILOT, "blank").id
    if not list(course.feedback.glob(f"blank/{PILOT}/*.html")):
        grade_the_written_answers(course)
        env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
        subprocess.run([sys.executable, "-m", "lecturelib.course", "feedback", PILOT], cwd=course.root, env=env,
                       capture_output=True, text=True, timeout=300)
    (feedback_page,) = course.feedback.glob(f"blank/{PILOT}/*.html")
    page = instructor_page(browser, token)
    try:
        for name, url in (("formgrader", f"{base}/formgrader/submissions/{submission_id}/"),
                          ("feedback", feedback_page.as_uri())):
            page.goto(url)
            page.wait_for_load_state("load")
            page.get_by_text("My answer").first.wait_for(timeout=60_000)
            page.wait_for_timeout(2000)  # time for an image's onerror, a script, an iframe to run
            shot(page, f"instructor-4-hostile-{name}")
            assert page.evaluate(f"() => window.{XSS} === undefined"), (name, page.evaluate(f"() => window.{XSS}"))
            text = page.inner_text("body")
            assert "onerror=" in text, name  # the markup reached the page, as text
            assert ("hostile output" if name == "formgrader" else "output not shown in feedback") in text, name
            scripts = page.evaluate(f"() => [...document.querySelectorAll('script, iframe, object, embed')]"
                                    f".filter(e => e.outerHTML.includes('{XSS}')).length")
            assert scripts == 0, name  # no element of the student's made it into the page as markup
    finally:
        page.close()


HOSTILE_LAST = f"<img src=x onerror=\"window.{XSS}='last name'\">"  # issue 32, item 4: from the roster
HOSTILE_FIRST = f"<script>window.{XSS}='first name'</script><img src=x onerror=\"window.{XSS}='first'\">"


def test_browser_instructor_pages_show_a_hostile_name_as_text(browser, instructor_course) -> None:
    """Issue 32, item 4: a last name of markup imported with the roster by nbgrader's own `db student import`
    (stored as inert look-alikes by the course's guard), and a first name of markup written into the gradebook past
    every check (as an older gradebook could hold it), in Formgrader's pages that show names: the submissions list,
    the manual grading page (nbgrader's template prints names unescaped: the course escapes them), the gradebook's
    submissions and the students list. Both show as text; no script runs, no element of theirs is made."""
    course, base, token = instructor_course
    from nbgrader.api import Gradebook

    (master,) = course.source_notebooks(PILOT)
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        submission_id = gb.find_submission_notebook(master.stem, PILOT, "blank").id
    buffer = io.StringIO()
    csv.writer(buffer).writerows([["id", "last_name"], ["blank", HOSTILE_LAST]])
    (course.root / "hostile-roster.csv").write_text(buffer.getvalue())
    done = course.nbgrader("db", "student", "import", "hostile-roster.csv")
    assert done.returncode == 0, done.stderr[-2000:]
    with sqlite3.connect(course.gradebook) as db:
        assert db.execute("select last_name from student where id = 'blank'").fetchone() == (plain_text(HOSTILE_LAST),)
        db.execute("update student set first_name = ? where id = 'blank'", (HOSTILE_FIRST,))
    page = instructor_page(browser, token)
    try:
        for name, url in (("submissions", f"{base}/formgrader/manage_submissions/{PILOT}"),
                          ("manual-grading", f"{base}/formgrader/submissions/{submission_id}/"),
                          ("gradebook", f"{base}/formgrader/gradebook/{PILOT}/{master.stem}"),
                          ("students", f"{base}/formgrader/manage_students")):
            page.goto(url)
            page.wait_for_load_state("load")
            page.wait_for_function(f"() => document.body.textContent.includes(\"{XSS}='first name'\")", timeout=60_000)
            page.wait_for_timeout(2000)  # time for an image's onerror or a script to run
            shot(page, f"instructor-5-hostile-name-{name}")
            assert page.evaluate(f"() => window.{XSS} === undefined"), (name, page.evaluate(f"() => window.{XSS}"))
            text = page.evaluate("() => document.body.textContent")
            assert HOSTILE_FIRST in text and plain_text(HOSTILE_LAST) in text, name  # the names, as text
            made = page.evaluate(f"() => [...document.querySelectorAll('script, img, iframe')]"
                                 f".filter(e => e.outerHTML.includes('{XSS}')).length")
            assert made == 0, name
    finally:
        page.close()
        with sqlite3.connect(course.gradebook) as db:
            db.execute("update student set first_name = 'Bo', last_name = 'Lank' where id = 'blank'")


def test_browser_instructor_exports_grades_for_canvas(instructor_course) -> None:
    """After manual grading: `course grades` writes Canvas's layout into exports/, the late submission marked."""
    course, _, _ = instructor_course
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run([sys.executable, "-m", "lecturelib.course", "grades"], cwd=course.root, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (course.exports / "canvas-grades.csv").read_text().splitlines()
    assert lines[0].startswith("Student,ID,SIS User ID,SIS Login ID,Section,") and lines[0].endswith(",Notes")
    assert lines[1].startswith("    Points Possible,,,,,")
    rows = {line.split('",')[0].strip('"'): line for line in lines[2:]}
    assert sorted(rows) == ["Lank, Bo", "Lee, Ann", "Ved, Sol"]
    assert f"{PILOT}: late by 1 h 5 min" in rows["Lee, Ann"] and "late" not in rows["Ved, Sol"]
