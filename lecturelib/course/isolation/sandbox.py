"""The sandbox every graded kernel runs in: bubblewrap, a private file system, no network, its own processes, limits.

`autograde` writes a kernelspec whose command is this module: ``python -I -m lecturelib.course.isolation.sandbox CONFIG
CONNECTION_FILE [KERNEL ARGS]``. It runs outside the sandbox, as a small supervisor, and starts the kernel
inside one (`bwrap`):

* the system (/usr, a few files of /etc), the Python install, the venv and `lecturelib` read-only; nothing
  else of the machine: not the course root, `source/`, the gradebook, other submissions or the grader's HOME;
  /proc is the sandbox's own, with /proc/sys read-only, and /sys is read-only, the machine's network interfaces
  hidden (`net_folders`); its oom_score_adj is OOM_SCORE_ADJ, which a kernel cannot lower below the grader's;
* an empty HOME, /tmp and /dev/shm of its own (memory-backed, size-limited), a working folder holding
  copies of the assignment's data files, and a small memory-backed folder for its IPC sockets (RUN), which
  the grader reaches through /proc/PID/root: the kernel may write to no folder of the machine at all;
* new user, PID, network (loopback only), IPC, UTS and cgroup namespaces: no network, no view of other
  processes, and every process it starts (`setsid` included) dies with it; no capabilities; a seccomp filter
  (`lecturelib.course.isolation.seccomp`) refuses namespaces, mounts and the kernel's larger attack surfaces;
* the kernel's user (uid 1000 inside) is never root outside: when the grader runs as root it is mapped to an
  unprivileged user (HOST_USER, nobody), otherwise to the grader's own user; no descriptor of the grader is
  inherited: stdin is /dev/null, stdout and stderr a pipe that the supervisor reads, keeping LOG_BYTES;
* limits: memory (RLIMIT_DATA: heap, anonymous mappings, thread stacks) and CPU time per process, file size;
  where a cgroup can be made (`lecturelib.course.isolation.cgroup`), all the sandbox's memory, shared memory included,
  and its tasks; the supervisor also counts, every 0.1 s, processes and threads, files in the sandbox's
  memory-backed folders, and (without a memory cgroup) shared memory: memfd files and shared mappings.

Only the standard library is used here: it runs once per kernel start, before the kernel.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import select
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from lecturelib.course.isolation import cgroup, seccomp

KERNEL_NAME = "lecturelib-sandbox"
HOME = "/home/student"  # the kernel's HOME inside the sandbox (a tmpfs)
WORK = f"{HOME}/work"  # its working folder: copies of the assignment's data files
RUN = "/run/kernel"  # its connection file and IPC sockets (a small tmpfs); the grader reaches it via /proc/PID/root
UID = 1000  # the kernel's user inside
HOST_USER = "nobody"  # whom UID is outside when the grader runs as root (65534 where no such user exists)
GIB = 2**30
MIB = 2**20
POLL_S = 0.1  # how often the supervisor counts the sandbox's processes, files and shared memory
LOG_BYTES = 64 * 2**10  # what the supervisor keeps of the kernel's own stdout and stderr (the rest is counted)
RUN_BYTES = 1 * MIB  # size of RUN: a connection file and five sockets
# Files of /etc a Python kernel needs (dynamic linker, C compiler alternatives for torch.compile, fonts for
# matplotlib, time zone). Not /etc/passwd: a one-line passwd naming the sandbox's user is bound instead.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "localtime", "nsswitch.conf",
       "os-release", "mime.types")
# Variables of the grader's environment a kernel may see (thread counts, GPUs, language); nothing else.
PASS_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
CGROUP_PREFIX = "lecturelib-sandbox-"  # + the supervisor's pid: each sandbox's cgroup, below the grader's own
STATE_ENV = "LECTURELIB_SANDBOX_STATE"  # a folder outside the sandbox where the supervisor leaves pids and reasons


class Limits(NamedTuple):
    """What one graded kernel may use. Memory is per process (RLIMIT_DATA) and, where a cgroup can be made, for the
    whole sandbox (shared memory included; else the supervisor counts shared memory against it); CPU is per
    process; tasks count processes and threads; files count what its memory-backed folders hold."""

    memory_bytes: int = 8 * GIB  # a small GPT training step needs ~2.3 GiB
    tasks: int = 1024  # processes + threads at once: a kernel, DataLoader workers, compile workers, their threads
    cpu_s: int = 4 * 3600  # RLIMIT_CPU per process, a backstop far above any cell timeout (all threads count)
    file_bytes: int = 4 * GIB  # RLIMIT_FSIZE: the largest file it may write
    tmpfs_bytes: int = 1 * GIB  # each of HOME, /tmp and /dev/shm (memory the kernel writes there)
    files: int = 100_000  # files and folders in HOME, /tmp, /dev/shm and RUN together (each costs kernel memory)


class Config(NamedTuple):
    """Everything the supervisor needs, written by `autograde` once per run (outside any sandbox).

    (NamedTuples, not dataclasses: the supervisor starts before every kernel, and dataclasses import inspect.)
    """

    python: str  # the kernel's interpreter (the venv's)
    read_only: list[str]  # host folders bound read-only at the same path (Python, venv, lecturelib)
    etc: str  # a folder holding the passwd and group files of the sandbox
    env: dict[str, str] = {}  # set in the kernel (quick mode, warnings)
    limits: Limits = Limits()
    mpl_cache: str = ""  # matplotlib's font list, built once per run, copied into each sandbox
    features: list[str] = []  # optional bwrap options this bwrap knows

    def write(self, path: Path) -> None:
        path.write_text(json.dumps({**self._asdict(), "limits": self.limits._asdict()}, indent=1))

    @classmethod
    def read(cls, path: str) -> Config:
        data = json.loads(Path(path).read_text())
        return cls(**{**data, "limits": Limits(**data["limits"])})


def _kernel_python() -> str:
    return sys.executable


def host_identity() -> tuple[int, int] | None:
    """(uid, gid) outside the sandbox of its user when the grader is root: HOST_USER's; None otherwise (bwrap then
    maps the sandbox's user to the grader's own, unprivileged, user)."""
    if os.geteuid() != 0:
        return None
    try:
        import pwd

        entry = pwd.getpwnam(HOST_USER)
        return entry.pw_uid, entry.pw_gid
    except (ImportError, KeyError):
        return 65534, 65534


_PATHS = """
import importlib.util, json, sys
spec = importlib.util.find_spec("lecturelib")
print(json.dumps([sys.base_prefix, sys.prefix, *(spec.submodule_search_locations or [] if spec else []), *sys.path]))
"""


def read_only_paths(python: str, hidden: list[Path]) -> list[str]:
    """Host folders the kernel's Python imports from (base install, venv, lecturelib, paths its .pth files add),
    as an isolated interpreter sees them (no current folder); never a folder of `hidden` or one holding it."""
    found = json.loads(subprocess.run([python, "-I", "-c", _PATHS], capture_output=True, text=True, check=True).stdout)
    secret = [os.path.realpath(h) for h in hidden]
    out: list[str] = []
    for p in sorted({os.path.realpath(c) for c in found if c and os.path.isdir(c)}, key=len):
        if p == "/usr" or p.startswith("/usr/") or any(p == o or p.startswith(o + os.sep) for o in out):
            continue  # under /usr (always bound) or under a folder already bound
        if any(s == p or s.startswith(p + os.sep) for s in secret):
            continue  # the course root itself or a folder above it: only its lecturelib and venv are bound
        out.append(p)
    return out


def bwrap_features() -> list[str]:
    """Options of bwrap newer than Debian 11's (0.4): each is used only where this bwrap has it."""
    exe = shutil.which("bwrap")
    if exe is None:
        return []
    text = subprocess.run([exe, "--help"], capture_output=True, text=True).stdout
    return [opt for opt in ("--size", "--perms", "--disable-userns", "--seccomp") if opt in text]


