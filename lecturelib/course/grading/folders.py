"""The private folders of autograding processes, short enough for Unix sockets; their threads; their logs, read bounded.

A run (`run.Run`) and each grading host (`task`) keep what they make (nbgrader's HOME, Jupyter and IPython folders,
the sandbox's configuration, each submission's TMPDIR, kernel sockets and scratch folder) in a private folder in the
system's temporary folder, removed when their process ends and, if it was killed, by the next run
(`remove_stale_private_folders`). Every Unix socket lives in a short folder whatever TMPDIR is (`short_folder`: a
socket's path has at most 107 bytes): the private folder, multiprocessing's (its forkserver's listener) and each
kernel's (`sandbox.socket_folder`).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from lecturelib.course.isolation import sandbox

PRIVATE_PREFIX = "lecturelib-autograde-"  # + pid + "-": the run's private folder in the temporary folder
MP_PREFIX = "lecturelib-mp-"  # + pid + "-": multiprocessing's folder of a process whose TMPDIR is too long for sockets
SOCKET_PATH_MAX = 107  # bytes of a Unix socket's path (sun_path holds 108 with the closing NUL)
# Room a private folder leaves under it for the longest socket path made there: a submission's folder, its TMPDIR
# and multiprocessing's listener in it (a kernel run without the sandbox may make one)
SOCKET_ROOM = len("/s9999/tmp/pymp-XXXXXXXX/listener-XXXXXXXX")
SHORT_BASES = ("/tmp", "/dev/shm", "/var/tmp")  # where a private folder goes when TMPDIR's path is too long


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


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (one of another user's counts)."""
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
            if pid != os.getpid() and not pid_alive(pid) and not folder.is_symlink():
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
