"""lecturelib.course.isolation.sandbox: what a sandboxed process sees, may write, may reach, and how much it may use."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from lecturelib.course.isolation import sandbox
from lecturelib.course.grading.autograde import SandboxUnavailable, check_sandbox

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20
NO_SANDBOX = sandbox.unavailable()
needs_sandbox = pytest.mark.skipif(NO_SANDBOX is not None and not os.environ.get("CI"),
                                   reason=f"no sandbox on this machine: {NO_SANDBOX}")
# small limits, so that reaching them is quick: 64 tasks, 1 GiB per process, 8 MiB per tmpfs
LIMITS = sandbox.Limits(tasks=64, memory_bytes=1 << 30, tmpfs_bytes=8 * MIB)


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> sandbox.Config:
    folder = tmp_path_factory.mktemp("sandbox")
    path = sandbox.write_config(folder, limits=LIMITS, env={"LECTURELIB_QUICK": "1"}, hidden=[ROOT])
    return sandbox.Config.read(str(path))


def run(config: sandbox.Config, code: str, capfd: pytest.CaptureFixture[str], state: Path | None = None,
        files: dict[str, int] | None = None) -> tuple[int, str]:
    """Run Python `code` in a sandbox; (exit status, what it printed: the supervisor passes it on to its stderr)."""
    capfd.readouterr()
    code = sandbox.supervise(config, [config.python, "-c", code], writable=[], files=files or {},
                             state=str(state) if state else "")
    return code, capfd.readouterr().err


def test_read_only_paths_bind_lecturelib_and_the_venv_never_the_course_root() -> None:
    paths = sandbox.read_only_paths(sys.executable, hidden=[ROOT])
    assert str(ROOT / "lecturelib") in paths
    assert not [p for p in paths if p == str(ROOT) or str(ROOT).startswith(p + os.sep)]


def test_autograde_refuses_without_a_sandbox(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox.shutil, "which", lambda name: None)
    assert sandbox.unavailable() == "bubblewrap (bwrap) is not installed"
    with pytest.raises(SandboxUnavailable, match="apt-get install bubblewrap.*--no-sandbox"):
        check_sandbox(True)
    check_sandbox(False)  # the instructor said --no-sandbox


@needs_sandbox
def test_sandbox_sees_python_and_lecturelib_not_the_course_or_the_graders_environment(
        config: sandbox.Config, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LECTURELIB_GRADER_SECRET", "1")
    code, out = run(config, f"""
import json, os, lecturelib.grading, torch
root = {str(ROOT)!r}
print(json.dumps({{"seen": sorted(os.listdir(root)), "home": os.listdir(os.path.expanduser("~")),
                  "env": sorted(os.environ), "uid": os.getuid(), "cwd": os.getcwd(), "files": os.listdir("."),
                  "quick": os.environ.get("LECTURELIB_QUICK")}}))
""", capfd)
    seen = json.loads(out.strip().splitlines()[-1])
    assert code == 0
    assert set(seen["seen"]) <= {"lecturelib", ".venv"}  # not source/, tests/, nbgrader_config.py, gradebook.db
    assert sorted(seen["home"]) == [".config", "work"] and seen["cwd"] == sandbox.WORK and seen["files"] == []
    assert "LECTURELIB_GRADER_SECRET" not in seen["env"] and seen["quick"] == "1"
    assert seen["uid"] == sandbox.kernel_uid() and seen["uid"] != 0


@needs_sandbox
def test_sandbox_writes_only_to_its_own_memory_backed_folders(config: sandbox.Config,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    code, out = run(config, f"""
import os, site, json
result = {{}}
for path in [*site.getsitepackages(), {str(ROOT / "lecturelib")!r}, "/usr/lib", "/", "/etc", "/dev",
             os.path.expanduser("~"), "/tmp", "/dev/shm", os.getcwd()]:
    try:
        with open(os.path.join(path, "planted"), "w") as f:
            f.write("x")
        result[path] = True
    except OSError:
        result[path] = False