def _seccomp_fd(config: Config) -> int | None:
    """A pipe holding the seccomp program (bwrap reads it to its end), where this bwrap and machine take one."""
    program = seccomp.program() if "--seccomp" in config.features else None
    return _pipe_with(program) if program else None


def _pipe_with(data: bytes) -> int:
    """The read end of a pipe that holds `data` and is closed for writing (data must fit the pipe's buffer)."""
    read, write = os.pipe()
    os.write(write, data)
    os.close(write)
    return read


def kernel_uid() -> int:
    """The kernel's user id inside the sandbox: UID, or HOST_USER's own id when the grader is root (no user
    namespace then: bwrap runs privileged and the kernel drops to that user, see DROP)."""
    host = host_identity()
    return host[0] if host else UID


# Run first inside a sandbox that a root grader started: owns the sandbox's private folders to the kernel's user,
# drops to that user for good (no capability survives: setresuid from root clears them, and no_new_privs is set),
# then starts the kernel. Trusted code: nothing of the submission has run yet.
DROP = """
import os, sys
uid, gid = int(sys.argv[1]), int(sys.argv[2])
for top in sys.argv[3].split(":"):
    for folder, subs, names in os.walk(top, topdown=False):  # a folder after its contents: root may not enter it then
        for path in [*(os.path.join(folder, n) for n in subs + names), folder]:
            os.lchown(path, uid, gid)
os.setgroups([])
os.setresgid(gid, gid, gid)
os.setresuid(uid, uid, uid)
if os.getuid() == 0 or os.geteuid() == 0:
    sys.exit("the sandbox could not drop root")
os.execv(sys.argv[4], sys.argv[4:])
"""


