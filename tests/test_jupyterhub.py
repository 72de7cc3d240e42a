"""A class on JupyterHub, end to end (`make hub`, jupyterhub/; README, "Running the course on JupyterHub").

The test makes an instructor's account whose checkout (the course's files, a one-exercise assignment in source/,
the roster) lives in its home, then runs `make hub` there as root: JupyterHub on 127.0.0.1 with the roster's two
students as accounts of their own. The instructor releases the assignment; each student logs in through the hub's
REST API with the password `make hub` printed, starts a server, fetches, answers (ann the solution, after first
submitting the untouched notebook; bob nothing) and submits; the instructor collects, autogrades in the sandbox,
writes and releases feedback and exports the Canvas grades, each with the README's command, as the instructor's
account; each student fetches their own feedback. Around it: who may log in, what each server shows (the student
view, the instructor's Formgrader), and what a student's kernel may not read (the exchange's inbound/ and feedback/,
the other's submission, the course root, the other's home). Accounts, servers and folders are removed afterwards.
"""

from __future__ import annotations

import csv
import html
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
import requests
from nbformat.notebooknode import NotebookNode

from lecturelib.course.layout import fill_answers, read_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "jupyterhub"))
import classhub  # noqa: E402 - jupyterhub/classhub.py: make hub's own code (its venv clone makes the checkout's)

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("useradd") is None or shutil.which("userdel") is None,
                                reason="a hub with system accounts needs root and useradd/userdel (CI runs as root)")

COMMENT = "lecturelib hub test"  # the instructor's account this test makes (make hub's students carry classhub.COMMENT)
INSTRUCTOR, ANN, BOB = "llhub-prof", "llhub-ann", "llhub-bob"
STUDENTS = (ANN, BOB)
ASSIGNMENT = "hub_toy"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
HIDDEN_INPUT, HIDDEN_EXPECTED = "7919", "95028"  # the hidden check: matmul_flops(7919, 2, 3) == 2*7919*2*3
POINTS = 2.0
LMS_IDS = {ANN: "501", BOB: "502"}
COURSE_ID = classhub.read_course_id(ROOT)
STEP_S = 240  # one command or one server start, at most (a loaded 2-core machine)


