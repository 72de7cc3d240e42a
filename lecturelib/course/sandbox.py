"""The sandbox every graded kernel runs in: bubblewrap, a private file system, no network, its own processes, limits.

`autograde` writes a kernelspec whose command is this module: ``python -I -m lecturelib.course.sandbox CONFIG
CONNECTION_FILE [KERNEL ARGS]``. It runs outside the sandbox, as a small supervisor, and starts the kernel
inside one (`bwrap`):

* the system (/usr, a few files of /etc), the Python install, the venv and `lecturelib` read-only; nothing
  else of the machine: not the course root, `source/`, the gradebook, other submissions or the grader's HOME;
* an empty HOME, /tmp and /dev/shm of its own (memory-backed, size-limited), a working folder holding
  copies of the assignment's data files, and the folder of its own connection file (IPC sockets);
* new user, PID, network (loopback only), IPC, UTS and cgroup namespaces: no network, no view of other
  processes, and every process it starts (`setsid` included) dies with it; no capabilities;
* limits: memory (RLIMIT_DATA: heap, anonymous mappings, thread stacks) and CPU time per process, file size,
  and the number of processes and threads, which this supervisor counts every 0.1 s (RLIMIT_NPROC counts a
  whole user id and does not bind root, so it cannot do this).

Only the standard library is used here: it runs once per kernel start, before the kernel.
"""

from __future__ import annotations

import glob
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

KERNEL_NAME = "lecturelib-sandbox"
HOME = "/home/student"  # the kernel's HOME inside the sandbox (a tmpfs)
WORK = f"{HOME}/work"  # its working folder: copies of the assignment's data files
UID = 1000  # the kernel's user inside (mapped to the grader's own user outside)
GIB = 2**30
POLL_S = 0.1  # how often the supervisor counts the sandbox's processes and threads
# Files of /etc a Python kernel needs (dynamic linker, C compiler alternatives for torch.compile, fonts for
# matplotlib, time zone). Not /etc/passwd: a one-line passwd naming the sandbox's user is bound instead.
ETC = ("ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "fonts", "localtime", "nsswitch.conf",
       "os-release", "mime.types")
# Variables of the grader's environment a kernel may see (thread counts, GPUs, language); nothing else.
PASS_ENV = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
STATE_ENV = "LECTURELIB_SANDBOX_STATE"  # a folder outside the sandbox where the supervisor leaves pids and reasons


class Limits(NamedTuple):
    """What one graded kernel may use. Memory and CPU are per process; tasks count processes and threads."""

    memory_bytes: int = 8 * GIB  # RLIMIT_DATA per process: a small GPT training step needs ~2.3 GiB
    tasks: int = 1024  # processes + threads at once: a kernel, DataLoader workers, compile workers, their threads
    cpu_s: int = 4 * 3600  # RLIMIT_CPU per process, a backstop far above any cell timeout (all threads count)
    file_bytes: int = 4 * GIB  # RLIMIT_FSIZE: the largest file it may write
    tmpfs_bytes: int = 1 * GIB  # each of HOME, /tmp and /dev/shm (memory the kernel writes there)
    shared_bytes: int = 16 * 2**20  # what it may write into the host folder it shares (its sockets' folder)


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
    return [opt for opt in ("--size", "--perms", "--disable-userns", "--json-status-fd") if opt in text]