def _identity(config: Config) -> list[str]:
    """Namespaces and identity: as an ordinary user, a user namespace in which the kernel is UID (the grader's own
    user outside); as root, no user namespace (it would map UID to root): bwrap runs privileged, keeps only the
    capabilities DROP needs, and DROP leaves root for HOST_USER before the kernel starts."""
    args = ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    if host_identity() is not None:
        return [*args, "--cap-drop", "ALL", "--cap-add", "CAP_CHOWN", "--cap-add", "CAP_SETUID",
                "--cap-add", "CAP_SETGID"]
    args = ["--unshare-user", *args, "--cap-drop", "ALL", "--uid", str(UID), "--gid", str(UID)]
    if "--disable-userns" in config.features:
        args.append("--disable-userns")  # no nested user namespaces: less of the kernel to attack
    return args


def _as_kernel_user(config: Config, argv: list[str]) -> list[str]:
    """`argv`, started through DROP when the grader is root."""
    host = host_identity()
    if host is None:
        return argv
    return [config.python, "-I", "-S", "-c", DROP, str(host[0]), str(host[1]), f"{HOME}:{RUN}", *argv]


def unavailable() -> str | None:
    """Why no sandbox can run here (bwrap missing, no user namespaces, no way to leave root), or None when one can."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    config = Config(python=sys.executable, read_only=[], etc="", features=bwrap_features())
    if host_identity() is not None and "--perms" not in config.features:
        return "this bwrap is too old to grade as root (no --perms): update bubblewrap to 0.5 or later"
    python = {os.path.realpath(p) for p in (sys.base_prefix, sys.prefix)}
    config = config._replace(read_only=sorted(p for p in python if p != "/usr" and not p.startswith("/usr/")))
    cmd = command(config, ["/usr/bin/env", "true"])
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        return f"bwrap cannot create a sandbox here: {(done.stderr.strip() or 'exit ' + str(done.returncode))[:200]}"
    return None


def _system() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]  # merged /usr: /bin -> usr/bin
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    for name in ETC:
        args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    return args


def _tmpfs(path: str, config: Config, mode: str, size: int | None = None) -> list[str]:
    size_args = ["--size", str(size or config.limits.tmpfs_bytes)] if "--size" in config.features else []
    perms = ["--perms", mode] if "--perms" in config.features else []
    return [*size_args, *perms, "--tmpfs", path]


def _gpu() -> list[str]:
    """NVIDIA device files, where the machine has them (CUDA needs nothing else outside /usr, /sys and /proc)."""
    return [a for dev in sorted(glob.glob("/dev/nvidia*")) for a in ("--dev-bind", dev, dev)]


def environment(config: Config) -> dict[str, str]:
    """The kernel's whole environment: nothing of the grader's but PASS_ENV."""
    env = {k: os.environ[k] for k in PASS_ENV if k in os.environ}
    env.update({
        "HOME": HOME, "USER": "student", "LOGNAME": "student", "SHELL": "/bin/sh", "TMPDIR": "/tmp",
        "PATH": os.pathsep.join([os.path.dirname(config.python), "/usr/local/bin", "/usr/bin", "/bin"]),
        "LANG": env.get("LANG", "C.UTF-8"),
        "MPLCONFIGDIR": f"{HOME}/.config/matplotlib",  # a private font cache and matplotlibrc
        "IPYTHONDIR": f"{HOME}/.ipython",  # no startup files but its own
        "JUPYTER_CONFIG_DIR": f"{HOME}/.jupyter", "JUPYTER_DATA_DIR": f"{HOME}/.local/share/jupyter",
        "JUPYTER_RUNTIME_DIR": f"{HOME}/.local/share/jupyter/runtime",
        "PYTHONDONTWRITEBYTECODE": "1",  # the venv is read-only anyway
        "JPY_PARENT_PID": "1",  # no parent poller: the kernel's parent is the sandbox's init, and it dies with it
    })
    env.update(config.env)
    return env


def command(config: Config, argv: list[str], *, writable: tuple[str, ...] | list[str] = (), files: dict[str, int] | None = None,
            info_fd: int | None = None, env: dict[str, str] | None = None, seccomp_fd: int | None = None) -> list[str]:
    """The bwrap command line that runs `argv` in a sandbox as the kernel's user; `writable` host folders (only
    ever the grader's own, for its own code) are bound read-write at the same path; `files` maps paths inside the
    sandbox to open file descriptors whose contents are copied there."""
    args = ["bwrap", *_identity(config), "--die-with-parent", "--new-session", "--hostname", "grading"]
    args += _folders_above(config, [f"/etc/{name}" for name in ETC] + [HOME, RUN])
    args += _system()
    # the sandbox's own /proc; its sysctls read-only (they are the machine's), like /sys
    args += ["--proc", "/proc", "--ro-bind", "/proc/sys", "/proc/sys", "--ro-bind-try", "/proc/pressure", "/proc/pressure",
             "--dev", "/dev", "--ro-bind-try", "/sys", "/sys",
             *_gpu()]
    for folder in net_folders():  # the machine's network interfaces: an empty, read-only folder over each list
        args += _tmpfs(folder, config, "0555", size=4096) + ["--remount-ro", folder]
    args += _tmpfs("/tmp", config, "1777") + _tmpfs("/dev/shm", config, "1777") + _tmpfs(HOME, config, "0700")
    args += _tmpfs(RUN, config, "0700", size=RUN_BYTES)
    # after the tmpfs mounts: a course cloned under /tmp keeps its venv visible
    args += _folders_above(config, [*config.read_only, *writable])
    for path in config.read_only:
        args += ["--ro-bind", path, path]
    args += ["--dir", WORK, "--dir", f"{HOME}/.config/matplotlib"]
    for inside, fd in (files or {}).items():
        args += ["--file", str(fd), inside]
    for path in writable:
        args += ["--bind", path, path]
    # the root and /dev are tmpfs mounts bwrap made: read-only, so only the size-limited ones take writes
    args += ["--remount-ro", "/dev", "--remount-ro", "/", "--chdir", WORK, "--clearenv"]
    for key, value in {**environment(config), **(env or {})}.items():
        args += ["--setenv", key, value]
    if info_fd is not None:
        args += ["--info-fd", str(info_fd)]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return [*args, "--", *_as_kernel_user(config, argv)]


def net_folders() -> list[str]:
    """The folders of /sys that list the machine's network interfaces: /sys/class/net and the `net` folder of every
    device behind it (/sys/devices/virtual/net, a NIC's .../net). The sandbox's network namespace has only its own
    loopback; these would name the machine's interfaces (and their addresses, statistics)."""
    try:
        names = os.listdir("/sys/class/net")
    except OSError:
        return []
    devices = {os.path.dirname(os.path.realpath(os.path.join("/sys/class/net", n))) for n in names}
    return ["/sys/class/net", *sorted(d for d in devices if d.startswith("/sys/") and os.path.isdir(d))]


def _etc_files(config: Config) -> dict[str, int]:
    """The sandbox's /etc/passwd and /etc/group (one line each, naming its user), copied in by bwrap."""
    return {f"/etc/{name}": _pipe_with(Path(config.etc, name).read_bytes()) for name in ("passwd", "group")}


def _folders_above(config: Config, paths: list[str]) -> list[str]:
    """Folders bwrap would make on the way to these mount points, made first and world-readable: a privileged bwrap
    (root grader) makes them 0700, and the kernel's user could not reach what is mounted below."""
    if "--perms" not in config.features:
        return []
    above = sorted({str(parent) for p in paths for parent in Path(p).parents if str(parent) != "/"},
                   key=lambda f: (f.count("/"), f))
    return [a for folder in above for a in ("--perms", "0755", "--dir", folder)]


OOM_SCORE_ADJ = 1000  # the sandbox is the first the kernel's OOM killer ends, never the grader or the machine


def _set_limits(limits: Limits) -> None:
    # Raised before bwrap starts, and inherited by everything in the sandbox. A root grader writes it with
    # CAP_SYS_RESOURCE, which also sets the floor (oom_score_adj_min): the kernel, without that capability, can then
    # write only OOM_SCORE_ADJ itself, never lower. An ordinary grader cannot set the floor: a kernel may lower it
    # back to the grader's own value, never below it (only CAP_SYS_RESOURCE lowers it past the floor).
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(OOM_SCORE_ADJ))
    except OSError:
        pass
    for what, value in ((resource.RLIMIT_DATA, limits.memory_bytes), (resource.RLIMIT_CPU, limits.cpu_s),
                        (resource.RLIMIT_FSIZE, limits.file_bytes), (resource.RLIMIT_CORE, 0)):
        if value:
            resource.setrlimit(what, (value, value))