def toy_master() -> NotebookNode:
    """One exercise of the course's kind, with a visible and a hidden check."""
    def cell(kind: str, source: str, gid: str, **meta: object) -> NotebookNode:
        nbgrader = {"grade": False, "solution": False, "locked": True, "grade_id": gid, "schema_version": 3, **meta}
        make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
        return make(source, metadata={"nbgrader": nbgrader})
    return nbformat.v4.new_notebook(cells=[
        cell("markdown", "# Matmul FLOPs on the hub", "intro"),
        cell("code", "from lecturelib.grading import expect_count", "setup"),
        cell("code", "def matmul_flops(m, k, n):\n    ### BEGIN SOLUTION\n    return 2 * m * k * n\n    ### END SOLUTION",
             "hub_1", solution=True, locked=False),
        cell("code", "expect_count(matmul_flops(3, 5, 7), 210)  # 2*3*5*7\n### BEGIN HIDDEN TESTS\n"
             f"expect_count(matmul_flops({HIDDEN_INPUT}, 2, 3), {HIDDEN_EXPECTED})  # 2*7919*2*3\n### END HIDDEN TESTS",
             "hub_1_test", grade=True, points=POINTS),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


# ---------------------------------------------------------------------------------------------------------
# accounts, processes and ports of this test


def _account(name: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        return None


def remove_accounts() -> None:
    """Remove the accounts this test (or `make hub` for it) made, their homes and groups, earlier runs' too."""
    for name in (INSTRUCTOR, *STUDENTS):
        entry = _account(name)
        if entry is not None and entry.pw_gecos in (COMMENT, classhub.COMMENT):
            kill_processes_of({entry.pw_uid})
            subprocess.run(["userdel", "--remove", name], capture_output=True)


def processes_of(uids: set[int]) -> list[int]:
    """Processes running as one of `uids` (the test's accounts: every one of them this test started)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        uid = re.search(r"^Uid:\s+(\d+)", status, re.M)
        if uid and int(uid.group(1)) in uids:
            found.append(int(pid))
    return found


def kill_processes_of(uids: set[int]) -> None:
    for pid in processes_of(uids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def free_ports(n: int) -> list[int]:
    """`n` ports free on 127.0.0.1 right now."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def in_group(pgid: int) -> list[int]:
    """Processes of the process group `pgid` (make hub and what it started in its session)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:
            found.append(int(pid))
    return found


@dataclass
class Hub:
    """The running class: its address, folders and accounts, and what `make hub` printed."""

    url: str
    base: Path  # everything of this test: the homes and HUB_DIR
    hub_dir: Path
    course: Path  # the instructor's checkout, in the instructor's home
    passwords: dict[str, str]
    log: Path
    tokens: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    def as_instructor(self, *cmd: str) -> subprocess.CompletedProcess[str]:
        """A command in the course root as the instructor's account, as in the instructor's terminal on the hub."""
        started = time.monotonic()
        done = as_instructor(self.course, *cmd)
        self.timings[" ".join(cmd[1:4])] = time.monotonic() - started
        assert done.returncode == 0, f"{' '.join(cmd)}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    def api(self, method: str, path: str, user: str, **kw: object) -> requests.Response:
        """A request to the hub (/hub/api/...) or a user's server (/user/NAME/...) with `user`'s token."""
        headers = {"Authorization": f"token {self.tokens[user]}"}
        return requests.request(method, self.url + path, headers=headers, timeout=STEP_S, **kw)  # type: ignore[arg-type]


def open_python() -> list[str]:
    """A command prefix: what follows runs where every account may run the course's Python.

    The checkout's .venv may run a Python that other accounts may not (pyenv's, under /root, as on the machines this
    course is tested on); `make hub` refuses such a venv, as a real hub's students could not run it. The hub, its
    servers and the instructor's commands then run in a mount namespace of their own whose /root is an open tmpfs
    holding that Python alone: nothing changes outside it, and it goes with its last process."""
    base = subprocess.run([str(ROOT / ".venv" / "bin" / "python"), "-c", "import sys; print(sys.base_prefix)"],
                          capture_output=True, text=True, check=True).stdout.strip()
    base = os.path.realpath(base)
    closed = next((str(p) for p in reversed(Path(base).parents) if not os.stat(p).st_mode & 0o001), None)
    if closed is None:
        return []
    inside = os.path.relpath(base, closed)
    setup = (f'set -e; t=$(mktemp -d); mount --bind {closed} "$t"; mount -t tmpfs -o mode=0755 tmpfs {closed}; '
             f'mkdir -p {base}; mount --bind "$t/{inside}" {base}; umount "$t"; rmdir "$t"; exec "$@"')
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", setup, "sh"]


def as_instructor(course: Path, *cmd: str) -> subprocess.CompletedProcess[str]:
    """`cmd` in the course root as the instructor's account, with the environment of a login shell there."""
    entry = pwd.getpwnam(INSTRUCTOR)
    env = {"HOME": entry.pw_dir, "USER": INSTRUCTOR, "LANG": "C.UTF-8",
           "PATH": f"{course / '.venv' / 'bin'}:/usr/local/bin:/usr/bin:/bin"}
    become = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups", "--"]
    return subprocess.run([*open_python(), *become, *cmd], cwd=course, env=env, capture_output=True, text=True,
                          timeout=STEP_S)


def make_checkout(course: Path, owner: pwd.struct_passwd) -> None:
    """The instructor's checkout: the course's files, the toy assignment as its only source, a roster, and a .venv
    (the repository's, made the checkout's by make hub's own clone: the repository may sit under /root)."""
    course.mkdir()
    for name in ("nbgrader_config.py", "Makefile", "requirements.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, course / name)
    for name in ("lecturelib", "jupyter", "jupyterhub", "student"):
        shutil.copytree(ROOT / name, course / name, ignore=shutil.ignore_patterns("__pycache__", "migrated", "lab"))
    write_notebook(toy_master(), course / "source" / ASSIGNMENT / NOTEBOOK)
    with (course / "roster.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "first_name", "last_name", "email", "lms_user_id"])
        for student, name in zip(STUDENTS, ("Ann", "Bob"), strict=True):
            writer.writerow([student, name, "Hub", f"{student}@example.edu", LMS_IDS[student]])
    for folder, subs, names in os.walk(course):
        for name in [*subs, *names]:
            os.lchown(os.path.join(folder, name), owner.pw_uid, owner.pw_gid)
    os.chown(course, owner.pw_uid, owner.pw_gid)
    os.chmod(course, 0o700)
    classhub.clone_venv(ROOT / ".venv", course / ".venv", course)
    # the release (notebooks/, committed in a real checkout) and the roster in the gradebook, as the instructor
    for cmd in (("generate_assignment", ASSIGNMENT, "--force"), ("db", "student", "import", "roster.csv")):
        done = as_instructor(course, ".venv/bin/nbgrader", *cmd)
        assert done.returncode == 0, f"nbgrader {' '.join(cmd)}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


@pytest.fixture(scope="module")
def hub() -> Iterator[Hub]:
    remove_accounts()
    base = Path(tempfile.mkdtemp(prefix="lecturelib-hub-", dir="/tmp"))
    os.chmod(base, 0o755)  # students reach HUB_DIR through it
    homes, hub_dir = base / "home", base / "hub"
    homes.mkdir(mode=0o755)
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(["useradd", "--create-home", "--base-dir", str(homes), "--user-group", "--shell", "/bin/bash",
                        "--comment", COMMENT, INSTRUCTOR], check=True, capture_output=True)
        owner = pwd.getpwnam(INSTRUCTOR)
        os.chmod(owner.pw_dir, 0o700)
        course = Path(owner.pw_dir) / "course"
        started = time.monotonic()
        make_checkout(course, owner)
        checkout_s = time.monotonic() - started
        port, proxy_api, hub_api = free_ports(3)
        log = base / "make-hub.log"
        started = time.monotonic()
        with log.open("wb") as out:
            # README: `sudo make hub ROSTER=roster.csv` from the instructor's checkout (HUB_ARGS: this test's folders
            # and ports, so that it never meets a real class on this machine)
            proc = subprocess.Popen(
                [*open_python(), "make", "hub", "ROSTER=roster.csv", f"HUB_DIR={hub_dir}", f"HUB_PORT={port}",
                 f"HUB_ARGS=--homes {homes} --proxy-api-port {proxy_api} --hub-api-port {hub_api}"],
                cwd=course, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8", "HOME": "/root"})
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + STEP_S
        while True:
            assert proc.poll() is None, f"make hub ended ({proc.returncode}):\n{log.read_text()[-4000:]}"
            try:
                if requests.get(f"{url}/hub/api/", timeout=5).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            assert time.monotonic() < deadline, f"the hub did not answer in {STEP_S} s:\n{log.read_text()[-4000:]}"
            time.sleep(0.5)
        printed = re.findall(r"^  (?:instructor|student)\s+(\S+)\s+(\S+)$", log.read_text(), re.M)
        the_hub = Hub(url, base, hub_dir, course, dict(printed), log)
        the_hub.timings.update({"checkout and its .venv": checkout_s, "make hub until the hub answers":
                                time.monotonic() - started})
        yield the_hub
    finally:
        try:
            stop_hub(proc)
        finally:
            remove_accounts()
            shutil.rmtree(base, ignore_errors=True)


def stop_hub(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM to make hub's process group (JupyterHub then stops every server and its proxy); whatever is left of
    the group or of the test's accounts after STEP_S is killed, and named: Ctrl-C must leave nothing behind (it
    takes 5-60 s, as loaded as this machine is)."""
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    uids = {e.pw_uid for e in map(_account, (INSTRUCTOR, *STUDENTS)) if e is not None}
    deadline = time.monotonic() + STEP_S
    while (proc.poll() is None or in_group(proc.pid) or processes_of(uids)) and time.monotonic() < deadline:
        time.sleep(0.5)
    left = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:120]
            for pid in {*in_group(proc.pid), *processes_of(uids)} if os.path.exists(f"/proc/{pid}")}
    for pid in in_group(proc.pid):
        os.kill(pid, signal.SIGKILL)
    kill_processes_of(uids)
    proc.wait(timeout=30)
    assert not left, f"still running {STEP_S} s after make hub's SIGTERM (killed now): {left}"


# ---------------------------------------------------------------------------------------------------------
# the class's term: release, log in, fetch, answer, submit, collect, grade, feedback


def log_in(hub: Hub, user: str, password: str) -> requests.Response:
    """A token for `user` from the hub, given their password (the REST API's login: the hub's authenticator decides)."""
    return requests.post(f"{hub.url}/hub/api/users/{user}/tokens", json={
        "auth": {"username": user, "password": password}, "expires_in": 3600, "note": "tests/test_jupyterhub.py"},
        timeout=STEP_S)


def start_servers(hub: Hub, users: tuple[str, ...]) -> None:
    """Ask the hub for each user's server (it starts them while the caller goes on)."""
    for user in users:
        assert hub.api("POST", f"/hub/api/users/{user}/server", user).status_code in (201, 202)


def wait_for_servers(hub: Hub, users: tuple[str, ...]) -> None:
    """Wait until each user's server is ready."""
    deadline = time.monotonic() + STEP_S
    waiting = set(users)
    while waiting:
        for user in sorted(waiting):
            model = hub.api("GET", f"/hub/api/users/{user}", user).json()
            server = model.get("servers", {}).get("", {})
            if server.get("ready"):
                waiting.discard(user)
            elif not server.get("pending"):
                raise AssertionError(f"{user}'s server stopped: {model}\n{hub.log.read_text()[-4000:]}")
        assert time.monotonic() < deadline, f"servers not ready in {STEP_S} s: {waiting}\n{hub.log.read_text()[-4000:]}"
        time.sleep(0.5)


def assignment_action(hub: Hub, user: str, action: str) -> dict:
    """The student's Assignment List: POST /user/NAME/assignments/ACTION (fetch, submit, fetch_feedback)."""
    done = hub.api("POST", f"/user/{user}/assignments/{action}", user,
                   json={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT})
    assert done.status_code == 200, done.text
    answer = done.json()
    assert answer["success"], answer.get("value")
    return answer


def put_notebook(hub: Hub, user: str, nb: NotebookNode) -> None:
    """Save the student's notebook in their copy of the assignment (the Contents API, as JupyterLab saves)."""
    done = hub.api("PUT", f"/user/{user}/api/contents/{ASSIGNMENT}/{NOTEBOOK}", user,
                   json={"type": "notebook", "format": "json", "content": nb})
    assert done.status_code == 200, done.text


def get_notebook(hub: Hub, user: str) -> NotebookNode:
    done = hub.api("GET", f"/user/{user}/api/contents/{ASSIGNMENT}/{NOTEBOOK}", user)
    assert done.status_code == 200, done.text
    return nbformat.from_dict(done.json()["content"])


def run_in_kernel(hub: Hub, user: str, code: str) -> str:
    """Run `code` in a new kernel of the user's server (through the proxy's websocket) and return its stdout."""
    from tornado.httpclient import HTTPRequest
    from tornado.ioloop import IOLoop
    from tornado.websocket import websocket_connect

    kernel = hub.api("POST", f"/user/{user}/api/kernels", user, json={"name": "python3"}).json()["id"]

    async def talk() -> str:
        ws = await websocket_connect(HTTPRequest(
            f"{hub.url.replace('http', 'ws', 1)}/user/{user}/api/kernels/{kernel}/channels",
            headers={"Authorization": f"token {hub.tokens[user]}"}, request_timeout=STEP_S))
        msg_id = uuid.uuid4().hex
        ws.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": user, "session": uuid.uuid4().hex, "msg_type": "execute_request",
                       "version": "5.3", "date": ""},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True}}))
        out, replied, idle = [], False, False
        while not (replied and idle):  # the shell's reply may come before iopub's last output: wait for both
            raw = await ws.read_message()
            assert raw is not None, "the kernel's websocket closed"
            msg = json.loads(raw)
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            if msg["msg_type"] == "stream":
                out.append(msg["content"]["text"])
            elif msg["msg_type"] == "error":
                raise AssertionError("\n".join(msg["content"]["traceback"]))
            elif msg["msg_type"] == "execute_reply":
                replied = True
            elif msg["msg_type"] == "status" and msg["content"].get("execution_state") == "idle":
                idle = True
        ws.close()
        return "".join(out)

    try:
        return IOLoop.current().run_sync(talk, timeout=STEP_S)
    finally:
        hub.api("DELETE", f"/user/{user}/api/kernels/{kernel}", user)


