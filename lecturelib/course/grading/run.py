"""One autograde run: its lock, its private folders, the copies it keeps, and the repair of a run that was killed.

A run takes a lock (one run at a time), then leaves a state folder in logs/autograde/run/: copies of the
course's files (nbgrader_config.py, source/, notebooks/, lecturelib) and of submitted/ as they were when it
started. A run that ends, even by Ctrl-C, removes it. A state folder found at the next start means that run
was killed: the submissions it had not finished are named, and if it graded with --no-sandbox (its kernels had the
instructor's rights) the course files and submissions it kept are restored (what was there instead is moved aside
to logs/autograde/interrupted-TIME/, nothing is lost). A sandboxed kernel could change neither, so after a sandboxed
run what differs is the instructor's own work since, and stays.
Everything else a run needs (nbgrader's HOME, Jupyter and IPython folders, the sandbox's configuration, each
submission's TMPDIR, kernel sockets and scratch folder) lives in a private folder in the system's temporary
folder, removed when the run ends and, if it was killed, by the next run. Every Unix socket the run makes lives
in a short folder whatever TMPDIR is (`short_folder`: a socket's path has at most 107 bytes): the private folder,
multiprocessing's (its forkserver's listener) and each kernel's (`sandbox.socket_folder`).

What each submission was last graded from stays in logs/autograde/graded.json, written by this process alone:
a digest of everything its grade depends on (`autograde.grading_key`) and of the autograded folder it left. A
submission whose digest and autograded folder are unchanged is not graded again (`unchanged`) unless --force.
Ctrl-C ends a run with `Stopped`: one line that says how many submissions are left, no traceback.
"""

from __future__ import annotations

import fcntl
import filecmp
import hashlib
import json
import os
import shutil
import signal
import stat
import tempfile
import time
from pathlib import Path
from typing import Any

from lecturelib.course.isolation import cgroup, sandbox
from lecturelib.course.layout import Course, nbgrader_env
from lecturelib.course.grading.preprocessors import SANDBOX_ENV

PRIVATE_PREFIX = "lecturelib-autograde-"  # + pid + "-": the run's private folder in the temporary folder
MP_PREFIX = "lecturelib-mp-"  # + pid + "-": multiprocessing's folder of a process whose TMPDIR is too long for sockets
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path holds 108 with the closing NUL)
# Room a private folder leaves under it for the longest socket path made there: a submission's folder, its TMPDIR
# and multiprocessing's listener in it (a kernel run without the sandbox may make one)
SOCKET_ROOM = len("/s9999/tmp/pymp-XXXXXXXX/listener-XXXXXXXX")
SHORT_BASES = ("/tmp", "/dev/shm", "/var/tmp")  # where a private folder goes when TMPDIR's path is too long
LEDGER = "graded.json"  # in logs/autograde/: what each submission was last graded from


def _lecturelib() -> Path:
    import lecturelib

    return Path(lecturelib.__file__).parent


def course_files(course: Course) -> list[Path]:
    """What no grading may change: the course's configuration, masters, release and grading code."""
    roots = [course.source, course.release, _lecturelib()]
    return [course.root / "nbgrader_config.py"] + [p for r in roots if r.is_dir() for p in sorted(r.rglob("*"))
                                                   if p.is_file() and "__pycache__" not in p.parts]


def _kept_roots(course: Course) -> dict[str, Path]:
    """Where each group of kept files lives: the course root, and lecturelib (which may be elsewhere)."""
    return {"course": course.root, "lecturelib": _lecturelib()}


def _copy_files(paths: list[Path], base: Path, dest: Path) -> None:
    for p in paths:
        target = dest / p.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)


def _not_files(folder: str, names: list[str]) -> list[str]:
    """What copytree must not copy: anything but folders and regular files (pipes and devices would block it)."""
    return [n for n in names if not (stat.S_ISREG(m := os.lstat(os.path.join(folder, n)).st_mode) or stat.S_ISDIR(m))]