def _die_with_parent() -> None:
    """The supervisor dies with the nbgrader process that started it (and bwrap, then the sandbox, with it)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: nothing to do, bwrap does not run there either
        pass


def _sandbox_proc(pid: int) -> str | None:
    """The sandbox's own /proc, seen from outside through its first process (host pid), once it is set up."""
    proc = f"/proc/{pid}/root/proc"
    try:
        if os.stat(proc).st_dev == os.stat("/proc").st_dev:
            return None  # the sandbox is not set up yet: its root is still ours, and so is that /proc
    except OSError:
        return None  # gone, or not ours to look at
    return proc


def _pids(proc: str) -> list[str]:
    try:
        return [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return []


def count_tasks(pid: int) -> int:
    """Processes and threads of the sandbox whose first process is `pid` (host pid), from its own /proc."""
    proc = _sandbox_proc(pid)
    total = 0
    for p in _pids(proc) if proc else []:
        try:
            with open(f"{proc}/{p}/stat", "rb") as f:
                total += int(f.read().rsplit(b")", 1)[1].split()[17])  # field 20: num_threads
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return total


def count_files(pid: int) -> int:
    """Files and folders in the sandbox's memory-backed folders (HOME, /tmp, /dev/shm, RUN): their inodes in use."""
    total = 0
    if _sandbox_proc(pid) is None:
        return 0
    for folder in (HOME, "/tmp", "/dev/shm", RUN):
        try:
            st = os.statvfs(f"/proc/{pid}/root{folder}")
        except OSError:
            continue
        total += max(0, st.f_files - st.f_ffree)
    return total


def shared_memory_bytes(pid: int) -> int:
    """Shared memory the sandbox holds that no per-process limit counts: pages of shared mappings resident in its
    processes (RssShmem: MAP_SHARED anonymous memory, mapped memfd and tmpfs files) and the size of every memfd file
    it keeps open (written, not mapped). A file mapped by several processes counts once for each (an over-count)."""
    proc = _sandbox_proc(pid)
    total, memfds = 0, {}
    for p in _pids(proc) if proc else []:
        try:
            with open(f"{proc}/{p}/status", "rb") as f:
                for line in f:
                    if line.startswith(b"RssShmem:"):
                        total += int(line.split()[1]) * 1024
            fds = os.listdir(f"{proc}/{p}/fd")
        except (OSError, ValueError, IndexError):
            continue
        for fd in fds:
            try:
                if os.readlink(f"{proc}/{p}/fd/{fd}").startswith("/memfd:"):
                    st = os.stat(f"{proc}/{p}/fd/{fd}")
                    memfds[(st.st_dev, st.st_ino)] = st.st_blocks * 512
            except OSError:
                continue
    return total + sum(memfds.values())


def _note(state: str, name: str, text: str) -> None:
    if state:
        try:
            Path(state, name).write_text(text)
        except OSError:
            pass


def _data_files(folder: str) -> dict[str, int]:
    """Open the assignment's data files (the kernel's starting folder, outside): bwrap copies them into WORK.
    Regular files only, never followed through a link."""
    files = {}
    for name in sorted(os.listdir(folder)):
        if name.endswith(".ipynb"):
            continue
        try:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue  # a link, or gone
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)  # a folder, a pipe, a device: not data
            continue
        os.set_blocking(fd, True)
        os.set_inheritable(fd, True)
        files[f"{WORK}/{name}"] = fd
    return files