# What a student's kernel tries (after PATHS = {what: ("list" | "read", path)}): who and where it is, which lecturelib
# it has, and what it may not read.
PROBE = """
import importlib.util, json, os, sys
import lecturelib, lecturelib.grading
def reach(path, how):
    try:
        how(path)
        return "read"
    except PermissionError:
        return "refused"
    except FileNotFoundError:
        return "missing"
lecturelib.grading.expect_count(2 * 3 * 5 * 7, 210)
print(json.dumps({
    "uid": os.getuid(), "cwd": os.getcwd(), "python": sys.executable, "lecturelib": lecturelib.__file__,
    "course_module": importlib.util.find_spec("lecturelib.course") is not None,
    "paths": {what: reach(path, os.listdir if how == "list" else lambda p: open(p, "rb").read())
              for what, (how, path) in PATHS.items()},
}))
"""


def probe(hub: Hub, user: str, paths: dict[str, tuple[str, str]]) -> dict:
    code = f"PATHS = {json.dumps(paths)}\n" + PROBE  # JSON of strings is a Python literal
    return json.loads(run_in_kernel(hub, user, code).strip().splitlines()[-1])


@pytest.fixture(scope="module")
def term(hub: Hub) -> dict:
    """The class's assignment from release to feedback; what each step answered, for the tests below."""
    seen: dict = {"timings": hub.timings}
    course = hub.course
    started = time.monotonic()
    seen["logins"] = {}
    for user in (INSTRUCTOR, *STUDENTS):
        answer = log_in(hub, user, hub.passwords.get(user, ""))
        seen["logins"][user] = answer.status_code
        if answer.status_code == 201:
            hub.tokens[user] = answer.json()["token"]
    seen["refused_logins"] = {
        "another's password": log_in(hub, ANN, hub.passwords[BOB]).status_code,
        "no password": log_in(hub, ANN, "").status_code,
        "a wrong password": log_in(hub, BOB, hub.passwords[BOB] + "x").status_code,
        "no such account": log_in(hub, "llhub-nobody", hub.passwords[BOB]).status_code,
        "root": log_in(hub, "root", hub.passwords[BOB]).status_code,
    }
    start_servers(hub, (INSTRUCTOR, *STUDENTS))
    # meanwhile, the instructor releases the assignment
    seen["release"] = hub.as_instructor(".venv/bin/nbgrader", "release_assignment", ASSIGNMENT)
    inbound = hub.hub_dir / "exchange" / COURSE_ID / "inbound"
    seen["inbound_stat"] = os.stat(inbound)
    wait_for_servers(hub, (INSTRUCTOR, *STUDENTS))
    hub.timings["3 logins and servers (the release meanwhile)"] = time.monotonic() - started

    # what each server shows
    page = hub.api("GET", f"/user/{ANN}/lab", ANN).text
    config = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', page, re.S)
    seen["student_page_config"] = json.loads(config.group(1)) if config else {}
    seen["student_formgrader"] = hub.api("GET", f"/user/{ANN}/formgrader", ANN).status_code
    seen["student_at_instructor"] = hub.api("GET", f"/user/{INSTRUCTOR}/formgrader", ANN, allow_redirects=False)
    seen["student_api_at_instructor"] = hub.api("GET", f"/user/{INSTRUCTOR}/api/contents/source", ANN,
                                                allow_redirects=False).status_code
    seen["instructor_formgrader"] = hub.api("GET", f"/user/{INSTRUCTOR}/formgrader", INSTRUCTOR)
    seen["formgrader_assignments"] = hub.api("GET", f"/user/{INSTRUCTOR}/formgrader/api/assignments", INSTRUCTOR).json()
    seen["instructor_root"] = hub.api("GET", f"/user/{INSTRUCTOR}/api/contents/", INSTRUCTOR).json()
    seen["student_root_before"] = hub.api("GET", f"/user/{ANN}/api/contents/", ANN).json()
    seen["kernelspecs"] = hub.api("GET", f"/user/{ANN}/api/kernelspecs", ANN).json()

    # fetch, answer, submit: ann hands in the untouched notebook, then the solution; bob the untouched one
    started = time.monotonic()
    seen["listed"] = hub.api("GET", f"/user/{ANN}/assignments", ANN, params={"course_id": COURSE_ID}).json()
    for user in STUDENTS:
        assignment_action(hub, user, "fetch")
    seen["fetched"] = {user: get_notebook(hub, user) for user in STUDENTS}
    assignment_action(hub, ANN, "submit")
    solved = fill_answers(seen["fetched"][ANN], read_notebook(course / "source" / ASSIGNMENT / NOTEBOOK))
    put_notebook(hub, ANN, solved)
    seen["ann_list"] = assignment_action(hub, ANN, "submit")
    seen["bob_list"] = assignment_action(hub, BOB, "submit")
    hub.timings["fetch and 3 submissions"] = time.monotonic() - started
    seen["submissions"] = sorted(p.name for p in inbound.iterdir())

    # the instructor: collect, autograde (sandboxed), feedback, release it, Canvas export (README's commands)
    seen["collect"] = hub.as_instructor(".venv/bin/nbgrader", "collect", ASSIGNMENT)
    seen["autograde"] = hub.as_instructor(".venv/bin/python", "-m", "lecturelib.course", "autograde", ASSIGNMENT,
                                          "--workers", "2")
    seen["feedback"] = hub.as_instructor(".venv/bin/python", "-m", "lecturelib.course", "feedback", ASSIGNMENT)
    seen["release_feedback"] = hub.as_instructor(".venv/bin/nbgrader", "release_feedback", ASSIGNMENT)
    seen["grades"] = hub.as_instructor(".venv/bin/python", "-m", "lecturelib.course", "grades")
    canvas = course / "exports" / "canvas-grades.csv"
    seen["canvas"] = list(csv.reader(canvas.open())) if canvas.is_file() else []

    # each student fetches their feedback
    started = time.monotonic()
    seen["feedback_pages"] = {}
    for user in STUDENTS:
        assignment_action(hub, user, "fetch_feedback")
        listing = hub.api("GET", f"/user/{user}/api/contents/{ASSIGNMENT}/feedback", user).json()
        pages = {}
        for stamp in listing.get("content") or []:
            for page in hub.api("GET", f"/user/{user}/api/contents/{stamp['path']}", user).json()["content"]:
                pages[page["path"]] = hub.api("GET", f"/user/{user}/api/contents/{page['path']}", user,
                                              params={"format": "text", "type": "file"}).json()["content"]
        seen["feedback_pages"][user] = pages
    hub.timings["2 feedback fetches"] = time.monotonic() - started

    # what bob's kernel may reach: the exchange's listings, ann's submission and feedback by their exact paths
    ann_files = sorted(inbound.glob(f"{ANN}+*/{NOTEBOOK}"))
    feedback_dir = hub.hub_dir / "exchange" / COURSE_ID / "feedback"
    started = time.monotonic()
    seen["probe"] = probe(hub, BOB, {
        "inbound/": ("list", str(inbound)),
        "ann's submission": ("read", str(ann_files[-1])),
        "ann's submission folder": ("list", str(ann_files[-1].parent)),
        "feedback/": ("list", str(feedback_dir)),
        "course root": ("list", str(course)),
        "source/": ("list", str(course / "source")),
        "gradebook": ("read", str(course / "gradebook.db")),
        "ann's home": ("list", pwd.getpwnam(ANN).pw_dir),
        "outbound release": ("read", str(hub.hub_dir / "exchange" / COURSE_ID / "outbound" / ASSIGNMENT / NOTEBOOK)),
    })
    hub.timings["bob's kernel"] = time.monotonic() - started
    print("\n".join(f"{what}: {s:.1f} s" for what, s in hub.timings.items()))
    return seen


