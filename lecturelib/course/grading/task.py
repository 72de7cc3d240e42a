"""Grading one submission: a task that carries what it needs, run alike by a local worker and by a Dask worker.

`grade(task, kit)` is the whole of grading one submission and the only code that grades: `autograde` calls it in
threads of its own process (the default: nothing to start) or sends it to Dask workers (`--scheduler`). It needs no
course folder and no shared file system: the Kit carries the course's nbgrader_config.py and the assignment's release
and masters (hidden tests included), the Task the submission's files and the run's limits. In a throwaway folder it
runs nbgrader's preprocessors as the course's config lists them (sanitize; then execute in a sandboxed kernel of its
own, judge and the rest), in a process of its own forked from one that imported them once, and returns the
autograded notebooks with what happened. It writes no gradebook: the preprocessors that do (SaveAutoGrades,
AssignLatePenalties) run in the coordinator, which alone writes the course's gradebook (`save`).

A worker grades only for the course version it runs (a digest of lecturelib and of the release, `course_version`),
and only in the sandbox unless the instructor said --no-sandbox: otherwise it refuses the task, and says why.
"""

from __future__ import annotations

import atexit
import base64
import ctypes
import hashlib
import json
import logging
import multiprocessing
import os
import re
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from nbconvert.exporters import NotebookExporter
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning
from nbgrader.converters import Autograde
import nbformat
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import (
    NbGraderPreprocessor,
    AssignLatePenalties,
    GetGrades,
    OverwriteCells,
    OverwriteKernelspec,
    SaveAutoGrades,
    SaveCells,
)
from traitlets.config import Config as TraitletsConfig
from traitlets.config.loader import PyFileConfigLoader
from traitlets.utils.importstring import import_item

import lecturelib
from lecturelib.course.isolation import sandbox
from lecturelib.course.grading.guard import file_hash, regular_files
from lecturelib.course.layout import Course, find_root, nbgrader_env, nbgrader_meta, read_notebook
from lecturelib.course.grading.execute import SANDBOX_ENV
from lecturelib.course.grading.folders import (PRIVATE_PREFIX, read_log, short_folder, short_multiprocessing_folder,
                                               thread_env)
from lecturelib.runmode import QUICK_ENV

# The preprocessors that write the gradebook run in the coordinator, on the notebook a worker returns; those that
# read it cannot run on a worker, which has none (the course's config uses the release and source/ instead).
WRITES_GRADEBOOK = (SaveAutoGrades, AssignLatePenalties)
READS_GRADEBOOK = (OverwriteCells, OverwriteKernelspec, GetGrades, SaveCells)
# Imported once by the process every grading process is forked from: what nbgrader_config.py and the preprocessors
# need (nbformat's schema alone takes seconds to import), so that no submission pays it.
PRELOAD = ["lecturelib.course.grading.task", "lecturelib.course.grading.autograde",
           "lecturelib.course.release.reference", "lecturelib.course.term.collect", "lecturelib.course.term.feedback",
           "nbclient", "nbgrader.preprocessors"]
LOG_FORMAT = "%(asctime)s [%(name)s | %(levelname)s] %(message)s"


@dataclass(frozen=True)
class Kit:
    """What every grading of one assignment needs, sent once to each worker: the course's nbgrader_config.py, the
    assignment's release and its masters in source/ (hidden tests and data files), and the course version."""

    assignment: str
    version: str  # course_version() of the coordinator's course
    config: bytes  # nbgrader_config.py
    release: dict[str, bytes]  # notebooks/ASSIGNMENT/, by path inside it
    source: dict[str, bytes]  # source/ASSIGNMENT/, by path inside it

    def notebooks(self) -> list[str]:
        """The assignment's notebooks, by name without .ipynb: the release's."""
        return sorted(p[:-len(".ipynb")] for p in self.release if p.endswith(".ipynb") and "/" not in p)