def _font_cache(config: Config) -> dict[str, int]:
    files = {}
    if config.mpl_cache and os.path.isdir(config.mpl_cache):
        for name in os.listdir(config.mpl_cache):
            fd = os.open(os.path.join(config.mpl_cache, name), os.O_RDONLY)
            os.set_inheritable(fd, True)
            files[f"{HOME}/.config/matplotlib/{name}"] = fd
    return files


class _Output:
    """The kernel's stdout and stderr (one pipe): the first LOG_BYTES go to the supervisor's stderr (nbgrader's log),
    the rest is read and counted, never kept, so that a kernel can neither fill the log nor block on a full pipe."""

    def __init__(self, fd: int) -> None:
        self.fd, self.kept, self.dropped = fd, 0, 0
        os.set_blocking(fd, False)

    def drain(self) -> bool:
        """Read what is there (up to 1 MiB a call); False once the pipe is closed (the sandbox is gone)."""
        for _ in range(16):
            try:
                chunk = os.read(self.fd, 1 << 16)
            except BlockingIOError:
                return True
            except OSError:
                return False
            if not chunk:
                return False
            keep = chunk[: max(0, LOG_BYTES - self.kept)]
            if keep:
                try:
                    sys.stderr.buffer.write(keep)
                    sys.stderr.flush()
                except (OSError, ValueError):
                    pass
            self.kept += len(keep)
            self.dropped += len(chunk) - len(keep)
        return True

    def close(self) -> None:
        if self.dropped:
            try:
                sys.stderr.write(f"\n[the sandboxed kernel wrote {self.dropped} more bytes to its stdout and stderr: "
                                 f"not kept]\n")
                sys.stderr.flush()
            except (OSError, ValueError):
                pass
        os.close(self.fd)


