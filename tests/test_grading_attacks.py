"""The second red team's attacks (issue 29), replayed on the one-exercise toy course: each does no harm now.

One autograde run grades an honest student among the attackers, with a 60-character TMPDIR (kernel sockets
would not fit in it) and two workers: an escape to host root through /proc/sys, stored XSS in outputs and
Markdown, hidden inputs carried into feedback, the grader's own descriptors, floods through every message
type, and links, pipes and devices in submitted/. Separate runs: output floods under CPU load; the exchange's
collect and the LMS download collector, which grade nothing.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode

from lecturelib.course.isolation import sandbox
from lecturelib.course.isolation.audit import audit
from lecturelib.course.grading.autograde import Report, autograde
from lecturelib.course.release.build import build
from lecturelib.course.term.collect import collect_downloads
from lecturelib.course.term.feedback import _plain, feedback, hidden_inputs, hidden_lines, leak
from lecturelib.course.layout import Course, is_test_cell, nbgrader_meta, read_notebook
from test_course_build import toy, toy_course

ASSIGNMENT = "01_toy"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
HIDDEN = "expect_count(double(7919), 15838)  # 2*7919"  # 7919: an input no page may show
RIGHT = "def double(x):\n    return 2 * x"
NO_SANDBOX = sandbox.unavailable()
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None and not os.environ.get("CI"),
                                   reason=f"no sandbox on this machine: {NO_SANDBOX}")
MARK = "ATTACK-RESULT "
BAD_NAME = "<img src=x onerror=alert(1)>"

# 1. From a graded cell: host root through /proc/sys/kernel/core_pattern (written back unchanged, were it writable),
# every other writable file of /proc (but the processes' own) and /sys, namespaces, mounts, capabilities.
ROOT_ESCAPE = RIGHT + '''
import ctypes, json, os
_r = {"uid": os.getuid(), "caps": [l.split()[1] for l in open("/proc/self/status") if l.startswith("CapEff")][0]}
_pattern = open("/proc/sys/kernel/core_pattern").read()
try:
    with open("/proc/sys/kernel/core_pattern", "w") as _f:
        _f.write(_pattern)
    _r["core_pattern"] = "written"
except OSError as _e:
    _r["core_pattern"] = _e.strerror
_r["writable"] = []
for _top in ("/proc", "/sys"):
    for _folder, _subs, _names in os.walk(_top):
        _subs[:] = [s for s in _subs if not s.isdigit() and s not in ("self", "thread-self")]
        for _name in _names:
            try:
                os.close(os.open(os.path.join(_folder, _name), os.O_WRONLY | os.O_NONBLOCK))
                _r["writable"].append(os.path.join(_folder, _name))
            except OSError:
                pass
_libc = ctypes.CDLL(None, use_errno=True)
_r["unshare"] = _libc.unshare(0x10000000)
_r["mount"] = _libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
print("ATTACK-RESULT " + json.dumps(_r))
'''

# 2. Stored XSS: outputs of every active kind, and the student's own Markdown and raw cells.
XSS_OUTPUT = RIGHT + '''
from IPython.display import HTML, Javascript, Markdown, display
display(HTML("<img src=x onerror=window.__xss=1><script>window.__xss=2</script><b onclick=x>bold</b>"))
display(Javascript("window.__xss = 3"))
display(Markdown("[click](javascript:window.__xss=4)"))
display({"application/vnd.jupyter.widget-view+json": {"model_id": "forged", "version_major": 2, "version_minor": 0},
         "text/plain": "widget"}, raw=True)
display({"image/png": "iVBORw0KGgo=", "text/plain": "img"}, raw=True,
        metadata={"image/png": {"width": "1 onerror=window.__xss=5"}})
display({"image/svg+xml": "<svg onload=window.__xss=6></svg>"}, raw=True)
'''
XSS_MARKDOWN = "My reflection <img src=x onerror=window.__xss=7> and <script>window.__xss=8</script> [link](javascript:alert(9))"
XSS_RAW = "<script>window.__xss=10</script>"
FORGED_WIDGETS = {"application/vnd.jupyter.widget-state+json": {"version_major": 2, "version_minor": 0, "state": {
    "forged": {"model_name": "EvilModel", "model_module": "evil-widgets", "model_module_version": "1.0.0", "state": {}}}}}

# 4. Hidden inputs carried out: a pre_run_cell hook echoes every cell (the redacted test cell holds double(7919));
# the answer records its arguments; a cell after the test cell prints both.
LEAK_HOOK = '''
_seen, _args = [], []
get_ipython().events.register("pre_run_cell", lambda info: _seen.append(info.raw_cell))
def double(x):
    _args.append(x)
    return 2 * x
'''
LEAK_LATER = "print('seen:', _seen)\nprint('args:', _args)"
# ... or the verdict itself: an exception class named after the input
LEAK_EXCEPTION = '''
def double(x):
    if x != 2:
        raise type(f"Input_{x}_", (Exception,), {})()
    return 2 * x
'''

# 5. The grader's descriptors: which files the kernel holds, and 64 MiB written straight to fds 1 and 2.
FDS = '''
import json, os
_fds = {}
for _fd in os.listdir("/proc/self/fd"):
    try:
        _fds[_fd] = os.readlink(f"/proc/self/fd/{_fd}")
    except OSError:
        pass
print("FDS-RESULT " + json.dumps(_fds), flush=True)
for _fd in (1, 2):  # ipykernel echoes them to the notebook too (counted, capped), and to the sandbox's pipe
    for _ in range(32):
        os.write(_fd, b"x" * 2**20)
'''

# 7. Output through every message type: display updates, metadata, clear_output storms, comm messages, a traceback.
FLOODS = '''
from IPython.display import display, clear_output
_h = display("start", display_id=True)
for _ in range(64):
    _h.update({"text/plain": "u" * 2**20}, raw=True)
for _ in range(16):
    display({"text/plain": "m"}, raw=True, metadata={"big": "m" * 2**20})
for _ in range(2000):
    clear_output(wait=True)
    print("s" * 4096)
from ipykernel.comm import Comm
_c = Comm(target_name="flood")
for _ in range(32):
    _c.send({"x": "c" * 2**20})
try:
    raise ValueError("t" * 2**23)
except ValueError:
    get_ipython().showtraceback()
'''

# 3. What the kernel can read of files its submission folder held (a link to the master, among others).
READS = RIGHT + '''
import os
for _name in ("notes.txt", "fifo", "device", "scratch.txt"):
    print("ATTACK-RESULT", _name, os.path.exists(_name) and "BEGIN HIDDEN" in open(_name, errors="replace").read(2**20))
'''


def notebook(course: Course, answer: str, *, after: list[NotebookNode] = ()) -> NotebookNode:
    nb = read_notebook(course.release / ASSIGNMENT / NOTEBOOK)
    for cell in nb.cells:
        if nbgrader_meta(cell).get("grade_id") == "ex1_1":
            cell.source = answer
    nb.cells += list(after)
    return nb


def submit(course: Course, student: str, nb: NotebookNode | None) -> Path:
    folder = course.submitted / student / ASSIGNMENT
    folder.mkdir(parents=True, exist_ok=True)
    if nb is not None:
        (folder / NOTEBOOK).write_text(nbformat.writes(nb))
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    course = toy_course(tmp_path_factory.mktemp("toy"), toy(HIDDEN))
    assert build(course) == []
    return course.root


def _copy(built: Path, where: Path) -> Course:
    shutil.copytree(built, where)
    return Course(where)


@pytest.fixture(scope="module")
def graded(built: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Course, Report, str]]:
    course = _copy(built, tmp_path_factory.mktemp("attacks") / "course")
    submit(course, "honest", notebook(course, RIGHT))
    submit(course, "escape", notebook(course, ROOT_ESCAPE + FDS))
    xss = notebook(course, XSS_OUTPUT, after=[nbformat.v4.new_markdown_cell(XSS_MARKDOWN),
                                             nbformat.v4.new_raw_cell(XSS_RAW, metadata={"raw_mimetype": "text/html"})])
    xss.metadata["widgets"] = FORGED_WIDGETS
    submit(course, "xss", xss)
    submit(course, "leak-hook", notebook(course, LEAK_HOOK, after=[nbformat.v4.new_code_cell(LEAK_LATER)]))
    submit(course, "leak-exception", notebook(course, LEAK_EXCEPTION))
    links = submit(course, "links", notebook(course, READS + FLOODS))
    os.symlink(course.source / ASSIGNMENT / NOTEBOOK, links / "notes.txt")
    os.mkfifo(links / "fifo")
    if os.geteuid() == 0:
        os.mknod(links / "device", stat.S_IFCHR | 0o666, os.makedev(1, 5))  # /dev/zero: endless
    (links / "scratch.txt").write_text("my notes")
    (links / "folder").mkdir()
    linked = submit(course, "link-notebook", None)
    os.symlink(course.source / ASSIGNMENT / NOTEBOOK, linked / NOTEBOOK)  # the master as the submission
    os.symlink(course.source, course.submitted / "link-folder")  # submitted/link-folder/01_toy/01_toy.ipynb: the master
    submit(course, BAD_NAME, notebook(course, RIGHT))  # a name that would be markup in Formgrader's pages
    tmpdir = tmp_path_factory.mktemp("t") / ("long-temporary-folder-" + "x" * 60)
    tmpdir = Path(str(tmpdir)[:60])  # 60 characters: a kernel's sockets would not fit under it
    tmpdir.mkdir(parents=True)
    assert len(str(tmpdir)) == 60
    pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    old, environ = os.environ.get("TMPDIR"), os.environ
    try:
        environ["TMPDIR"] = str(tmpdir)
        import tempfile
        tempfile.tempdir = None  # read TMPDIR again
        report = autograde(course, [ASSIGNMENT], workers=2, cell_timeout_s=60)
    finally:
        if old is None:
            environ.pop("TMPDIR", None)
        else:
            environ["TMPDIR"] = old
        tempfile.tempdir = None
    yield course, report, pattern


def outcome(report: Report, student: str):  # noqa: ANN201
    (o,) = [o for o in report.outcomes if o.student == student]
    return o


def graded_nb(course: Course, student: str) -> NotebookNode:
    return read_notebook(course.autograded / student / ASSIGNMENT / NOTEBOOK)


def printed(nb: NotebookNode) -> str:
    return "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))


def result(nb: NotebookNode, mark: str = MARK) -> dict:
    (line,) = [ln for ln in printed(nb).splitlines() if ln.startswith(mark)]
    return json.loads(line[len(mark):])


@needs_sandbox
def test_attacks_honest_student_keeps_full_marks_under_a_long_tmpdir(graded) -> None:
    """Item 10: sockets in a short private folder whatever TMPDIR is; never TCP."""
    course, report, _ = graded
    honest = outcome(report, "honest")
    assert honest.score == 2.0 and not honest.problems and not honest.notes
    logs = "".join(p.read_text(errors="replace") for p in (course.root / "logs" / "autograde").glob("*.log"))
    assert "without encryption" not in logs and "TCP" not in logs


@needs_sandbox
def test_attacks_root_escape_through_proc_fails(graded) -> None:
    """Item 1: from a graded cell, a write to /proc/sys/kernel/core_pattern fails; nothing of /proc or /sys that
    could change the machine is writable; no namespace, no mount, no capability; the kernel is never root outside."""
    course, report, pattern = graded
    assert outcome(report, "escape").score == 2.0
    seen = result(graded_nb(course, "escape"))
    assert seen["core_pattern"] in ("Read-only file system", "Permission denied"), seen["core_pattern"]
    assert seen["writable"] == [] and seen["unshare"] == -1 and seen["mount"] == -1 and seen["caps"] == "0" * 16
    assert seen["uid"] == sandbox.kernel_uid() and (os.geteuid() != 0 or seen["uid"] not in (0, os.geteuid()))
    assert Path("/proc/sys/kernel/core_pattern").read_text() == pattern


def rendered(nb: NotebookNode) -> str:
    """The cells of a notebook as nbconvert's classic HTML shows them (Formgrader's and feedback's template), with no
    render-time sanitizing: what grading left is what a browser would get."""
    from nbconvert import HTMLExporter

    return HTMLExporter(template_name="classic").from_notebook_node(nb)[0].split('id="notebook-container"', 1)[1]


@needs_sandbox
def test_attacks_stored_xss_is_inert_in_the_graded_notebook_and_feedback(graded) -> None:
    """Item 2: no active output type, attribute, URL or widget state survives grading; feedback pages neither; audit
    reports the markup."""
    course, report, _ = graded
    assert outcome(report, "xss").score == 2.0
    nb = graded_nb(course, "xss")
    assert active_markup(rendered(nb)) == [], active_markup(rendered(nb))
    hostile = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(XSS_MARKDOWN)])
    assert active_markup(rendered(hostile))  # the same Markdown, not cleaned, would run
    text = nbformat.writes(nb)
    assert "bold" in text and "My reflection" in text and "widgets" not in nb.metadata  # passive content stays
    kinds = {mime for c in nb.cells for o in c.get("outputs", []) for mime in o.get("data", {})}
    assert kinds <= {"text/plain", "text/html", "text/markdown", "image/png"}, kinds  # no JavaScript, widget, SVG with script
    assert feedback(course, [ASSIGNMENT]) == []
    (page,) = (course.feedback / "xss" / ASSIGNMENT).glob("*.html")
    assert active_markup(page.read_text().split('id="notebook-container"', 1)[1]) == []
    findings = {f.what for f in audit(course, [ASSIGNMENT]) if f.student == "xss"}
    assert any("markdown with markup that could run script" in w for w in findings), findings
    assert any("raw with markup" in w for w in findings), findings
    assert any("sends script to the browser" in w for w in findings), findings


@needs_sandbox
def test_attacks_hidden_inputs_never_reach_feedback(graded) -> None:
    """Item 4: a pre_run_cell hook, recorded arguments, exception and value classes named after the input: the
    graded notebook may show them to the instructor; the student's feedback shows none, and says so."""
    course, report, _ = graded
    assert outcome(report, "leak-hook").score == 2.0 and outcome(report, "leak-exception").score == 0.0
    assert "7919" in printed(graded_nb(course, "leak-hook"))  # the attack worked in the kernel
    verdict = [o for c in graded_nb(course, "leak-exception").cells if is_test_cell(c) for o in c.outputs][0]
    assert "7919" not in json.dumps(verdict) and "an exception of its own class" in json.dumps(verdict), verdict
    assert hidden_inputs(course, ASSIGNMENT) == [("7919",)]
    assert feedback(course, [ASSIGNMENT]) == []
    for student in ("leak-hook", "leak-exception"):
        (page,) = (course.feedback / student / ASSIGNMENT).glob("*.html")
        text = page.read_text()
        assert "7919" not in _plain(text), student
    hook_page = next((course.feedback / "leak-hook" / ASSIGNMENT).glob("*.html")).read_text()
    assert "output not shown in feedback" in hook_page and "ex1_1_test: all 2 checks passed" in _plain(hook_page)