def unavailable() -> str | None:
    """Why no sandbox can run here (bwrap missing, or no user namespaces), or None when one can."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    cmd = [exe, "--unshare-all", "--die-with-parent", "--uid", str(UID), "--ro-bind", "/", "/", "--proc", "/proc",
           "--dev", "/dev", "true"]
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


def _tmpfs(path: str, config: Config, mode: str) -> list[str]:
    size = ["--size", str(config.limits.tmpfs_bytes)] if "--size" in config.features else []
    perms = ["--perms", mode] if "--perms" in config.features else []
    return [*size, *perms, "--tmpfs", path]


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
            status_fd: int | None = None, env: dict[str, str] | None = None) -> list[str]:
    """The bwrap command line that runs `argv` in a sandbox; `writable` host folders are bound read-write at the
    same path; `files` maps paths inside the sandbox to open file descriptors whose contents are copied there."""
    args = ["bwrap", "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", str(UID), "--gid", str(UID), "--hostname", "grading"]
    if "--disable-userns" in config.features:
        args.append("--disable-userns")  # no nested user namespaces: less of the kernel to attack
    args += _system()
    args += ["--ro-bind", os.path.join(config.etc, "passwd"), "/etc/passwd",
             "--ro-bind", os.path.join(config.etc, "group"), "/etc/group"]
    args += ["--proc", "/proc", "--dev", "/dev", "--ro-bind-try", "/sys", "/sys", *_gpu()]
    args += _tmpfs("/tmp", config, "1777") + _tmpfs("/dev/shm", config, "1777") + _tmpfs(HOME, config, "0700")
    for path in config.read_only:  # after the tmpfs mounts: a course cloned under /tmp keeps its venv visible
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
    if status_fd is not None and "--json-status-fd" in config.features:
        args += ["--json-status-fd", str(status_fd)]
    return [*args, "--", *argv]


def _set_limits(limits: Limits) -> None:
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


def count_tasks(pid: int) -> int:
    """Processes and threads of the sandbox whose first process is `pid` (host pid), from its own /proc."""
    proc = f"/proc/{pid}/root/proc"
    try:
        if os.stat(proc).st_dev == os.stat("/proc").st_dev:
            return 0  # the sandbox is not set up yet: its root is still ours, and so is that /proc
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return 0  # gone, or not ours to look at
    total = 0
    for p in pids:
        try:
            with open(f"{proc}/{p}/stat", "rb") as f:
                total += int(f.read().rsplit(b")", 1)[1].split()[17])  # field 20: num_threads
        except (OSError, IndexError, ValueError):
            continue  # exited meanwhile
    return total


def folder_bytes(path: str) -> int:
    """Disk space used under `path` (the host folder a sandbox shares: a few sockets), links not followed."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_blocks * 512
            except OSError:
                continue
    return total


def _note(state: str, name: str, text: str) -> None:
    if state:
        try:
            Path(state, name).write_text(text)
        except OSError:
            pass


def _data_files(folder: str) -> dict[str, int]:
    """Open the assignment's data files (the kernel's starting folder, outside): bwrap copies them into WORK."""
    files = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path) and not name.endswith(".ipynb"):
            fd = os.open(path, os.O_RDONLY)
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


def supervise(config: Config, argv: list[str], *, writable: list[str], files: dict[str, int], state: str = "",
              env: dict[str, str] | None = None) -> int:
    """Run `argv` in a sandbox, count its tasks while it runs, and return its exit status."""
    read, write = os.pipe()
    os.set_inheritable(write, True)
    cmd = command(config, argv, writable=writable, files=files, status_fd=write, env=env)
    proc = subprocess.Popen(cmd, pass_fds=(write, *files.values()), preexec_fn=lambda: _set_limits(config.limits))
    os.close(write)
    for fd in files.values():
        os.close(fd)
    child = 0
    if "--json-status-fd" in config.features:
        first = b""
        while not first.endswith(b"\n"):  # { "child-pid": N, ... } once the sandbox is up
            chunk = os.read(read, 4096)
            if not chunk:
                break
            first += chunk
        first = first.split(b"\n", 1)[0]
        try:
            child = int(json.loads(first)["child-pid"]) if first else 0
        except (ValueError, KeyError):
            child = 0
    _note(state, "pids", f"{os.getpid()} {proc.pid} {child}\n")
    while True:
        try:
            code = proc.wait(timeout=POLL_S)  # returns the moment the sandbox ends
            break
        except subprocess.TimeoutExpired:
            pass
        too_much = ""
        if child and count_tasks(child) > config.limits.tasks:
            too_much = f"it started more than {config.limits.tasks} processes and threads"
        elif sum(folder_bytes(path) for path in writable) > config.limits.shared_bytes:
            too_much = f"it wrote more than {config.limits.shared_bytes // 2**20} MiB into the folder of its sockets"
        if too_much:
            _note(state, "reason", too_much)
            proc.kill()  # bwrap; --die-with-parent takes the sandbox's first process, and so every process in it
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
            code = proc.wait()
            break
    os.close(read)  # only now: bwrap writes its exit status there last, and would die of SIGPIPE
    if not (state and os.path.exists(os.path.join(state, "reason"))):
        _note(state, "reason", _exit_reason(code, config.limits))
    return code


