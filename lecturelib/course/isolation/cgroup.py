"""A control group for one sandbox, where this machine lets the grader make one: all its memory, all its tasks.

Per-process limits (RLIMIT_DATA) do not count shared memory: memfd, MAP_SHARED mappings, tmpfs files. A
memory cgroup counts every page a sandbox's processes use, shared or not, and the kernel's own memory for
their files; a pids cgroup counts every process and thread at once. The grader makes a child of its own
cgroup (cgroup v1: of the memory and pids hierarchies; cgroup v2: one folder, where the memory controller can
be enabled for it), which needs write access there: root usually has it, an ordinary user only where
systemd delegates a subtree. Where none can be made, `create` says why and the sandbox's supervisor counts
shared memory itself (sandbox.shared_memory_bytes).

Only the standard library: this runs in the sandbox's supervisor, before every kernel.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import NamedTuple


class Group(NamedTuple):
    """The cgroup folders of one sandbox: one per v1 hierarchy (memory, maybe pids), or one v2 folder."""

    folders: list[str]
    version: int

    def enter(self) -> None:
        """Put the calling process in the group (called between fork and exec: everything it starts follows)."""
        for folder in self.folders:
            with open(os.path.join(folder, "cgroup.procs"), "w") as f:
                f.write("0")

    def oom_kills(self) -> int:
        """How many processes the kernel killed in this group because it ran out of its memory."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        for folder in self.folders:
            try:
                with open(os.path.join(folder, name)) as f:
                    for line in f:
                        key, _, value = line.partition(" ")
                        if key == "oom_kill":
                            return int(value)
            except (OSError, ValueError):
                continue
        return 0

    def tasks_refused(self) -> int:
        """How many times a fork or a new thread was refused because the group had all the tasks it may have."""
        for folder in self.folders:
            try:
                with open(os.path.join(folder, "pids.events")) as f:
                    for line in f:
                        key, _, value = line.partition(" ")
                        if key == "max":
                            return int(value)
            except (OSError, ValueError):
                continue
        return 0

    def remove(self) -> None:
        """Remove the folders once the sandbox's processes are gone (they may take a moment to exit)."""
        for folder in self.folders:
            for _ in range(50):
                try:
                    os.rmdir(folder)
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def _mounts() -> list[tuple[str, str, str]]:
    """(mount point, file system type, super options) of every cgroup file system of this process."""
    found = []
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                left, _, right = line.partition(" - ")
                fields, rest = left.split(), right.split()
                if len(fields) > 4 and len(rest) >= 3 and rest[0] in ("cgroup", "cgroup2"):
                    found.append((fields[4], rest[0], rest[2]))
    except OSError:
        pass
    return found


def _own() -> dict[str, str]:
    """This process's cgroup by hierarchy: {"memory": "/a/b", "pids": ..., "": "/x" (v2)}."""
    out = {}
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                for c in controllers.split(",") if controllers else [""]:
                    out[c] = path
    except (OSError, ValueError):
        pass
    return out


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _v1(name: str, memory_bytes: int, tasks: int) -> Group | None:
    mounts, own, folders = _mounts(), _own(), list[str]()
    for controller in ("memory", "pids"):
        point = next((m for m, kind, opts in mounts if kind == "cgroup" and controller in opts.split(",")), None)
        if point is None or controller not in own:
            if controller == "memory":
                return None
            continue
        folder = os.path.join(point, own[controller].lstrip("/"), name)
        try:
            os.mkdir(folder)
            if controller == "memory":
                _write(os.path.join(folder, "memory.limit_in_bytes"), str(memory_bytes))
                if os.path.exists(os.path.join(folder, "memory.memsw.limit_in_bytes")):  # no escape into swap
                    _write(os.path.join(folder, "memory.memsw.limit_in_bytes"), str(memory_bytes))
            else:
                _write(os.path.join(folder, "pids.max"), str(tasks))
        except OSError:
            Group(folders + [folder], 1).remove()
            if controller == "memory":
                return None
            continue
        folders.append(folder)
    return Group(folders, 1)


def _v2(name: str, memory_bytes: int, tasks: int) -> Group | None:
    point = next((m for m, kind, _ in _mounts() if kind == "cgroup2"), None)
    if point is None or "" not in _own():
        return None
    parent = os.path.join(point, _own()[""].lstrip("/"))
    try:
        with open(os.path.join(parent, "cgroup.subtree_control")) as f:
            enabled = f.read().split()
        if "memory" not in enabled:
            _write(os.path.join(parent, "cgroup.subtree_control"), "+memory")  # EBUSY where the parent has processes
        folder = os.path.join(parent, name)
        os.mkdir(folder)
    except OSError:
        return None
    group = Group([folder], 2)
    try:
        _write(os.path.join(folder, "memory.max"), str(memory_bytes))
        if os.path.exists(os.path.join(folder, "memory.swap.max")):
            _write(os.path.join(folder, "memory.swap.max"), "0")
        if os.path.exists(os.path.join(folder, "pids.max")):
            _write(os.path.join(folder, "pids.max"), str(tasks))
    except OSError:
        group.remove()
        return None
    return group


def remove_stale(prefix: str, alive: Callable[[int], bool]) -> None:
    """Remove this process's child cgroups named PREFIX + PID whose process is gone (a supervisor that was killed)."""
    for point, kind, opts in _mounts():
        for key, path in _own().items():
            if (kind == "cgroup2") != (key == "") or (key and key not in opts.split(",")):
                continue
            try:
                names = os.listdir(os.path.join(point, path.lstrip("/")))
            except OSError:
                continue
            for name in names:
                pid = name[len(prefix):]
                if name.startswith(prefix) and pid.isdigit() and not alive(int(pid)):
                    Group([os.path.join(point, path.lstrip("/"), name)], 2 if key == "" else 1).remove()


def create(name: str, memory_bytes: int, tasks: int) -> tuple[Group | None, str]:
    """A new cgroup `name` under this process's own, limited to `memory_bytes` of memory (swap included) and, where
    the pids controller is there too, `tasks` processes and threads; (None, why) where none can be made."""
    group = _v1(name, memory_bytes, tasks) or _v2(name, memory_bytes, tasks)
    if group is not None:
        return group, ""
    if not _mounts():
        return None, "this machine mounts no cgroup file system here"
    return None, "the grader may not create a memory cgroup below its own (no write access, or no delegation)"