@dataclass(frozen=True)
class Settings:
    """How a run grades: the sandbox (or --no-sandbox), its limits, time limits, threads per kernel."""

    sandboxed: bool = True
    limits: sandbox.Limits = sandbox.Limits()  # cpu_s is set by the worker: timeout_s times its cores
    timeout_s: float = 1800.0  # the whole submission
    cell_timeout_s: int | None = None  # each cell (None: nbgrader_config.py's Execute.timeout)
    threads: dict[str, str] | None = None  # OMP_NUM_THREADS...; None: the worker's cores shared among its slots


@dataclass(frozen=True)
class Task:
    """One submission to grade: who, which assignment, its files as collected, and the run's settings."""

    student: str
    assignment: str
    files: dict[str, bytes]  # submitted/STUDENT/ASSIGNMENT/, by path inside it
    settings: Settings = Settings()


@dataclass
class Result:
    """What grading one submission gave: the autograded folder's files, or why it could not be graded."""

    student: str
    assignment: str
    graded: bool = False
    files: dict[str, bytes] = field(default_factory=dict)  # autograded/STUDENT/ASSIGNMENT/, by path inside it
    notebooks: list[str] = field(default_factory=list)  # the notebooks graded (names without .ipynb)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    refused: str = ""  # the worker would not grade it (another course version, no sandbox): not the submission's fault
    log: str = ""  # what nbgrader's preprocessors and the kernel's supervisor said (bounded)
    timings: dict[str, float] = field(default_factory=dict)  # seconds of each part, as the grading process saw them
    seconds: float = 0.0
    worker: str = ""  # host:pid

    def to_data(self) -> bytes:
        """This Result as JSON (files in base64): what a Dask worker returns, plain data the coordinator checks."""
        fields = asdict(self)
        fields["files"] = {rel: base64.b64encode(data).decode() for rel, data in self.files.items()}
        return json.dumps(fields).encode()

    @classmethod
    def from_data(cls, data: object, task: Task) -> Result:
        """A worker's answer to `task` (`to_data`'s JSON) as a Result; ValueError unless it is exactly that, with
        Result's fields and types, for the task's student and assignment. Nothing of it is ever run or imported."""
        if not isinstance(data, bytes):
            raise ValueError(f"a worker returned {type(data).__name__}, not a result's JSON")
        fields = json.loads(data)
        kinds: dict[str, type | tuple[type, ...]] = {"student": str, "assignment": str, "graded": bool, "files": dict, "notebooks": list, "problems": list,
                 "notes": list, "refused": str, "log": str, "timings": dict, "seconds": (int, float), "worker": str}
        if not isinstance(fields, dict) or set(fields) != set(kinds):
            raise ValueError("a worker returned a result whose fields are not a Result's")
        for name, kind in kinds.items():
            if not isinstance(fields[name], kind):
                raise ValueError(f"a worker returned a result whose {name} is {type(fields[name]).__name__}")
        strings = [*fields["files"], *fields["files"].values(), *fields["notebooks"], *fields["problems"],
                   *fields["notes"], *fields["timings"]]
        if not all(isinstance(x, str) for x in strings) or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in fields["timings"].values()):
            raise ValueError("a worker returned a result with a value of the wrong type")
        if (fields["student"], fields["assignment"]) != (task.student, task.assignment):
            raise ValueError(f"a worker returned the result of {fields['student']}/{fields['assignment']} for "
                             f"{task.student}/{task.assignment}")
        fields["files"] = {rel: base64.b64decode(text, validate=True) for rel, text in fields["files"].items()}
        return cls(**fields)


def course_version(root: Path) -> str:
    """sha256 of lecturelib's files and of the course's release (notebooks/): what a worker must share with the
    coordinator to grade for it (the notebooks import lecturelib; the preprocessors are lecturelib's)."""
    h = hashlib.sha256()
    for label, base in (("lecturelib", Path(lecturelib.__file__).parent), ("notebooks", root / "notebooks")):
        for path in regular_files(base):
            if "__pycache__" not in path.parts:
                h.update(f"{label}/{path.relative_to(base)}\0{file_hash(path)}\0".encode())
    return h.hexdigest()