def _exit_reason(code: int, limits: Limits) -> str:
    """Why a sandboxed command ended, from bwrap's exit status (the command's; 128 + N for signal N)."""
    signum = -code if code < 0 else code - 128 if code > 128 else 0
    if not signum:
        return f"it exited with status {code}"
    name = signal.Signals(signum).name if signum in signal.Signals._value2member_map_ else f"signal {signum}"
    known = {
        int(signal.SIGXCPU): f"it used more than {limits.cpu_s} s of CPU time",
        int(signal.SIGXFSZ): f"it wrote a file larger than {limits.file_bytes // 2**20} MiB",
        int(signal.SIGKILL): "it was killed (SIGKILL), by itself or by the system, e.g. when memory ran out",
    }
    return known.get(signum, f"it was killed by {name}")


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
            folder = Path(tempfile.mkdtemp(dir=private))
            connection = str(folder / "kernel.json")
            km = AsyncKernelManager(kernel_name=name, transport="ipc", connection_file=connection,
                                    ip=connection[: -len(".json")] + "-ipc")
            start = time.perf_counter()
            run_sync(km.start_kernel)(cwd=str(folder))
            kc = km.client()
            kc.start_channels()
            run_sync(kc.wait_for_ready)(timeout=120)
            run_sync(kc.execute_interactive)("1 + 1", timeout=120, output_hook=lambda msg: None)
            kc.stop_channels()
            run_sync(km.shutdown_kernel)()
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


def main(argv: list[str] | None = None) -> int:
    """The kernelspec's command: CONFIG CONNECTION_FILE [KERNEL ARGS...]; or --bench [N]."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["--bench"]:
        print(bench(int(args[1]) if len(args) > 1 else 10))
        return 0
    if len(args) < 2:
        print("usage: python -I -m lecturelib.course.sandbox CONFIG CONNECTION_FILE [KERNEL ARGS]", file=sys.stderr)
        return 2
    _die_with_parent()
    config = Config.read(args[0])
    connection = os.path.abspath(args[1])
    kernel = [config.python, "-m", "ipykernel_launcher", "-f", connection, *args[2:]]
    files = {**_font_cache(config), **_data_files(os.getcwd())}
    # the connection file's folder is private to this kernel: its IPC sockets are created there
    return supervise(config, kernel, writable=[os.path.dirname(connection)], files=files,
                     state=os.environ.get(STATE_ENV, ""))


def write_kernelspec(data_dir: Path, config_path: Path) -> None:
    """A kernelspec named KERNEL_NAME in `data_dir`/kernels whose command starts the sandboxed kernel."""
    spec = {
        "argv": [_kernel_python(), "-I", "-m", "lecturelib.course.sandbox", str(config_path), "{connection_file}"],
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
    (etc / "passwd").write_text(f"student:x:{UID}:{UID}:student:{HOME}:/bin/sh\n")
    (etc / "group").write_text(f"student:x:{UID}:\n")
    python = _kernel_python()
    config = Config(python=python, read_only=read_only_paths(python, hidden), etc=str(etc), env=env, limits=limits,
                    features=bwrap_features())
    mpl = folder / "matplotlib"
    mpl.mkdir(exist_ok=True)
    # once per run, in a sandbox (so its font paths are the ones a kernel sees); each kernel would build it otherwise
    supervise(config, [config.python, "-c", "import matplotlib.font_manager"], writable=[str(mpl)], files={},
              env={"MPLCONFIGDIR": str(mpl)})
    config = config._replace(mpl_cache=str(mpl))
    path = folder / "sandbox.json"
    config.write(path)
    return path


if __name__ == "__main__":
    sys.exit(main())