def _read_info(fd: int) -> int:
    """The sandbox's first process (host pid), from bwrap's --info-fd JSON; 0 if bwrap failed before it."""
    data = b""
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    os.close(fd)
    try:
        return int(json.loads(data)["child-pid"]) if data else 0
    except (ValueError, KeyError, TypeError):
        return 0


def supervise(config: Config, argv: list[str], *, writable: list[str], files: dict[str, int], state: str = "",
              env: dict[str, str] | None = None, on_start: list | None = None) -> int:
    """Run `argv` in a sandbox, watch its tasks, files and memory while it runs, and return its exit status.
    Each of `on_start` is called with the sandbox's first process (host pid) once it is set up."""
    limits = config.limits
    host = host_identity()
    if host is not None:
        for path in writable:  # the grader's own folders for its own code (matplotlib's font list): the user's
            os.chown(path, *host)
    group, why_no_group = cgroup.create(f"{CGROUP_PREFIX}{os.getpid()}", limits.memory_bytes, limits.tasks)
    info_r, info_w = os.pipe()
    out_r, out_w = os.pipe()
    filter_fd = _seccomp_fd(config)
    files = {**_etc_files(config), **files}
    passed = [info_w, *files.values(), *((filter_fd,) if filter_fd else ())]
    cmd = command(config, argv, writable=writable, files=files, info_fd=info_w, env=env, seccomp_fd=filter_fd)

    def in_child() -> None:
        _set_limits(limits)
        if group is not None:
            group.enter()

    try:
        with open(os.devnull, "rb") as null:
            proc = subprocess.Popen(cmd, stdin=null, stdout=out_w, stderr=out_w, pass_fds=passed, close_fds=True,
                                    preexec_fn=in_child)
    finally:
        for fd in [*passed, out_w]:
            os.close(fd)
    output = _Output(out_r)
    child = _read_info(info_r)
    _note(state, "pids", f"{os.getpid()} {proc.pid} {child}\n")
    if group is None:
        _note(state, "memory", f"no memory cgroup ({why_no_group}): shared memory counted by the supervisor\n")
    for call in on_start or []:
        if child:
            call(child)
    open_pipe, next_check = True, time.monotonic() + POLL_S
    while True:
        if _ENDED:  # SIGTERM from the grader: the kernel is done with, end the sandbox now (at most POLL_S later)
            _note(state, "reason", "the grader ended it")
            proc.kill()
            if child:  # never 0: that would be our own process group
                try:
                    os.kill(child, signal.SIGKILL)
                except (ProcessLookupError, OverflowError):
                    pass
            proc.wait()
            code = proc.returncode
            break
        if open_pipe:
            readable, _, _ = select.select([output.fd], [], [], max(0.0, next_check - time.monotonic()))
            if readable:
                open_pipe = output.drain()
        code = proc.poll()
        if code is not None:
            break
        if not open_pipe:
            try:
                code = proc.wait(timeout=max(0.0, next_check - time.monotonic()))
                break
            except subprocess.TimeoutExpired:
                pass
        if time.monotonic() < next_check:
            continue  # output keeps arriving: the limits are counted every POLL_S, not at every read
        next_check = time.monotonic() + POLL_S
        too_much = _over(child, limits, group)
        if too_much:
            _note(state, "reason", too_much)
            proc.kill()  # bwrap; --die-with-parent takes the sandbox's first process, and so every process in it
            try:
                os.kill(child, signal.SIGKILL)
            except (ProcessLookupError, OverflowError):
                pass
            code = proc.wait()
            break
    output.drain()
    output.close()
    if not (state and os.path.exists(os.path.join(state, "reason"))):
        refused = group is not None and code != 0 and group.tasks_refused() > 0
        _note(state, "reason", f"it started more than {limits.tasks} processes and threads" if refused
              else _exit_reason(code, limits, group.oom_kills() if group is not None else 0))
    if group is not None:
        group.remove()
    return code


def _over(child: int, limits: Limits, group: cgroup.Group | None) -> str:
    """Which limit the sandbox is past, as a reason ('' while it is within them). Its pids cgroup, where there is one,
    refuses the task past the limit: that ends the sandbox too, as it would without the cgroup."""
    if not child:
        return ""
    if count_tasks(child) > limits.tasks or (group is not None and group.tasks_refused()):
        return f"it started more than {limits.tasks} processes and threads"
    if count_files(child) > limits.files:
        return f"it created more than {limits.files} files and folders in its memory-backed folders"
    if group is None and shared_memory_bytes(child) > limits.memory_bytes:
        return f"it held more than {limits.memory_bytes / GIB:g} GiB of shared memory (memfd, shared mappings)"
    return ""


