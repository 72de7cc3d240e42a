"""lecturelib.course.sandbox: what a sandboxed process sees, may write, may reach, and how much it may use."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from lecturelib.course import sandbox
from lecturelib.course.autograde import SandboxUnavailable, check_sandbox

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
    assert code != 0  # stopped by the supervisor, or its forks refused by the sandbox's pids cgroup
    assert f"more than {LIMITS.tasks} processes and threads" in (tmp_path / "reason").read_text()


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
