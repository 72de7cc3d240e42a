"""One autograde run: its lock, the state it leaves while it grades, and the repair of a run that was killed.

A run takes a lock (one run at a time), then leaves a state folder in logs/autograde/run/: copies of the
course's files (nbgrader_config.py, source/, notebooks/, lecturelib) and of submitted/ as they were when it
started, and which submissions are being graded and which are done. A run that ends, even by Ctrl-C, removes it
(Ctrl-C also leaves resume.json: what it had done, so that the next run of the same course version grades the
rest). A state folder found at the next start means that run was killed: the submissions it had not finished are
named, and if it graded with --no-sandbox (its kernels had the instructor's rights) the course files and
submissions it kept are restored (what was there instead is moved aside to logs/autograde/interrupted-TIME/,
nothing is lost). A sandboxed kernel could change neither, so after a sandboxed run what differs is the
instructor's own work since, and stays.
The run also holds the ledger of what was graded (`ledger.Ledger`) and a private folder with the sandbox's
configuration (`folders`); the private folders and sandbox cgroups of killed runs are removed when it starts.
Ctrl-C ends a run with `Stopped`: one line that says how many submissions are left, no traceback.
"""

from __future__ import annotations

import fcntl
import filecmp
import json
import os
import shutil
import stat
import time
from pathlib import Path
from typing import Any

from lecturelib.course.grading.folders import (PRIVATE_PREFIX, pid_alive, remove_stale_private_folders, short_folder,
                                               thread_env)
from lecturelib.course.grading.guard import course_files, lecturelib_folder
from lecturelib.course.grading.ledger import Ledger
from lecturelib.course.isolation import cgroup, sandbox
from lecturelib.course.layout import Course, nbgrader_env


def _kept_roots(course: Course) -> dict[str, Path]:
    """Where each group of kept files lives: the course root, and lecturelib (which may be elsewhere)."""
    return {"course": course.root, "lecturelib": lecturelib_folder()}


def _copy_files(paths: list[Path], base: Path, dest: Path) -> None:
    for p in paths:
        target = dest / p.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)


def _not_files(folder: str, names: list[str]) -> list[str]:
    """What copytree must not copy: anything but folders and regular files (pipes and devices would block it)."""
    return [n for n in names if not (stat.S_ISREG(m := os.lstat(os.path.join(folder, n)).st_mode) or stat.S_ISDIR(m))]


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
        self.ledger = Ledger(self.logs, course.autograded)  # read once the run holds the lock
        self._interrupted: dict[str, Any] = {}  # the state of a run that was killed or interrupted
        self.private = Path()
        self.sandbox_config: Path | None = None
        self._lock: Any = None

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
            self.ledger.load()
            if remove_stale_private_folders():
                self.notes.append("removed the temporary folders of an autograde run that was killed")
            cgroup.remove_stale(sandbox.CGROUP_PREFIX, pid_alive)  # of sandboxes whose supervisor was killed
            self._save_state()
            self._make_private()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

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
        (done=True: the ledger keeps what it was graded from)."""
        state = self._read()
        key = "/".join(pair)
        state["running"] = [k for k in state["running"] if k != key] + ([] if done else [key])
        state["done"] = state["done"] + ([key] if done else [])
        self._write(state)
        if done:
            self.ledger.graded(pair)
        else:
            self.ledger.started(pair, grading_key)

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

    # -- the run's private folder -------------------------------------------------------------------
    def _make_private(self) -> None:
        """The run's private folder (`folders.short_folder`), and in it, for a sandboxed run, the sandbox's
        configuration and kernelspec (made once, when the run starts: it runs a sandbox, so a sandbox that cannot
        run Python fails here, before any submission)."""
        self.private = short_folder(f"{PRIVATE_PREFIX}{os.getpid()}-")
        if self.sandboxed:
            self.sandbox_config = sandbox.write_config(
                self.private / "sandbox", limits=self.limits, hidden=[self.course.root],
                env={**{k: v for k, v in nbgrader_env(self.private / "probe").items()
                        if k in ("PYTHONWARNINGS", "LECTURELIB_QUICK")}, **self.threads})
            sandbox.write_kernelspec(self.private / "jupyter", self.sandbox_config)