@needs_sandbox
def test_attacks_leak_check_finds_hidden_inputs_in_any_form(graded) -> None:
    """Item 4, the second line: the check reads what cells printed for the hidden inputs themselves, in any spelling
    (a list, a class name, a bare number); the honest page passes."""
    course, _, _ = graded
    (page,) = (course.feedback / "honest" / ASSIGNMENT).glob("*.html")
    honest, inputs = page.read_text(), hidden_inputs(course, ASSIGNMENT)
    assert leak(honest, hidden_lines(course, ASSIGNMENT), inputs) == ""
    for printed_text in ("args: [2, 7919]", "Input_7919_", "seen: ['expect(double(7919))']"):
        forged = honest.replace('<div class="output_area">', f'<div class="output_area"><pre>{printed_text}</pre>', 1)
        assert leak(forged, set(), inputs) == "a hidden check's inputs (7919)", printed_text


@needs_sandbox
def test_attacks_kernel_holds_no_descriptor_of_the_grader(graded) -> None:
    """Item 5: the kernel's descriptors are its own (pipes, sockets, /dev/null, its own folders); what it writes to
    fds 1 and 2 goes to a pipe the supervisor drains, keeping 64 KiB of it: the grader's log stays small."""
    course, report, _ = graded
    fds = result(graded_nb(course, "escape"), "FDS-RESULT ")
    files = {t for t in fds.values() if t.startswith("/")}
    assert files <= {"/dev/null", "/dev/urandom", "/dev/ptmx"} | {t for t in files if t.startswith(("/home/student", "/tmp/", "/run/kernel"))}, files
    assert fds["1"].startswith("pipe:") and fds["2"].startswith("pipe:") and fds["0"] == "/dev/null"
    log = course.root / "logs" / "autograde" / f"escape--{ASSIGNMENT}.log"
    assert log.stat().st_size < 2**20
    assert "more bytes to its stdout and stderr: not kept" in log.read_text(errors="replace")