def folder_files(folder: Path) -> dict[str, bytes]:
    """The regular files under `folder` (never through a link), by path inside it."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in regular_files(folder) if "__pycache__" not in p.parts}


def make_kit(root: Path, assignment: str, version: str) -> Kit:
    """The Kit of one assignment of the course at `root`."""
    return Kit(assignment, version, (root / "nbgrader_config.py").read_bytes(),
               folder_files(root / "notebooks" / assignment), folder_files(root / "source" / assignment))


def load_config(folder: Path) -> TraitletsConfig:
    """The course's nbgrader_config.py in `folder`, loaded as nbgrader loads it (its paths are under `folder`)."""
    config = PyFileConfigLoader("nbgrader_config.py", path=str(folder)).load_config()
    config.Exporter.default_preprocessors = []  # as nbgrader's converters: only the preprocessors listed run
    return config


class ReleaseKernelspec(NbGraderPreprocessor):
    """nbgrader's OverwriteKernelspec without the gradebook: the kernelspec of the release's notebook (the one
    nbgrader's gradebook holds a copy of), from the worker's throwaway course."""

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        release = Path("course", "notebooks", resources["nbgrader"]["assignment"], f"{resources['nbgrader']['notebook']}.ipynb")
        kernelspec = read_notebook(release).metadata.get("kernelspec") if release.is_file() else None
        if kernelspec:
            nb.metadata["kernelspec"] = kernelspec
        return nb, resources


def preprocessor_lists(config: TraitletsConfig) -> tuple[list[Any], list[Any], list[Any]]:
    """(sanitize, autograde on the worker, autograde in the coordinator): nbgrader's Autograde lists as configured,
    the gradebook writers moved to the coordinator. Raises where a worker's part would read the gradebook."""
    resolve = lambda items: [import_item(p) if isinstance(p, str) else p for p in items]  # noqa: E731
    section = config.Autograde if "Autograde" in config else {}
    sanitize = resolve(section.get("sanitize_preprocessors", Autograde.sanitize_preprocessors.default_value))
    autograde = resolve(section.get("autograde_preprocessors", Autograde.autograde_preprocessors.default_value))
    sanitize = [ReleaseKernelspec if p is OverwriteKernelspec else p for p in sanitize]
    worker = [p for p in autograde if not (isinstance(p, type) and issubclass(p, WRITES_GRADEBOOK))]
    coordinator = [p for p in autograde if isinstance(p, type) and issubclass(p, WRITES_GRADEBOOK)]
    for p in sanitize + worker:
        if isinstance(p, type) and issubclass(p, READS_GRADEBOOK):
            raise RuntimeError(f"nbgrader_config.py grades with {p.__name__}, which reads the gradebook: a grading worker "
                               f"has none (the course's own preprocessors read the release and source/ instead)")
    return sanitize, worker, coordinator


# -- the worker's side: one per process ----------------------------------------------------------------------------