# ---------------------------------------------------------------------------------------------------------
# what the term showed


def test_hub_logs_in_the_class_each_with_their_own_password_only(term) -> None:
    assert term["logins"] == {INSTRUCTOR: 201, ANN: 201, BOB: 201}
    assert term["refused_logins"] == {"another's password": 403, "no password": 403, "a wrong password": 403,
                                      "no such account": 403, "root": 403}


def test_hub_student_server_is_the_student_view_in_their_home(term) -> None:
    disabled = term["student_page_config"]["disabledExtensions"]
    assert {"@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment"} <= set(disabled)
    assert "@jupyter/nbgrader:assignment-list" not in disabled
    assert term["student_formgrader"] == 404  # no Formgrader on a student's server
    assert term["student_at_instructor"].status_code == 403  # nor the instructor's, through the hub
    assert term["student_api_at_instructor"] == 403
    assert [e["name"] for e in term["student_root_before"]["content"]] == []  # a new home: nothing of the course
    probe = term["probe"]
    bob = pwd.getpwnam(BOB)
    assert (probe["uid"], probe["cwd"]) == (bob.pw_uid, bob.pw_dir)


def test_hub_student_kernel_is_the_courses_python_with_the_students_lecturelib(hub, term) -> None:
    assert term["kernelspecs"]["default"] == "python3"
    probe = term["probe"]
    assert Path(probe["python"]).parent == hub.hub_dir / "venv" / "bin"
    assert Path(probe["lecturelib"]) == hub.hub_dir / "course" / "lecturelib" / "__init__.py"
    assert probe["course_module"] is False  # the students' course: no grading machinery