@needs_sandbox
def test_attacks_every_message_type_counts_against_the_caps(graded) -> None:
    """Item 7: display updates, metadata, clear_output storms, comm messages, tracebacks: a small graded notebook."""
    course, report, _ = graded
    assert outcome(report, "links").score == 2.0  # its answer cell also floods
    path = course.autograded / "links" / ASSIGNMENT / NOTEBOOK
    assert path.stat().st_size < 3 * 2**20
    assert "[output truncated by the grader" in printed(graded_nb(course, "links"))


@needs_sandbox
def test_attacks_links_pipes_and_devices_in_submitted_are_refused(graded) -> None:
    """Item 3: a link to the master, a named pipe, a device, a folder and a stray file: refused with a message, the
    notebook graded; the kernel reads none of them. A notebook or a student folder that is a link is not graded."""
    course, report, _ = graded
    links = outcome(report, "links")
    assert links.score == 2.0
    problems = " ".join(links.problems)
    assert "refused notes.txt: a symbolic link" in problems and "refused fifo: a named pipe" in problems
    assert os.geteuid() != 0 or "refused device: a device file" in problems
    assert "not graded: scratch.txt" in " ".join(links.notes) and "not graded: folder" in " ".join(links.notes)
    assert "ATTACK-RESULT notes.txt False" in printed(graded_nb(course, "links"))
    assert sorted(os.listdir(course.submitted / "links" / ASSIGNMENT)) == [NOTEBOOK]
    linked = outcome(report, "link-notebook")
    assert not linked.score and "refused 01_toy.ipynb: a symbolic link" in " ".join(linked.problems)
    folder = outcome(report, "link-folder")
    assert folder.score is None and "submitted/link-folder is a symbolic link" in " ".join(folder.problems)
    assert not (course.autograded / "link-folder").exists()
    named = outcome(report, BAD_NAME)
    assert named.score is None and "is not a valid student id" in " ".join(named.problems)
    assert sorted(os.listdir(course.submitted)) == sorted(o.student for o in report.outcomes
                                                          if o.student not in (BAD_NAME, "link-folder"))