print(json.dumps(result))
""", capfd)
    writable = {p for p, ok in json.loads(out.strip().splitlines()[-1]).items() if ok}
    assert code == 0
    assert writable == {"/home/student", "/tmp", "/dev/shm", sandbox.WORK}
    assert not (ROOT / "lecturelib" / "planted").exists()


@needs_sandbox
def test_sandbox_has_no_network_and_sees_only_its_own_processes(config: sandbox.Config,
                                                                capfd: pytest.CaptureFixture[str]) -> None:
    code, out = run(config, """
import os, socket
try:
    socket.create_connection(("1.1.1.1", 53), timeout=2)
    print("network")
except OSError:
    print("no network")
print(sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
""", capfd)
    lines = out.strip().splitlines()
    assert code == 0 and lines[-2] == "no network"
    assert eval(lines[-1]) == [1, 2]  # bwrap's init and this process: not the grader's, not the machine's


@needs_sandbox
def test_sandbox_hides_the_machines_network_interfaces_and_cannot_lower_its_oom_score(
        config: sandbox.Config, capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 32 §5: /sys/class/net (and every interface's folder behind it) is empty inside; the sandbox's
    oom_score_adj is 1000, and a kernel cannot lower it to shield itself from the OOM killer (as root grader: not
    at all; as an ordinary user: never below the grader's own)."""
    hosts = sandbox.net_folders()
    assert hosts and hosts[0] == "/sys/class/net" and os.listdir("/sys/class/net")  # the machine's, outside
    code, out = run(config, f"""
import json, os
seen = {{f: os.listdir(f) for f in {hosts!r}}}
before = open("/proc/self/oom_score_adj").read().strip()
try:
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("-1000")
    lowered = open("/proc/self/oom_score_adj").read().strip()
except OSError as e:
    lowered = type(e).__name__
print(json.dumps({{"seen": seen, "before": before, "lowered": lowered}}))
""", capfd)
    found = json.loads(out.strip().splitlines()[-1])
    assert code == 0
    assert found["seen"] == {f: [] for f in hosts}
    assert found["before"] == "1000"
    own = int(Path("/proc/self/oom_score_adj").read_text())
    assert found["lowered"] == ("PermissionError" if sandbox.host_identity() is not None or own > -1000 else "-1000")


@needs_sandbox
def test_sandbox_processes_die_with_it(config: sandbox.Config, capfd: pytest.CaptureFixture[str]) -> None:
    code, _ = run(config, """
import subprocess
subprocess.Popen(["setsid", "sleep", "600", "lecturelib-sandbox-test-orphan"], start_new_session=True)
""", capfd)
    assert code == 0
    left = [p for p in os.listdir("/proc") if p.isdigit() and b"lecturelib-sandbox-test-orphan" in _cmdline(p)]
    assert left == []


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@needs_sandbox
def test_sandbox_stops_a_fork_bomb_at_its_task_limit(config: sandbox.Config, capfd: pytest.CaptureFixture[str],
                                                     tmp_path: Path) -> None:
    code, _ = run(config, """
import os, time
for _ in range(1000):
    if os.fork() == 0:
        time.sleep(600)
        os._exit(0)
time.sleep(600)
""", capfd, state=tmp_path)
    assert code != 0  # counted by the supervisor, or refused by the sandbox's pids cgroup: either ends it
    assert (tmp_path / "reason").read_text() == f"it started more than {LIMITS.tasks} processes and threads"


@needs_sandbox
def test_sandbox_limits_memory_and_its_folders(config: sandbox.Config, capfd: pytest.CaptureFixture[str]) -> None:
    code, out = run(config, """
try:
    hog = bytearray(2 << 30)  # 2 GiB, the limit is 1 GiB
    print("allocated")
except MemoryError:
    print("refused")
try:
    with open("/tmp/big", "wb") as f:
        f.write(b"x" * (16 << 20))  # 16 MiB into an 8 MiB /tmp
    print("written")
except OSError as e:
    print(e.strerror)
""", capfd)
    assert code == 0
    assert out.strip().splitlines()[-2:] == ["refused", "No space left on device"]


@needs_sandbox
def test_sandbox_copies_data_files_into_its_working_folder(config: sandbox.Config, capfd: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("1,2\n")
    files = sandbox._data_files(str(tmp_path))
    code, out = run(config, "print(open('data.csv').read().strip()); open('data.csv', 'a').write('3,4')", capfd,
                    files=files)
    assert code == 0 and out.strip().splitlines()[-1] == "1,2"
    assert (tmp_path / "data.csv").read_text() == "1,2\n"  # the original is untouched


@needs_sandbox
def test_sandbox_kernel_is_never_root_outside_and_holds_no_privilege(config: sandbox.Config,
                                                                     capfd: pytest.CaptureFixture[str]) -> None:
    """Issue 29, item 1: whoever grades (root here), the kernel's user as the machine sees it is not root (read from
    the machine's own /proc while it runs); no capability, no_new_privs, a seccomp filter."""
    import threading
    import time

    marker, seen_outside = "lecturelib-uid-probe", []
    code_text = """
import json, os, time
status = {l.split(":")[0]: l.split(":")[1].strip() for l in open("/proc/self/status") if ":" in l}
print(json.dumps({"uid": os.getuid(), **{k: status[k] for k in ("CapEff", "CapPrm", "CapAmb", "NoNewPrivs", "Seccomp")}}))
time.sleep(3)
"""
    kernel = [config.python, "-c", code_text, marker]  # the command line of the kernel's own process, as it runs

    def look(_: int) -> None:
        def scan() -> None:
            deadline = time.monotonic() + 10
            while not seen_outside and time.monotonic() < deadline:
                for pid in filter(str.isdigit, os.listdir("/proc")):
                    if _cmdline(pid) == "\0".join(kernel).encode() + b"\0":
                        status = Path(f"/proc/{pid}/status").read_text()
                        seen_outside.append([int(x) for x in status.split("Uid:")[1].split()[:4]])
                time.sleep(0.05)
        threading.Thread(target=scan, daemon=True).start()

    capfd.readouterr()
    code = sandbox.supervise(config, kernel, writable=[], files={}, on_start=[look])
    seen = json.loads(capfd.readouterr().err.strip().splitlines()[-1])
    assert code == 0 and seen["uid"] == sandbox.kernel_uid()
    assert seen_outside and 0 not in seen_outside[0], seen_outside  # real, effective, saved, file system uid
    assert os.geteuid() != 0 or seen_outside[0][0] == sandbox.host_identity()[0]
    assert (seen["CapEff"], seen["CapPrm"], seen["CapAmb"]) == ("0" * 16,) * 3
    assert seen["NoNewPrivs"] == "1" and seen["Seccomp"] == "2"


@needs_sandbox
def test_sandbox_seccomp_refuses_namespaces_mounts_and_tracing(config: sandbox.Config,
                                                              capfd: pytest.CaptureFixture[str]) -> None:
    code, out = run(config, """
import ctypes, errno, subprocess, threading
libc = ctypes.CDLL(None, use_errno=True)
def errno_of(result):
    return errno.errorcode.get(ctypes.get_errno(), "?") if result == -1 else "allowed"
print(errno_of(libc.unshare(0x10000000)), errno_of(libc.unshare(0x40000000)),
      errno_of(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)), errno_of(libc.ptrace(16, 1, 0, 0)),
      errno_of(libc.shmget(0, 4096, 0o1000)), errno_of(libc.syscall(321, 0, 0, 0)))
t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()
print(subprocess.run(["echo", "child"], capture_output=True, text=True).stdout.strip())
""", capfd)
    lines = out.strip().splitlines()
    assert code == 0 and lines[-3:] == ["EPERM EPERM EPERM EPERM EPERM EPERM", "thread", "child"]


def test_seccomp_program_for_each_architecture() -> None:
    from lecturelib.course.isolation import seccomp

    for arch in ("x86_64", "aarch64"):
        program = seccomp.program(arch)
        assert program is not None and len(program) % 8 == 0 and len(program) // 8 < 256
    assert seccomp.program("riscv64") is None


@needs_sandbox
def test_sandbox_inherits_no_descriptor_of_the_grader(config: sandbox.Config, capfd: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    """Item 5: an inheritable, writable file of the grader does not reach the kernel; its stdout and stderr are a pipe
    whose first 64 KiB the supervisor keeps (the rest is counted, not kept)."""
    leaked = os.open(tmp_path / "grader.log", os.O_WRONLY | os.O_CREAT)
    os.set_inheritable(leaked, True)
    try:
        code, out = run(config, """
import os, sys
fds = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
print({fd: os.readlink(f"/proc/self/fd/{fd}") for fd in fds if os.path.exists(f"/proc/self/fd/{fd}")}, flush=True)
os.write(1, b"x" * (8 << 20))
""", capfd)
    finally:
        os.close(leaked)
    fds = eval(next(ln for ln in out.splitlines() if ln.startswith("{")))
    assert code == 0 and set(fds) == {0, 1, 2} and fds[0] == "/dev/null" and fds[1].startswith("pipe:"), fds
    assert len(out) < sandbox.LOG_BYTES + 1000 and "more bytes to its stdout and stderr: not kept" in out
    assert (tmp_path / "grader.log").stat().st_size == 0


@needs_sandbox
def test_sandbox_bounds_the_files_of_its_memory_folders(config: sandbox.Config, capfd: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    """Item 6: the sockets' folder is a 1 MiB tmpfs of the sandbox (no host folder is writable), and files and folders
    count in every memory-backed folder: past the limit, the sandbox ends."""
    small = config._replace(limits=config.limits._replace(files=2000))
    code, out = run(small, f"""
import os
try:
    open("{sandbox.RUN}/big", "wb").write(b"x" * (2 << 20))
except OSError as e:
    print(e.strerror, flush=True)
for i in range(100_000):
    os.mkdir(f"{sandbox.RUN}/d{{i}}")
""", capfd, state=tmp_path)
    assert code != 0 and "No space left on device" in out
    assert (tmp_path / "reason").read_text() == "it created more than 2000 files and folders in its memory-backed folders"


@needs_sandbox
@pytest.mark.parametrize("how", ["memfd", "shared mapping"])
@pytest.mark.parametrize("group", [True, False], ids=["cgroup", "counted"])
def test_sandbox_bounds_shared_memory(config: sandbox.Config, capfd: pytest.CaptureFixture[str], tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch, how: str, group: bool) -> None:
    """Item 8: 2 GiB of memfd or MAP_SHARED memory under a 1 GiB limit ends the sandbox, in a memory cgroup (where
    this machine lets the grader make one) or, without one, by the supervisor's count."""
    from lecturelib.course.isolation import cgroup

    if group:
        probe, why = cgroup.create("lecturelib-probe", 2**30, 64)
        if probe is None:
            pytest.skip(f"no memory cgroup can be made here ({why}): the supervisor's count is tested instead")
        probe.remove()
    else:
        monkeypatch.setattr(cgroup, "create", lambda *a: (None, "not in this test"))
    allocate = {"memfd": "import os\nfd = os.memfd_create('x')\nfor _ in range(2048):\n    os.write(fd, b'x' * (1 << 20))",
                "shared mapping": "import mmap\nm = mmap.mmap(-1, 2 << 30)\nfor i in range(0, 2 << 30, 4096):\n    m[i] = 1"}
    code, _ = run(config, allocate[how] + "\nimport time\ntime.sleep(60)", capfd, state=tmp_path)
    assert code != 0
    reason = (tmp_path / "reason").read_text()
    assert ("1 GiB of memory, shared memory included" in reason if group else
            reason == "it held more than 1 GiB of shared memory (memfd, shared mappings)"), reason


@needs_sandbox
def test_sandbox_refuses_a_kernel_on_tcp(config: sandbox.Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capfd: pytest.CaptureFixture[str]) -> None:
    """Item 10: a sandboxed kernel is never started on TCP (its network namespace could not be reached)."""
    monkeypatch.setattr(sandbox, "_die_with_parent", lambda: None)  # not this test process
    (tmp_path / "sandbox.json").write_text(json.dumps({**config._asdict(), "limits": config.limits._asdict()}))
    (tmp_path / "kernel.json").write_text(json.dumps({"transport": "tcp", "ip": "127.0.0.1", "shell_port": 1}))
    state = tmp_path / "state"
    state.mkdir()
    monkeypatch.setenv(sandbox.STATE_ENV, str(state))
    assert sandbox.main([str(tmp_path / "sandbox.json"), str(tmp_path / "kernel.json")]) == 2
    assert "never on TCP" in (state / "reason").read_text()