class _Host:
    """This process as a grading worker: its course, private folder, sandbox configurations and grading processes."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.root: Path | None = None
        self.version = ""
        self.private: Path | None = None
        self.sandboxes: dict[tuple[Any, ...], Path] = {}  # (course root, limits, kernel env) -> kernelspec folder
        self.no_sandbox: str | None = None
        self.sandbox_checked = False
        self.count = 0
        self.children: set[Any] = set()  # the grading processes running now
        self.context: Any = None

    def use_course(self, root: Path) -> None:
        with self.lock:
            self.root, self.version = root, course_version(root)

    def folder(self) -> Path:
        """A new private folder for one grading (its throwaway course, TMPDIR, sandbox state), short: kernel sockets."""
        with self.lock:
            if self.private is None:
                self.private = short_folder(f"{PRIVATE_PREFIX}{os.getpid()}-")
                atexit.register(shutil.rmtree, self.private, True)
            self.count += 1
            folder = self.private / f"s{self.count}"
        folder.mkdir()
        return folder

    def sandbox_unavailable(self) -> str | None:
        with self.lock:
            if not self.sandbox_checked:
                self.no_sandbox, self.sandbox_checked = sandbox.unavailable(), True
            return self.no_sandbox

    def kernelspec(self, limits: sandbox.Limits, env: dict[str, str]) -> Path:
        """The folder (JUPYTER_PATH) of the sandbox's kernelspec for these limits and kernel environment, made once."""
        assert self.root is not None
        key = (self.root, limits, tuple(sorted(env.items())))
        with self.lock:
            if key not in self.sandboxes:
                assert self.private is not None
                folder = self.private / f"sandbox{len(self.sandboxes)}"
                config = sandbox.write_config(folder / "config", limits=limits, env=env, hidden=[self.root])
                sandbox.write_kernelspec(folder / "jupyter", config)
                self.sandboxes[key] = folder / "jupyter"
            return self.sandboxes[key]

    def start(self, spec: dict[str, Any]) -> tuple[Any, Any]:
        """Fork a grading process for `spec` from the preloaded server; (process, the end its status arrives on)."""
        with self.lock:
            if self.context is None:
                short_multiprocessing_folder()  # the forkserver's socket: not under a long TMPDIR
                self.context = multiprocessing.get_context("forkserver")
                self.context.set_forkserver_preload(PRELOAD)
            if multiprocessing.current_process().daemon:  # a Dask worker under a nanny: its grading processes die
                multiprocessing.current_process().daemon = False  # with it anyway (PR_SET_PDEATHSIG, below)
            receive, send = self.context.Pipe(duplex=False)
            process = self.context.Process(target=_grading_process, args=(spec, send), name="lecturelib-grading")
            process.start()
            self.children.add(process)
        send.close()
        return process, receive

    def stop_all(self) -> None:
        """Kill every grading process of this process, and so their kernels' sandboxes (the run was interrupted)."""
        with self.lock:
            children = list(self.children)
        for process in children:
            _kill_group(process.pid)

    def release(self) -> None:
        """Remove the private folder (throwaway courses, sandbox configurations) once no grading runs: a run on
        one machine leaves nothing in the temporary folder; the next run here makes a new one."""
        with self.lock:
            if self.children:
                return
            private, self.private, self.sandboxes = self.private, None, {}
        if private is not None:
            shutil.rmtree(private, ignore_errors=True)


_HOST = _Host()


def use_course(root: Path) -> None:
    """Grade for the course at `root` in this process: its version, and the folder its sandboxes hide."""
    _HOST.use_course(root)


def warm() -> None:
    """Start the preloaded server grading processes are forked from (its imports take seconds, once)."""
    process, receive = _HOST.start({"warm": True})
    process.join()
    receive.close()
    with _HOST.lock:
        _HOST.children.discard(process)


def stop_all() -> None:
    """Kill the grading processes running in this process (an interrupted run)."""
    _HOST.stop_all()


def release() -> None:
    """The run in this process ended: remove its private folder."""
    _HOST.release()


def host_version() -> str:
    """The course version this process grades for ('' when it grades for none)."""
    return _HOST.version


def _worker_slots() -> int:
    """Submissions this process grades at once: a Dask worker's threads, else one (the local pool sets threads)."""
    try:
        from distributed import get_worker

        return int(get_worker().state.nthreads)
    except (ImportError, ValueError, AttributeError):
        return 1


def _refusal(task: Task, kit: Kit, where: str) -> str:
    if _HOST.root is None:
        return (f"worker {where} grades for no course: start workers in the course's folder with "
                f"`python -m lecturelib.course worker SCHEDULER` (or `dask worker --preload "
                f"lecturelib.course.grading.worker`)")
    if kit.version != _HOST.version:
        return (f"worker {where} runs another version of the course (lecturelib and release {_HOST.version[:12]}, "
                f"the coordinator's {kit.version[:12]}): bring its checkout and venv up to date and grade again")
    if task.settings.sandboxed:
        reason = _HOST.sandbox_unavailable()
        if reason:
            return (f"worker {where} cannot sandbox the kernels ({reason}): install bubblewrap there, or grade with "
                    f"--no-sandbox")
    return ""