@needs_sandbox
def test_attacks_output_flood_under_load_keeps_full_marks(built: Path, tmp_path: Path) -> None:
    """Item 11: 64 MiB in 1 MiB lines from the first answer cell while two processes keep the CPU busy: dropped as it
    streams, the cell's result and every later cell stand."""
    course = _copy(built, tmp_path / "course")
    flood = RIGHT + '\nimport sys\nfor _ in range(64):\n    sys.stdout.write("x" * 2**20 + "\\n")\n'
    submit(course, "flood", notebook(course, flood))
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        report = autograde(course, [ASSIGNMENT], cell_timeout_s=60)
    finally:
        for p in busy:
            p.kill()
            p.wait()
    o = outcome(report, "flood")
    assert o.score == 2.0 and not [n for n in o.notes if "stopped" in n], o.notes
    assert (course.autograded / "flood" / ASSIGNMENT / NOTEBOOK).stat().st_size < 3 * 2**20


# ---------------------------------------------------------------------------------------------------------------
# Collecting (item 3: the exchange; item 9: LMS downloads)


def test_exchange_collect_copies_only_the_assignments_own_files(built: Path, tmp_path: Path) -> None:
    """`nbgrader collect`: a link to the master in a submission is refused, the notebook collected; collected files
    are never what a link points to."""
    course = _copy(built, tmp_path / "course")
    inbound = course.root / "exchange" / "resource-accounting" / "inbound" / f"mallory+{ASSIGNMENT}+2025-01-01 00:00:00.000000 UTC+x"
    inbound.mkdir(parents=True)
    (inbound / NOTEBOOK).write_text(nbformat.writes(notebook(course, RIGHT)))
    os.symlink(course.source / ASSIGNMENT / NOTEBOOK, inbound / "notes.txt")
    os.mkfifo(inbound / "fifo")
    named = inbound.with_name(f"<img src=x onerror=alert(1)>+{ASSIGNMENT}+2025-01-01 00:00:00.000000 UTC+y")
    shutil.copytree(inbound, named, symlinks=True, ignore=lambda folder, names: ["fifo"])
    done = course.nbgrader("collect", ASSIGNMENT, timeout_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = course.submitted / "mallory" / ASSIGNMENT
    assert sorted(os.listdir(course.submitted)) == ["mallory"]  # a name with markup is no student (nor a page's text)
    # no timestamp.txt in the exchange: the exchange's own time is written, and collect-notes.txt says so
    assert sorted(os.listdir(folder)) == [NOTEBOOK, "collect-notes.txt", "timestamp.txt"]
    assert not (folder / NOTEBOOK).is_symlink()
    assert "refused notes.txt: a symbolic link" in done.stderr and "refused fifo: a named pipe" in done.stderr
    archive = course.root / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    (archive / f"victim--{NOTEBOOK}").write_text("{}")
    zipped = course.nbgrader("zip_collect", ASSIGNMENT, timeout_s=120)
    assert zipped.returncode != 0 and "python -m lecturelib.course collect" in zipped.stdout + zipped.stderr


def _zip(files: dict[str, bytes], compress: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compress) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buffer.getvalue()


def test_lms_collect_lets_an_upload_speak_only_for_its_student(built: Path, tmp_path: Path) -> None:
    """Item 9: another student's name, `..`, absolute paths, zips in zips, a zip bomb, a broken zip: each refused
    and costs only its own upload; the victim's own submission is collected; nothing lands outside submitted/."""
    course = _copy(built, tmp_path / "course")
    right = nbformat.writes(notebook(course, RIGHT)).encode()
    archive = course.root / "downloaded" / ASSIGNMENT / "archive"
    archive.mkdir(parents=True)
    uploads = {
        "victim--01_toy.ipynb": right,
        "alice--01_toy-1.ipynb": right,  # a resubmission, renamed by the LMS
        "mallory--submission.zip": _zip({f"victim--{NOTEBOOK}": b"{}"}),
        "dotdot--x.zip": _zip({f"../../{NOTEBOOK}": right}),
        "absolute--x.zip": _zip({f"/tmp/{NOTEBOOK}": right}),
        "nested--x.zip": _zip({"inner.zip": _zip({NOTEBOOK: right})}),
        "bomb--x.zip": _zip({NOTEBOOK: b" " * (60 * 2**20)}),
        "broken--x.zip": b"PK\x03\x04 this is no zip",
        "bob--work.zip": _zip({f"work/{NOTEBOOK}": right, "__MACOSX/._x": b""}),
        "mallory--victim--01_toy.ipynb": right,
        "nobody.ipynb": right,
    }
    for name, data in uploads.items():
        (archive / name).write_bytes(data)
    collected, problems = collect_downloads(course, ASSIGNMENT)
    assert sorted(os.listdir(course.submitted)) == ["alice", "bob", "victim"]
    for student in ("alice", "bob", "victim"):
        assert (course.submitted / student / ASSIGNMENT / NOTEBOOK).read_bytes() == right
    text = "\n".join(problems)
    for upload, why in (("mallory--submission.zip", "names another student (victim)"),
                        ("dotdot--x.zip", "a path outside the archive"), ("absolute--x.zip", "a path outside the archive"),
                        ("nested--x.zip", "an archive inside an archive"), ("bomb--x.zip", "a zip bomb"),
                        ("broken--x.zip", "not a readable zip"), ("mallory--victim--01_toy.ipynb", "names another student"),
                        ("nobody.ipynb", "does not name a student")):
        assert re.search(re.escape(upload) + r".*" + re.escape(why), text), (upload, why, text)
    assert not list(tmp_path.glob(NOTEBOOK)) and not Path(f"/tmp/{NOTEBOOK}").exists()
    again, problems = collect_downloads(course, ASSIGNMENT)
    assert again == [] and any("already in submitted/" in p for p in problems)


# ---------------------------------------------------------------------------------------------------------------
# The pieces, without a kernel


def test_hidden_verdicts_never_name_a_students_own_class() -> None:
    """Item 4: a hidden check's verdict names an exception or value type only when it is Python's or a library's."""
    from lecturelib.grading import RECORD_MARK, judge, prepare_test_cell

    _, checks = prepare_test_cell("expect_count(double(2), 4)\n### BEGIN HIDDEN TESTS\nexpect_count(double(7919), 1)\n"
                                  "expect_count(double(3), 6)\n### END HIDDEN TESTS", "t")
    records = [{"cell": "t", "i": 0, "value": 4}, {"cell": "t", "i": 1, "error": "Input_7919_: "},
               {"cell": "t", "i": 2, "error": "expected a count (an integer), got Input_7919_", "plain": True}]
    verdict = judge("t", checks, "".join(RECORD_MARK + json.dumps(r) + "\n" for r in records))
    assert "7919" not in " ".join(verdict.messages)
    assert verdict.messages == ("a hidden check raised an exception of its own class",
                                "a hidden check: expected a count (an integer), got a value of its own class")
    known = [{"cell": "t", "i": 0, "value": 4}, {"cell": "t", "i": 1, "error": "ZeroDivisionError: 7919"},
             {"cell": "t", "i": 2, "error": "expected a count (an integer), got float", "plain": True}]
    verdict = judge("t", checks, "".join(RECORD_MARK + json.dumps(r) + "\n" for r in known))
    assert verdict.messages == ("a hidden check raised ZeroDivisionError",
                                "a hidden check: expected a count (an integer), got float")


@pytest.mark.parametrize("markup", [
    "<img src=x onerror=alert(1)>", "<script>alert(1)</script>", "[x](javascript:alert(1))", "<iframe src=//e></iframe>",
    "<a href='&#106;avascript:alert(1)'>x</a>", "<svg onload=alert(1)>", "<object data=x></object>",
    "<details ontoggle=alert(1) open>x</details>", "$\\href{javascript:alert(1)}{x}$", "<a href=\"java\tscript:x\">y</a>",
    "![i](data:image/svg+xml;base64,PHN2Zz4=)", "<math><mtext><img src=x onerror=alert(1)></mtext></math>",
])
def test_sanitize_makes_student_markdown_inert(markup: str) -> None:
    from lecturelib.course.isolation.sanitize import clean_markdown, risky_markup
    from nbconvert.filters.markdown import markdown2html

    assert risky_markup(markup)
    rendered = markdown2html(clean_markdown("Before. " + markup))
    assert active_markup(rendered) == [] and "\\href" not in rendered, rendered


def active_markup(html: str) -> list[str]:
    """Elements and attributes of `html` (as a browser parses it) that could run script."""
    from html.parser import HTMLParser

    found = []

    class Parser(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            if tag in ("script", "iframe", "object", "embed", "svg", "math", "style", "frame", "base", "form"):
                found.append(f"<{tag}>")
            for name, value in attrs:
                if name.startswith("on") or re.match(r"\s*(javascript|vbscript|data:text)", value or "", re.IGNORECASE):
                    found.append(f"{tag} {name}={value}")

    Parser().feed(html)
    return found


def test_sanitize_keeps_honest_markdown_and_outputs() -> None:
    from nbformat.notebooknode import from_dict

    from lecturelib.course.isolation.sanitize import clean_markdown, clean_output

    honest = ("## My answer: `x` and ü?/\n\n*It* costs $O(n^2)$ FLOPs, `a < b`, [docs](https://pytorch.org), [up](#top)\n\n"
              "| a | b |\n|---|---|\n| 1 | 2 |\n\n<details><summary>hint</summary>x</details>")
    assert clean_markdown(honest) == honest
    out = from_dict({"output_type": "execute_result", "execution_count": 3, "metadata": {"image/png": {"width": 300}},
                     "data": {"text/plain": "df", "image/png": "iVBORw0KGgo=",
                              "text/html": "<table class=\"dataframe\"><tr><td>1</td></tr></table>"}})
    cleaned = clean_output(out)
    assert cleaned.data["image/png"] == "iVBORw0KGgo=" and cleaned.metadata == {"image/png": {"width": 300}}
    assert "<td>1</td>" in cleaned.data["text/html"] and cleaned.execution_count == 3


@pytest.mark.parametrize("svg", [
    '<svg xmlns="http://www.w3.org/2000/svg"><a href="&#106;avascript:alert(1)"><text y="9">x</text></a></svg>',
    '<svg><a xlink:href="&#x6A;&#x61;vascript:alert(1)"><text>x</text></a></svg>',
    '<svg><a><animate attributeName="href" values="jav&#9;ascript:alert(1)"/><text>x</text></a></svg>',
    '<!DOCTYPE svg [<!ENTITY j "javascript:">]><svg><a href="&j;alert(1)"><text>x</text></a></svg>',
    '<svg><a href="https://evil.example/"><text>x</text></a></svg>',  # a link out: no navigation from a grade page
])
def test_sanitize_and_audit_see_through_entity_encoded_svg_links(svg: str) -> None:
    """Issue 32 §5: an SVG output whose link is `&#106;avascript:` (entity-encoded) or otherwise leaves the picture is
    dropped at grading time, with the note, and `audit` reports it; a matplotlib SVG (glyphs by `#` reference) stays."""
    import matplotlib.pyplot as plt
    from nbformat.notebooknode import from_dict

    from lecturelib.course.isolation.audit import markup_findings
    from lecturelib.course.isolation.sanitize import DROPPED_NOTE, clean_output

    out = from_dict({"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": svg}})
    assert clean_output(out).data == {"text/plain": DROPPED_NOTE.format(types="image/svg+xml")}
    cell = from_dict({"cell_type": "code", "source": "show()", "metadata": {}, "outputs": [out]})
    assert markup_findings(cell, set()) == ["a saved output that could run script in a browser (HTML)"]
    figure, text = plt.figure(figsize=(1, 1)), io.StringIO()
    figure.gca().plot([0, 1])
    figure.savefig(text, format="svg")
    plt.close(figure)
    honest = from_dict({"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": text.getvalue()}})
    assert clean_output(honest).data == {"image/svg+xml": text.getvalue()}