def _exit_reason(code: int, limits: Limits, oom_kills: int = 0) -> str:
    """Why a sandboxed command ended, from bwrap's exit status (the command's; 128 + N for signal N)."""
    signum = -code if code < 0 else code - 128 if code > 128 else 0
    if not signum:
        return f"it exited with status {code}"
    name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
    known = {
        int(signal.SIGXCPU): f"it used more than {limits.cpu_s} s of CPU time",
        int(signal.SIGXFSZ): f"it wrote a file larger than {limits.file_bytes // MIB} MiB",
        int(signal.SIGKILL): (f"it used more than {limits.memory_bytes / GIB:g} GiB of memory, shared memory included"
                              if oom_kills else "it was killed (SIGKILL), by itself or by the system, e.g. when memory ran out"),
    }
    return known.get(signum, f"it was killed by {name}")


SOCKETS_PREFIX = "lls-"  # + the creating process's pid + "-": a kernel's private folder for its connection file
IPC_PATH_MAX = 90  # a Unix socket's path has at most 107 bytes; ZeroMQ appends "-N" to the connection's "ip"


def socket_folder() -> str:
    """A new private folder for one kernel's connection file and IPC sockets, on a short path whatever TMPDIR is
    (a Unix socket's path is at most 107 bytes long: under a long TMPDIR, jupyter_client falls back to TCP)."""
    import tempfile

    for base in ("/tmp", "/dev/shm", "/var/tmp"):
        try:
            folder = tempfile.mkdtemp(prefix=f"{SOCKETS_PREFIX}{os.getpid()}-", dir=base)
        except OSError:
            continue
        if len(folder) + len("/s/kernel-ipc-99") <= IPC_PATH_MAX:
            return folder
        os.rmdir(folder)
    raise RuntimeError("no short folder for a kernel's IPC sockets: /tmp, /dev/shm and /var/tmp are not writable "
                       "(a sandboxed kernel is never started on TCP)")


def connection_paths(folder: str, sandboxed: bool) -> tuple[str, str]:
    """(connection file, IPC "ip") of a kernel in `folder` (from socket_folder). Its sockets are in folder/s: a real
    folder without the sandbox; with it, the link the supervisor makes to the sandbox's own RUN."""
    sockets = os.path.join(folder, "s")
    if not sandboxed:
        os.makedirs(sockets, exist_ok=True)
    return os.path.join(folder, "kernel.json"), os.path.join(sockets, "kernel-ipc")


def bench(n: int) -> str:
    """What the sandbox costs a kernel: start one, run a cell, shut it down, `n` times each with and without
    the sandbox (both over IPC, alternating); the medians, and the sandbox's one-off set-up per run."""
    import statistics
    import tempfile
    import time

    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync

    private = Path(tempfile.mkdtemp(prefix="lecturelib-bench-"))
    try:
        start = time.perf_counter()
        config = write_config(private / "sandbox", limits=Limits(), env={}, hidden=[Path.cwd()])
        write_kernelspec(private / "jupyter", config)
        setup_s = time.perf_counter() - start
        os.environ["JUPYTER_PATH"] = str(private / "jupyter")

        def once(name: str) -> float:
            folder = socket_folder()
            connection, ip = connection_paths(folder, sandboxed=name == KERNEL_NAME)
            km = AsyncKernelManager(kernel_name=name, transport="ipc", connection_file=connection, ip=ip)
            start = time.perf_counter()
            try:
                run_sync(km.start_kernel)(cwd=str(private))
                kc = km.client()
                kc.start_channels()
                run_sync(kc.wait_for_ready)(timeout=120)
                run_sync(kc.execute_interactive)("1 + 1", timeout=120, output_hook=lambda msg: None)
                kc.stop_channels()
                run_sync(km.shutdown_kernel)()
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            return time.perf_counter() - start

        times: dict[str, list[float]] = {"python3": [], KERNEL_NAME: []}
        for _ in range(n):
            for name in times:
                times[name].append(once(name))
    finally:
        shutil.rmtree(private, ignore_errors=True)
    plain, boxed = (statistics.median(times[k]) for k in ("python3", KERNEL_NAME))
    return (f"kernel start + one cell + shutdown, median of {n}: {plain:.2f} s without the sandbox, {boxed:.2f} s in it "
            f"({boxed - plain:+.2f} s a kernel); once a run: {setup_s:.2f} s (configuration, matplotlib's font list)")


_ENDED: list[int] = []  # the signal that asked the supervisor to end its sandbox (SIGTERM), once received