def read_log(path: Path, limit: int = 4 * 2**20) -> str:
    """A log's text, bounded: all of it when it is small, else its first and last `limit` / 2 bytes (a log is never
    read whole into memory, whatever wrote to it or however sparse it is)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        size = os.fstat(fd).st_size
        if size <= limit:
            data = f.read(limit)
        else:
            head = f.read(limit // 2)
            f.seek(size - limit // 2)
            data = head + f"\n[... {size - limit} bytes of the log not read ...]\n".encode() + f.read(limit // 2)
    return data.decode("utf-8", errors="replace").replace("\x00", "")  # a sparse file's holes read as NULs


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def short_folder(prefix: str) -> Path:
    """A new private folder with room under it for Unix sockets (SOCKET_ROOM): in the temporary folder (TMPDIR), or
    where that path is too long, in the first of SHORT_BASES that is writable."""
    for base in dict.fromkeys((tempfile.gettempdir(), *SHORT_BASES)):
        if len(os.fsencode(os.path.join(base, prefix))) + len("XXXXXXXX") + SOCKET_ROOM > SOCKET_PATH_MAX:
            continue
        try:
            return Path(tempfile.mkdtemp(prefix=prefix, dir=base))
        except OSError:
            continue
    raise RuntimeError(f"no folder short enough for Unix sockets: TMPDIR ({tempfile.gettempdir()}) is too long and "
                       f"{', '.join(SHORT_BASES)} are not writable")


def short_multiprocessing_folder() -> None:
    """multiprocessing's sockets in this process (its forkserver's listener, made once and kept while the process
    lives) in a short folder: in one of a long TMPDIR, binding them fails (OSError: AF_UNIX path too long)."""
    from multiprocessing import process, util

    # where multiprocessing.util.get_temp_dir keeps its folder (no public setter; CPython's own fallback to /tmp,
    # gh-132124, came after 3.11)
    config = process.current_process()._config  # type: ignore[attr-defined]
    current = config.get("tempdir") or os.path.join(tempfile.gettempdir(), "pymp-XXXXXXXX")
    if len(os.fsencode(current)) + len("/listener-XXXXXXXX") <= SOCKET_PATH_MAX:
        return
    folder = str(short_folder(f"{MP_PREFIX}{os.getpid()}-"))
    util.Finalize(None, shutil.rmtree, args=(folder, True), exitpriority=-100)  # as multiprocessing removes its own
    config["tempdir"] = folder


def remove_stale_private_folders() -> list[str]:
    """Private folders of runs whose process is gone (killed): their scratch folders go too, and the sockets'
    folders of kernels whose nbgrader was killed (sandbox.socket_folder)."""
    removed = []
    bases = [Path(base) for base in dict.fromkeys((tempfile.gettempdir(), *SHORT_BASES))]
    places = [(base, prefix) for base in bases for prefix in (PRIVATE_PREFIX, MP_PREFIX)]
    places += [(Path(base), sandbox.SOCKETS_PREFIX) for base in SHORT_BASES]
    for base, prefix in places:
        for folder in base.glob(f"{prefix}*"):
            try:
                pid = int(folder.name[len(prefix):].split("-", 1)[0])
            except ValueError:
                continue
            if pid != os.getpid() and not _pid_alive(pid) and not folder.is_symlink():
                shutil.rmtree(folder, ignore_errors=True)
                if prefix == PRIVATE_PREFIX:
                    removed.append(str(folder))
    return removed


def thread_env(workers: int) -> dict[str, str]:
    """Intra-op threads for each of `workers` kernels grading side by side: the cores shared out (at least one), so
    that parallel kernels do not oversubscribe the CPU (idle OpenMP threads spin). An instructor's own
    OMP_NUM_THREADS wins (the sandbox passes it on): then nothing is set."""
    if "OMP_NUM_THREADS" in os.environ:
        return {}
    n = str(max(1, (os.cpu_count() or 1) // max(1, workers)))
    return {"OMP_NUM_THREADS": n, "MKL_NUM_THREADS": n}


class RunLocked(RuntimeError):
    """Another autograde run holds the course's lock."""


class Stopped(KeyboardInterrupt):
    """Ctrl-C stopped the run: what it graded is kept, `left` submissions wait for the next run (its message is
    the one line the instructor reads)."""

    def __init__(self, left: int) -> None:
        self.left = left
        super().__init__(f"stopped; run it again to grade the {left} left" if left else "stopped; run it again")