def test_logs_are_read_bounded(tmp_path: Path) -> None:
    """Item 5: a sparse 4 GiB log is read as its first and last 2 MiB, in well under a second."""
    from lecturelib.course.grading.folders import read_log

    log = tmp_path / "sparse.log"
    with open(log, "wb") as f:
        f.write(b"first line\n")
        f.truncate(4 * 2**30)
        f.seek(4 * 2**30 - len(b"last line\n"))
        f.write(b"last line\n")
    text = read_log(log)
    assert text.startswith("first line") and text.endswith("last line\n") and len(text) < 5 * 2**20


def test_message_size_counts_every_part() -> None:
    """Item 7: content, metadata and buffers, nested as deep as a kernel likes, without recursion."""
    from lecturelib.course.grading.execute import message_bytes

    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    msg = {"content": {"data": {"text/plain": "x" * 1000}, "deep": deep}, "metadata": {"m": "y" * 500},
           "buffers": [b"z" * 300]}
    assert 1800 < message_bytes(msg) < 1800 + 2 * 100_000 + 100


def test_hidden_lines_read_a_less_than_sign_in_code_as_code(tmp_path: Path) -> None:
    """Source is not HTML: a `<` in a visible check must not hide what follows it, or a hidden line that repeats that
    visible line would count as a secret (and every honest page as a leak)."""
    visible = "expect_bool(bool(torch.where(j < k, a, b).sum() > 0), True)"
    master = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"{visible}\n### BEGIN HIDDEN TESTS\n{visible}\nexpect_count(int((x < 7919).sum()) + offset, 12)\n"
        "### END HIDDEN TESTS", metadata={"nbgrader": {"grade": True, "grade_id": "t", "locked": True, "points": 1,
                                                       "solution": False, "schema_version": 3}})])
    released = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(visible)])
    for folder, nb in (("source", master), ("notebooks", released)):
        (tmp_path / folder / "A").mkdir(parents=True)
        nbformat.write(nb, tmp_path / folder / "A" / "A.ipynb")
    (tmp_path / "nbgrader_config.py").write_text("")
    secret = hidden_lines(Course(tmp_path), "A")
    assert secret == {"expect_count(int((x < 7919).sum()) + offset, 12)"}  # the repeated visible line is public
    page = "<pre>expect_bool(bool(torch.where(j &lt; k, a, b).sum() &gt; 0), True)</pre>"
    assert leak(page, secret, []) == ""
    shown = "<span>expect_count(int((x</span> &lt; 7919).sum()) + offset, 12)"
    assert leak(shown, secret, []).startswith("a hidden test line")