def grade(task: Task, kit: Kit) -> Result:
    """Grade one submission (see the module's docstring); never raises for anything a submission does."""
    start = time.perf_counter()
    where = f"{socket.gethostname()}:{os.getpid()}"
    out = Result(task.student, task.assignment, worker=where)
    out.refused = _refusal(task, kit, where)
    if out.refused:
        out.problems.append(f"could not be graded: {out.refused}")
        return out
    settings = task.settings
    folder = _HOST.folder()
    try:
        course = folder / "course"  # the throwaway course: nbgrader_config.py's paths are under it
        for base, files in ((course, {"nbgrader_config.py": kit.config}), (course / "notebooks" / kit.assignment, kit.release),
                            (course / "source" / kit.assignment, kit.source),
                            (folder / "submitted" / task.student / task.assignment, task.files)):
            for rel, data in files.items():
                (base / rel).parent.mkdir(parents=True, exist_ok=True)
                (base / rel).write_bytes(data)
        threads = settings.threads if settings.threads is not None else thread_env(_worker_slots())
        env = {**nbgrader_env(folder), **threads, SANDBOX_ENV: "bwrap" if settings.sandboxed else "none",
               sandbox.STATE_ENV: str(folder / "state")}
        (folder / "state").mkdir()
        if settings.sandboxed:
            limits = settings.limits._replace(cpu_s=int(settings.timeout_s) * (os.cpu_count() or 1))
            kernel_env = {"PYTHONWARNINGS": "ignore", QUICK_ENV: "1", **threads}
            env["JUPYTER_PATH"] = str(_HOST.kernelspec(limits, kernel_env))
        spec = {"folder": str(folder), "student": task.student, "assignment": task.assignment, "env": env,
                "notebooks": kit.notebooks(), "cell_timeout_s": settings.cell_timeout_s, "log": str(folder / "log")}
        status = _run(spec, settings.timeout_s, out)
        if _kill_leftovers(folder / "state"):
            out.problems.append("a process of its sandbox outlived grading (killed)")
        out.log = read_log(folder / "log")
        _read_notes(out)
        if status.get("ok"):
            graded = folder / "autograded" / task.student / task.assignment
            out.graded, out.notebooks, out.files = True, status["notebooks"], folder_files(graded)
        elif "timeout" not in status:
            out.problems.append(f"could not be graded: {status.get('error') or _last_error(out.log)}")
        out.timings.update(status.get("timings", {}))
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the throwaway course, TMPDIR, kernel scratch: always
    out.seconds = time.perf_counter() - start
    out.timings["total"] = out.seconds
    return out


def grade_data(task: Task, kit: Kit) -> bytes:
    """`grade` as a Dask worker runs it: the Result as plain data (`Result.to_data`), never an object to unpickle."""
    return grade(task, kit).to_data()


def _run(spec: dict[str, Any], timeout_s: float, out: Result) -> dict[str, Any]:
    """Run the grading process, wait for its status (at most `timeout_s`), kill it past that or when it is done."""
    process, receive = _HOST.start(spec)
    status: dict[str, Any] = {}
    try:
        if receive.poll(timeout_s):
            try:
                status = receive.recv()
            except (EOFError, OSError):
                status = {}
        else:
            status = {"timeout": True}
            out.problems.append(f"could not be graded: took longer than {timeout_s:.0f} s")
    finally:
        receive.close()
        _kill_group(process.pid)  # done or not: nothing of it stays (its kernel is gone already when it is done)
        process.join()
        with _HOST.lock:
            _HOST.children.discard(process)
    if not status:
        code = process.exitcode
        died = (f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 and
                -code in signal.Signals._value2member_map_ else f"exit status {code}")
        status = {"error": f"its grading process ended without a result ({died})"}
    return status


def _kill_group(pid: int | None) -> None:
    if pid:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _read_notes(out: Result) -> None:
    stopped = re.findall(r"cell (\S+): the grader stopped here: (.*); the cells after it were not run", out.log)
    if stopped:
        out.notes.append(f"stopped at {stopped[0][0]}: {stopped[0][1]}; the cells after it scored 0")
    restored = re.findall(r"cell (\S+) was missing from the submission", out.log)
    if restored:
        out.notes.append(f"restored deleted cells: {', '.join(restored)}")