def _end(signum: int, frame: object) -> None:
    _ENDED.append(signum)


def main(argv: list[str] | None = None) -> int:
    """The kernelspec's command: CONFIG CONNECTION_FILE [KERNEL ARGS...]; or --bench [N]."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--bench"]:
        print(bench(int(args[1]) if len(args) > 1 else 10))
        return 0
    if len(args) < 2:
        print("usage: python -I -m lecturelib.course.isolation.sandbox CONFIG CONNECTION_FILE [KERNEL ARGS]",
              file=sys.stderr)
        return 2
    _die_with_parent()
    signal.signal(signal.SIGTERM, _end)  # the grader ends the kernel: the sandbox goes, its cgroup removed
    config = Config.read(args[0])
    state = os.environ.get(STATE_ENV, "")
    try:
        info = json.loads(Path(args[1]).read_text())
    except (OSError, ValueError) as e:
        return _refuse(state, f"its connection file could not be read ({e})")
    ip = str(info.get("ip", ""))
    if info.get("transport") != "ipc" or not ip.startswith("/"):
        return _refuse(state, "a sandboxed kernel is started on IPC sockets only, never on TCP (its network namespace "
                              f"has no way out): the connection file asks for {info.get('transport')!r}")
    sockets = os.path.dirname(ip)  # becomes a link to RUN inside the sandbox, where the kernel makes its sockets
    if os.path.lexists(sockets):
        return _refuse(state, f"the folder of its sockets, {sockets}, already exists: it must be made by the sandbox")
    inside = json.dumps({**info, "ip": f"{RUN}/{os.path.basename(ip)}"}).encode()
    files = {**_font_cache(config), **_data_files(os.getcwd()), f"{RUN}/kernel.json": _pipe_with(inside)}
    kernel = [config.python, "-m", "ipykernel_launcher", "-f", f"{RUN}/kernel.json", *args[2:]]
    try:
        return supervise(config, kernel, writable=[], files=files, state=state,
                         on_start=[lambda pid: os.symlink(f"/proc/{pid}/root{RUN}", sockets)])
    finally:
        if os.path.islink(sockets):
            os.unlink(sockets)


def _refuse(state: str, reason: str) -> int:
    _note(state, "reason", reason)
    print(f"lecturelib.course.isolation.sandbox: not started: {reason}", file=sys.stderr)
    return 2


def write_kernelspec(data_dir: Path, config_path: Path) -> None:
    """A kernelspec named KERNEL_NAME in `data_dir`/kernels whose command starts the sandboxed kernel."""
    spec = {
        "argv": [_kernel_python(), "-I", "-m", "lecturelib.course.isolation.sandbox", str(config_path),
                 "{connection_file}"],
        "display_name": "Python 3 (grading sandbox)",
        "language": "python",
        "interrupt_mode": "message",  # no signal reaches a kernel in its own session and PID namespace
        "metadata": {"debugger": False},
    }
    folder = data_dir / "kernels" / KERNEL_NAME
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.json").write_text(json.dumps(spec, indent=1))


def write_config(folder: Path, *, limits: Limits, env: dict[str, str], hidden: list[Path]) -> Path:
    """The supervisor's config, the sandbox's passwd/group and matplotlib's font list, in `folder`; nothing of
    the `hidden` folders (the course root) is bound, but lecturelib and a venv inside them."""
    etc = folder / "etc"
    etc.mkdir(parents=True, exist_ok=True)
    uid = kernel_uid()
    (etc / "passwd").write_text(f"student:x:{uid}:{uid}:student:{HOME}:/bin/sh\n")
    (etc / "group").write_text(f"student:x:{uid}:\n")
    python = _kernel_python()
    config = Config(python=python, read_only=read_only_paths(python, hidden), etc=str(etc), env=env, limits=limits,
                    features=bwrap_features())
    mpl = folder / "matplotlib"
    mpl.mkdir(exist_ok=True)
    # once per run, in a sandbox (so its font paths are the ones a kernel sees); each kernel would build it otherwise
    code = supervise(config, [config.python, "-c", "import matplotlib.font_manager"], writable=[str(mpl)], files={},
                     env={"MPLCONFIGDIR": str(mpl)})
    if code != 0:
        who = f"the user {HOST_USER}" if host_identity() else "your user"
        raise RuntimeError(f"the sandbox could not run its Python ({_exit_reason(code, limits)}): its kernels run as "
                           f"{who}, who must be able to read {python} and the course's venv and lecturelib")
    config = config._replace(mpl_cache=str(mpl))
    path = folder / "sandbox.json"
    config.write(path)
    return path


if __name__ == "__main__":
    sys.exit(main())