class Run:
    """The context of one autograde run (see the module's docstring)."""

    def __init__(self, course: Course, *, sandboxed: bool, limits: sandbox.Limits, workers: int = 1) -> None:
        self.course, self.sandboxed, self.limits = course, sandboxed, limits
        self.threads = thread_env(workers)
        self.logs = course.root / "logs" / "autograde"
        self.state = self.logs / "run"
        self.notes: list[str] = []
        self.finished: set[tuple[str, str]] = set()  # graded by an interrupted run of this course version (`resume`)
        self.ledger: dict[str, dict[str, str]] = {}  # "STUDENT/ASSIGNMENT" -> what it was last graded from
        self._keys: dict[tuple[str, str], str] = {}  # the grading key of each submission this run grades
        self._interrupted: dict[str, Any] = {}  # the state of a run that was killed or interrupted
        self.private = Path()
        self.sandbox_config: Path | None = None
        self._lock: Any = None
        self._count = 0
        self.processes: set[Any] = set()  # the nbgrader processes running now

    # -- the lock and the state folder ---------------------------------------------------------------
    def __enter__(self) -> Run:
        self.logs.mkdir(parents=True, exist_ok=True)
        self._lock = open(self.logs / "lock", "w")
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise RunLocked("another `autograde` is running on this course (logs/autograde/lock)") from None
        try:
            if self.state.exists():
                self.notes += self.recover()
            elif (self.logs / "resume.json").is_file():  # a run stopped by Ctrl-C or SIGTERM: nothing to restore
                self._interrupted = self._read(self.logs / "resume.json")
            (self.logs / "resume.json").unlink(missing_ok=True)
            ledger = self._read(self.logs / LEDGER) if (self.logs / LEDGER).is_file() else {}
            self.ledger = {k: v for k, v in ledger.items() if isinstance(v, dict)}
            if remove_stale_private_folders():
                self.notes.append("removed the temporary folders of an autograde run that was killed")
            cgroup.remove_stale(sandbox.CGROUP_PREFIX, _pid_alive)  # of sandboxes whose supervisor was killed
            self._save_state()
            self.private = short_folder(f"{PRIVATE_PREFIX}{os.getpid()}-")
            if self.sandboxed:
                self.sandbox_config = sandbox.write_config(
                    self.private / "sandbox", limits=self.limits, hidden=[self.course.root],
                    env={**{k: v for k, v in nbgrader_env(self.private / "probe").items()
                            if k in ("PYTHONWARNINGS", "LECTURELIB_QUICK")}, **self.threads})
                sandbox.write_kernelspec(self.private / "jupyter", self.sandbox_config)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def stop(self) -> None:
        """Kill every nbgrader running for this run (and so their sandboxes): the run was interrupted."""
        for proc in list(self.processes):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def resume(self, version: str) -> set[tuple[str, str]]:
        """Submissions graded and verified by a run of this course `version` (lecturelib and the release) that was
        killed or interrupted before it ended: this run need not grade them again (kept in `finished`)."""
        state = self._read()
        state["version"] = version
        self._write(state)
        if self._interrupted.get("version") == version:
            self.finished = {tuple(k.split("/", 1)) for k in self._interrupted.get("done", []) if "/" in k}  # type: ignore[misc]
        return self.finished

    def __exit__(self, *exc: object) -> None:
        left = 0
        if exc and exc[0] is not None and self.state.is_dir():  # interrupted: the next run resumes where this one was
            state = self._read()
            left = len(state.get("running", []))
            if state.get("done"):
                (self.logs / "resume.json").write_text(json.dumps({**state, "running": []}))
        if self.private != Path():
            shutil.rmtree(self.private, ignore_errors=True)
        shutil.rmtree(self.state, ignore_errors=True)  # the run ended (not killed): nothing to repair next time
        if self._lock is not None:
            fcntl.flock(self._lock, fcntl.LOCK_UN)
            self._lock.close()
            self._lock = None
        if exc and isinstance(exc[1], KeyboardInterrupt) and not isinstance(exc[1], Stopped):
            raise Stopped(left) from None  # Ctrl-C: one line for the instructor, not a traceback

    def _save_state(self) -> None:
        shutil.rmtree(self.state, ignore_errors=True)
        roots = _kept_roots(self.course)
        for p in course_files(self.course):
            group = "lecturelib" if p.is_relative_to(roots["lecturelib"]) else "course"
            _copy_files([p], roots[group], self.state / "files" / group)
        if self.course.submitted.is_dir():  # regular files only (screened before the run): links are kept as links
            shutil.copytree(self.course.submitted, self.state / "submitted", symlinks=True, ignore=_not_files)
        self._write({"pid": os.getpid(), "started": time.strftime("%Y-%m-%d %H:%M:%S"), "running": [], "done": [],
                     "sandboxed": self.sandboxed})

    def _write(self, state: dict[str, Any]) -> None:
        tmp = self.state / "state.json.tmp"
        tmp.write_text(json.dumps(state))
        tmp.replace(self.state / "state.json")

    def _read(self, path: Path | None = None) -> dict[str, Any]:
        try:
            return dict(json.loads((path or self.state / "state.json").read_text()))
        except (OSError, ValueError):
            return {"pid": "?", "started": "?", "running": [], "done": []}

    def mark(self, pair: tuple[str, str], done: bool, grading_key: str = "") -> None:
        """Record that a submission's grading started (done=False, from `grading_key`) or finished and was verified
        (done=True: what it was graded from goes into the ledger when it left an autograded folder)."""
        state = self._read()
        key = "/".join(pair)
        state["running"] = [k for k in state["running"] if k != key] + ([] if done else [key])
        state["done"] = state["done"] + ([key] if done else [])
        self._write(state)
        if not done:
            self._keys[pair] = grading_key
        elif self._keys.get(pair) and (autograded := self._autograded_digest(pair)):
            self.ledger[key] = {"key": self._keys[pair], "autograded": autograded,
                                "graded": time.strftime("%Y-%m-%d %H:%M:%S")}
            self._write_ledger()
        else:
            self.forget(pair)

    def unchanged(self, pair: tuple[str, str], grading_key: str) -> bool:
        """Whether this submission was graded from `grading_key` and its autograded folder is as that grading left it."""
        entry = self.ledger.get("/".join(pair), {})
        return entry.get("key") == grading_key and entry.get("autograded") == self._autograded_digest(pair) != ""

    def forget(self, pair: tuple[str, str]) -> None:
        """Drop a submission from the ledger: the next run grades it whatever changed (e.g. its grading had problems)."""
        if self.ledger.pop("/".join(pair), None) is not None:
            self._write_ledger()

    def _autograded_digest(self, pair: tuple[str, str]) -> str:
        """sha256 of the files of autograded/STUDENT/ASSIGNMENT ('' when there is none)."""
        from lecturelib.course.grading.guard import digest  # guard imports this module

        files = digest(self.course.autograded / pair[0] / pair[1])
        return hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest() if files else ""

    def _write_ledger(self) -> None:
        tmp = self.logs / f"{LEDGER}.tmp"
        tmp.write_text(json.dumps(self.ledger, indent=1, sort_keys=True) + "\n")
        tmp.replace(self.logs / LEDGER)

    def recover(self) -> list[str]:
        """Repair what a killed run may have left: restore the course files and submissions it kept."""
        state = self._interrupted = self._read()
        aside = self.logs / f"interrupted-{time.strftime('%Y%m%d-%H%M%S')}"
        restored = []
        roots = _kept_roots(self.course)
        # Only a run with --no-sandbox gave kernels the rights to change the course's files or submitted/; a
        # sandboxed kernel sees neither. After a sandboxed run was killed, a difference is the instructor's own
        # work since (an edited master, lecturelib, a new collect): it stays as it is.
        could_change = state.get("sandboxed") is False
        for prefix, kept_root, live_root in (("", self.state / "files" / "course", roots["course"]),
                                             ("lecturelib/", self.state / "files" / "lecturelib", roots["lecturelib"]),
                                             ("submitted/", self.state / "submitted", self.course.submitted)):
            if not kept_root.is_dir() or not could_change:
                continue
            for kept in sorted(p for p in kept_root.rglob("*") if p.is_file()):
                live = live_root / kept.relative_to(kept_root)
                if live.is_file() and filecmp.cmp(kept, live, shallow=False):
                    continue
                name = prefix + str(kept.relative_to(kept_root))
                if live.exists():
                    (aside / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(str(live), aside / name)
                live.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(kept, live)
                restored.append(name)
        shutil.rmtree(self.state, ignore_errors=True)
        note = f"the autograde run started {state['started']} (pid {state['pid']}) was killed before it ended"
        if restored:
            note += (f": restored {len(restored)} file{'s' if len(restored) != 1 else ''} it had kept ({', '.join(restored[:5])}"
                     f"{', ...' if len(restored) > 5 else ''}); what was there is in {aside.relative_to(self.course.root)}")
        unfinished = state.get("running", [])
        if unfinished:
            note += f"; it had not finished grading {', '.join(unfinished)}: grade them again"
        return [note]

    # -- what each submission's nbgrader gets -------------------------------------------------------
    def submission_folder(self) -> Path:
        """A fresh private folder for one submission's nbgrader (TMPDIR, runtime, sandbox state), under the run's."""
        self._count += 1
        folder = self.private / f"s{self._count}"  # short: kernel sockets live in it (107-byte path limit)
        for sub in ("state",):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        return folder

    def env(self, folder: Path) -> dict[str, str]:
        """nbgrader's clean environment for one submission, with the sandbox's kernelspec (or none, stated)."""
        env = {**nbgrader_env(folder), **self.threads}
        env[SANDBOX_ENV] = "bwrap" if self.sandboxed else "none"
        env[sandbox.STATE_ENV] = str(folder / "state")
        if self.sandboxed:
            env["JUPYTER_PATH"] = str(self.private / "jupyter")  # the sandbox's kernelspec, found first
        return env