def _last_error(log: str) -> str:
    """The most telling line of a failed grading: the exception that ended it, else its first ERROR."""
    raised = [ln.strip() for ln in log.splitlines() if re.match(r"\s*[\w.]*(Error|Exception)\b.*:", ln)]
    errors = [ln.split("] ", 1)[-1] for ln in log.splitlines() if "| ERROR]" in ln]
    useful = [e for e in errors if not e.startswith(("There was an error", "Traceback", "Please see"))]
    return (raised[-1:] or useful or ["nbgrader's preprocessors failed"])[0][:200]


def _kill_leftovers(state: Path) -> bool:
    """Kill whatever of a submission's sandboxes still runs after its grading ended (there should be nothing)."""
    pids = [int(p) for line in (state / "pids").read_text().split("\n") if line
            for p in line.split() if p.isdigit() and int(p) > 0] if (state / "pids").exists() else []
    alive = []
    deadline = time.monotonic() + 3  # a kernel ended a moment ago may still be exiting
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
    return b"lecturelib.course.isolation.sandbox" in cmdline or b"bwrap" in cmdline


# -- the grading process ------------------------------------------------------------------------------------------

def _grading_process(spec: dict[str, Any], send: Any) -> None:
    """The grading process, forked from the preloaded server: its own session, a clean environment, its log; runs
    the preprocessors and sends back its status. Dies with the server (and the server with the worker)."""
    if spec.get("warm"):
        os._exit(0)
    os.setsid()  # a process group of its own: killed whole on a timeout, the kernel's supervisor with it
    _die_with_parent()
    os.environ.clear()
    os.environ.update(spec["env"])
    tempfile.tempdir = None  # TMPDIR is this submission's own
    os.chdir(spec["folder"])
    fd = os.open(spec["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    log = logging.getLogger("traitlets")  # what nbgrader's preprocessors and nbclient log to, without an app
    log.handlers[:], log.propagate = [handler], False
    log.setLevel(logging.INFO)
    status: dict[str, Any]
    try:
        status = {"ok": True, **_preprocess(spec, log)}
    except BaseException as e:  # noqa: BLE001 - reported, never raised: the worker grades on
        log.error("There was an error processing assignment: %s\n%s", spec["assignment"], traceback.format_exc())
        status = {"ok": False, "error": f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]}
    try:
        handler.flush()
        send.send(status)
    finally:
        os._exit(0)  # no teardown: everything it made is thrown away with its folder


def _preprocess(spec: dict[str, Any], log: logging.Logger) -> dict[str, Any]:
    """nbgrader's autograde of one submission without its gradebook: for each notebook of the release, the sanitize
    preprocessors, then the autograde ones but those that write the gradebook; files as nbgrader copies them."""
    folder = Path(spec["folder"])
    student, assignment = spec["student"], spec["assignment"]
    timings: dict[str, float] = {}
    start = time.perf_counter()
    config = load_config(folder / "course")
    if spec["cell_timeout_s"] is not None:
        config.Execute.timeout = spec["cell_timeout_s"]
    sanitize, worker, _ = preprocessor_lists(config)
    exporter_class = config.Autograde.get("exporter_class", NotebookExporter) if "Autograde" in config else NotebookExporter
    exporter_class = import_item(exporter_class) if isinstance(exporter_class, str) else exporter_class
    submitted = folder / "submitted" / student / assignment
    graded = folder / "autograded" / student / assignment
    graded.mkdir(parents=True)
    ignore = {".ipynb_checkpoints", "__pycache__", "feedback"}  # nbgrader's CourseDirectory.ignore
    for base in (submitted, folder / "course" / "source" / assignment):  # the submission's files, then the masters'
        for path in regular_files(base):
            rel = path.relative_to(base)
            if path.suffix not in (".ipynb", ".pyc") and not ignore & set(rel.parts):
                (graded / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, graded / rel)
    timings["setup"] = time.perf_counter() - start
    done = []
    for name in spec["notebooks"]:
        path = submitted / f"{name}.ipynb"
        if not path.is_file():
            log.warning("No submitted file: %s", path)
            continue
        for stage, preprocessors, source in (("sanitize", sanitize, path), ("autograde", worker, graded / path.name)):
            stage_start = time.perf_counter()
            log.info("%s %s", "Sanitizing" if stage == "sanitize" else "Autograding", source)
            exporter = exporter_class(config=config)
            for p in preprocessors:
                exporter.register_preprocessor(p)  # each enabled or not as its class and the config say
            resources = {"unique_key": name, "output_files_dir": f"{name}_files",
                         "nbgrader": {"student": student, "assignment": assignment, "notebook": name, "db_url": ""}}
            if stage == "autograde":
                os.environ["NBGRADER_EXECUTION"] = "autograde"  # as nbgrader sets it while it autogrades
            output, _ = exporter.from_filename(str(source), resources=resources)
            (graded / path.name).write_text(output, encoding="utf-8")
            timings[stage] = timings.get(stage, 0.0) + time.perf_counter() - stage_start
        done.append(name)
    return {"notebooks": done, "timings": timings}


_PRCTL: Any = None
try:
    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    pass


def _die_with_parent() -> None:
    """SIGKILL when the server it was forked from dies (the server ends with the worker that started it)."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def worker_resource(version: str) -> str:
    """The Dask resource a worker of this course version offers, one unit per grading slot: tasks ask for it, so
    only workers of the coordinator's version get them."""
    return f"lecturelib-{version[:16]}"


def find_course(start: Path | None = None) -> Path:
    """The course a worker grades for: the one at or above `start` (the current folder)."""
    return find_root(start)


# -- the coordinator's side ------------------------------------------------------------------------------------------

def make_task(course: Course, student: str, assignment: str, settings: Settings) -> Task:
    """The Task of one collected submission (screened: regular files only)."""
    return Task(student, assignment, folder_files(course.submitted / student / assignment), settings)


def _safe_path(base: Path, rel: str) -> Path:
    """`base / rel` when `rel` stays inside `base` (a worker's answer is data, never a path to follow out)."""
    target = base / rel
    if Path(rel).is_absolute() or ".." in Path(rel).parts or not rel:
        raise ValueError(f"a worker returned a file outside the submission's folder: {rel!r}")
    return target


def save(course: Course, result: Result) -> list[str]:
    """Write one graded submission into the course, in the coordinator only: its autograded/ folder (replaced, as
    `nbgrader autograde --force` replaces it) and its scores in the gradebook (the preprocessors of the course's
    config that write it: SaveAutoGrades, AssignLatePenalties), with the submission's timestamp.txt as nbgrader reads
    it. A submission that could not be graded leaves no autograded/ folder (as nbgrader leaves none); one that a
    worker refused or lost is not saved at all: its earlier grades stay until it is graded. Returns notes: a
    timestamp.txt that is no time is not used (the submission then has none), and said so."""
    from lecturelib.course.term import TIMESTAMP, read_time

    dest = course.autograded / result.student / result.assignment
    if dest.is_symlink():
        dest.unlink()
    shutil.rmtree(dest, ignore_errors=True)
    if not result.graded:
        return []
    for rel, data in result.files.items():
        target = _safe_path(dest, rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    db_url = f"sqlite:///{course.gradebook}?timeout=120"
    stamp_file = course.submitted / result.student / result.assignment / TIMESTAMP
    stamp = ""
    if stamp_file.is_file() and not stamp_file.is_symlink():  # written by the student's process in the exchange flow
        with open(stamp_file, "rb") as f:
            stamp = f.read(256).decode("utf-8", errors="replace").strip()
    timestamp = read_time(stamp) if stamp else None
    notes = [f"{TIMESTAMP} read {stamp[:60]!r}, which is no time: graded with no submission time (so "
             "not late): collect it again, or correct timestamp.txt"] if stamp and timestamp is None else []
    with warnings.catch_warnings(), Gradebook(db_url) as gb:
        warnings.simplefilter("ignore", SAWarning)  # nbgrader's own autoflush notices, as in `nbgrader autograde`
        if timestamp:
            gb.update_or_create_submission(result.assignment, result.student, timestamp=timestamp)
        else:
            gb.update_or_create_submission(result.assignment, result.student)
        for notebook in gb.find_assignment(result.assignment).notebooks:  # a notebook not submitted scores 0
            if notebook.name not in result.notebooks:
                for grade in gb.find_submission_notebook(notebook.name, result.assignment, result.student).grades:
                    grade.auto_score, grade.needs_manual_grade = 0, False
                gb.db.commit()
    config = load_config(course.root)
    _, _, coordinator = preprocessor_lists(config)
    for name in result.notebooks:
        exporter = NotebookExporter(config=config)
        for p in coordinator:
            exporter.register_preprocessor(p)
        resources = {"unique_key": name, "output_files_dir": f"{name}_files",
                     "nbgrader": {"student": result.student, "assignment": result.assignment, "notebook": name,
                                  "db_url": db_url}}
        path = dest / f"{name}.ipynb"
        output, _ = exporter.from_filename(str(path), resources=resources)
        path.write_text(str(output), encoding="utf-8")  # the notebook's JSON text
    return notes


def sandbox_unavailable() -> str | None:
    """Why this worker cannot sandbox kernels (None when it can)."""
    return _HOST.sandbox_unavailable()


# -- the coordinator's check of a worker's answer --------------------------------------------------------------------

def answer_cells(nb: NotebookNode) -> dict[str, tuple[str, str]]:
    """grade_id -> (cell type, source) of every answer cell (nbgrader `solution`) of `nb`; graders' reference cells
    (AddReference's) are not answers."""
    from lecturelib.course.release import MARK

    return {meta["grade_id"]: (cell.cell_type, cell.source) for cell in nb.cells
            if not cell.get("metadata", {}).get(MARK) and (meta := nbgrader_meta(cell)).get("solution")
            and meta.get("grade_id")}


def expected_answers(config: TraitletsConfig, task: Task, name: str) -> dict[str, tuple[str, str]]:
    """The answer cells grading must leave in notebook `name` of `task`'s submission: its own, after the course's
    sanitize preprocessors (duplicates, restored cells) and, where the course cleans them (SanitizeNotebook), with
    Markdown made inert as grading makes it. Reads the release that `config`'s paths name (the coordinator's)."""
    from lecturelib.course.grading.preprocessors import SanitizeNotebook

    sanitize, worker, _ = preprocessor_lists(config)
    nb = nbformat.reads(task.files[f"{name}.ipynb"].decode("utf-8"), as_version=4)
    resources = {"unique_key": name, "nbgrader": {"student": task.student, "assignment": task.assignment,
                                                  "notebook": name, "db_url": ""}}
    exporter = NotebookExporter(config=config)
    for p in [p for p in sanitize if p is not ReleaseKernelspec] + [p for p in worker if p is SanitizeNotebook]:
        exporter.register_preprocessor(p)
    nb, _ = exporter.from_notebook_node(nb, resources=resources)
    return answer_cells(nbformat.reads(nb, as_version=4))


def not_the_submission(task: Task, result: Result, config: TraitletsConfig, release: list[str]) -> str:
    """Why a worker's `result` is not the grading of `task`'s submission ('' when it is): it must grade exactly the
    submitted notebooks of the `release`'s, and return in each the answer cells that the submission holds."""
    if not result.graded:
        return ""
    submitted = sorted(n for n in release if f"{n}.ipynb" in task.files)
    if sorted(result.notebooks) != submitted or sorted(p for p in result.files if p.endswith(".ipynb")) != \
            [f"{n}.ipynb" for n in submitted]:
        return f"it returned notebooks {sorted(result.notebooks)} for the submitted {submitted}"
    for name in submitted:
        try:
            got = answer_cells(nbformat.reads(result.files[f"{name}.ipynb"].decode("utf-8"), as_version=4))
        except Exception as e:  # noqa: BLE001 - whatever a worker sends is data: an unreadable notebook is refused
            return f"its {name}.ipynb is not a notebook ({type(e).__name__})"
        expected = expected_answers(config, task, name)
        differ = sorted(g for g in expected.keys() | got.keys() if expected.get(g) != got.get(g))
        if differ:
            return f"the answer cells {', '.join(differ[:3])} of its {name}.ipynb are not the submission's"
    return ""