def test_hub_instructor_server_has_formgrader_at_the_course_root(term) -> None:
    formgrader = term["instructor_formgrader"]
    assert formgrader.status_code == 200 and "<title>nbgrader formgrade" in formgrader.text
    # Formgrader reads the course's nbgrader_config.py (the server starts in the course root) and sees the release
    assert [(a["name"], a["status"]) for a in term["formgrader_assignments"]] == [(ASSIGNMENT, "released")]
    shown = {e["name"] for e in term["instructor_root"]["content"]}
    assert {"source", "notebooks", "nbgrader_config.py", "gradebook.db"} <= shown


def test_hub_exchange_lets_students_hand_in_but_not_read_each_other(hub, term) -> None:
    instructor = pwd.getpwnam(INSTRUCTOR)
    inbound = term["inbound_stat"]
    assert (oct(inbound.st_mode & 0o7777), inbound.st_uid, inbound.st_gid) == (oct(0o2733), instructor.pw_uid,
                                                                             instructor.pw_gid)
    assert term["probe"]["paths"] == {
        "inbound/": "refused", "ann's submission": "refused", "ann's submission folder": "refused",
        "feedback/": "refused", "course root": "refused", "source/": "refused", "gradebook": "refused",
        "ann's home": "refused", "outbound release": "read"}


def test_hub_resubmission_replaces_the_earlier_one(hub, term) -> None:
    assert [s.split("+")[0] for s in term["submissions"]] == [ANN, ANN, BOB]
    collected = read_notebook(hub.course / "submitted" / ANN / ASSIGNMENT / NOTEBOOK)
    assert "return 2 * m * k * n" in collected.cells[2].source  # the later (solved) one, not the untouched one
    untouched = read_notebook(hub.course / "submitted" / BOB / ASSIGNMENT / NOTEBOOK)
    assert "return 2 * m * k * n" not in untouched.cells[2].source


def test_hub_grades_reach_the_canvas_export(term) -> None:
    header, points, *rows = term["canvas"]
    column = header.index(ASSIGNMENT)
    assert points[column] == f"{POINTS:g}" or float(points[column]) == POINTS
    scores = {row[header.index("SIS User ID")]: (row[header.index("ID")], float(row[column])) for row in rows}
    assert scores == {ANN: (LMS_IDS[ANN], POINTS), BOB: (LMS_IDS[BOB], 0.0)}  # 2 points: the solution; 0: untouched


def text_of(page: str) -> str:
    """What a feedback page shows as text (its code is highlighted token by token)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_hub_each_student_fetches_only_their_own_feedback_without_hidden_inputs(term) -> None:
    pages = term["feedback_pages"]
    assert {user: len(p) for user, p in pages.items()} == {ANN: 1, BOB: 1}
    (ann,), (bob,) = map(text_of, pages[ANN].values()), map(text_of, pages[BOB].values())
    assert "2 * m * k * n" in ann and "2 * m * k * n" not in bob
    assert "NotImplementedError" in bob and "NotImplementedError" not in ann
    for page in (ann, bob):
        assert HIDDEN_INPUT not in page and HIDDEN_EXPECTED not in page and "HIDDEN TESTS" not in page
