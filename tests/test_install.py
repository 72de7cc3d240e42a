"""lecturelib/install.py: setup's uv gets what pip's configuration asks pip for (the venv itself is CI's setup)."""

from __future__ import annotations

import subprocess
import sys

from lecturelib import install
from lecturelib.install import pip_settings, uv_arguments

# `pip config list` on a course machine: local wheels from a variable and a file, two local indexes, a constraint
MACHINE = """:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/wheels'
"""


def test_install_passes_a_machines_pip_configuration_to_uv() -> None:
    settings = pip_settings(MACHINE)
    assert settings == {"cert": "/etc/ssl/certs/ca-certificates.crt", "default-timeout": "180",
                        "find-links": "/opt/wheels", "constraint": "/etc/xdg/pip/constraints.txt",
                        "extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple"}
    args, env = uv_arguments(settings)
    assert args == ["--index-strategy", "unsafe-best-match", "--constraint", "/etc/xdg/pip/constraints.txt",
                    "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
                    "--find-links", "/opt/wheels"]
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}


def test_install_takes_pips_precedence_variables_then_install_then_global() -> None:
    listing = ("global.index-url='https://global.example/simple'\ninstall.index-url='https://install.example/simple'\n"
               "global.trusted-host='a.example b.example'\n:env:.index-url='https://env.example/simple'\n"
               "install.no-index='true'\nglobal.proxy='http://proxy.example:3128'\n")
    settings = pip_settings(listing)
    assert settings["index-url"] == "https://env.example/simple"
    args, env = uv_arguments(settings)
    assert args == ["--index-strategy", "unsafe-best-match", "--index-url", "https://env.example/simple", "--no-index",
                    "--allow-insecure-host", "a.example", "--allow-insecure-host", "b.example"]
    assert env == {"HTTPS_PROXY": "http://proxy.example:3128", "HTTP_PROXY": "http://proxy.example:3128"}


def test_install_lets_the_command_line_index_replace_the_configured_one() -> None:
    # make ... TORCH_INDEX=https://download.pytorch.org/whl/cpu: PyTorch's index, not the configured one
    args, _ = uv_arguments(pip_settings("global.index-url='https://mirror.example/simple'\n"),
                           ["--index-url", "https://download.pytorch.org/whl/cpu", "torch==2.13.0"])
    assert args == ["--index-strategy", "unsafe-best-match"]


def test_install_with_no_pip_configuration_asks_uv_for_pips_defaults_only() -> None:
    assert pip_settings("") == {}
    assert pip_settings("not a setting\nuser.thing='x'\nglobal.broken='unterminated\n") == {}
    assert uv_arguments({}) == (["--index-strategy", "unsafe-best-match"], {})
    assert uv_arguments({"no-index": "false"}) == (["--index-strategy", "unsafe-best-match"], {})


class FakeRun:
    """subprocess.run for install.main: records each command; `uv --version` and `uv pip install` answer as told."""

    def __init__(self, uv_runs: list[bool], uv_installs: bool) -> None:
        self.uv_runs, self.uv_installs, self.commands = uv_runs, uv_installs, []

    def __call__(self, command, **kw):  # type: ignore[no-untyped-def]
        self.commands.append(" ".join(command[1:]))
        if command[1:4] == ["-m", "uv", "--version"]:
            code = 0 if self.uv_runs.pop(0) else 1
        elif command[1:5] == ["-m", "uv", "pip", "install"]:
            code = 0 if self.uv_installs else 2
        else:
            code = 0
        return subprocess.CompletedProcess(command, code, stdout=MACHINE if "config" in command else "", stderr="")


def test_install_uses_uv_with_the_machines_configuration(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    fake = FakeRun(uv_runs=[True], uv_installs=True)
    monkeypatch.setattr(install.subprocess, "run", fake)
    assert install.main(["-r", "requirements.txt"]) == 0
    uv = (f"-m uv pip install --quiet --python {sys.executable} --link-mode copy --index-strategy unsafe-best-match "
          "--constraint /etc/xdg/pip/constraints.txt --extra-index-url file:///opt/pypi/simple --extra-index-url "
          "file:///opt/pypi-more/simple --find-links /opt/wheels -r requirements.txt")
    assert fake.commands == ["-m uv --version", "-m pip config list", uv]
    assert capsys.readouterr().err == ""


def test_install_installs_uv_first_then_falls_back_to_pip_without_it(monkeypatch, capsys) -> None:  # type: ignore
    fake = FakeRun(uv_runs=[False, False], uv_installs=True)
    monkeypatch.setattr(install.subprocess, "run", fake)
    assert install.main(["-r", "requirements.txt"]) == 0
    pip = "-m pip install --quiet --disable-pip-version-check"
    assert fake.commands == ["-m uv --version", f"{pip} {install.UV}", "-m uv --version",
                             f"{pip} --no-compile -r requirements.txt"]
    err = capsys.readouterr().err
    assert err == f"lecturelib/install.py: {install.UV} could not be installed; installing with pip (slower)\n"


def test_install_lets_pip_try_where_uv_fails(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    fake = FakeRun(uv_runs=[False, True], uv_installs=False)
    monkeypatch.setattr(install.subprocess, "run", fake)
    assert install.main(["--no-deps", "-e", "."]) == 0
    assert [c.split(" --")[0] for c in fake.commands] == ["-m uv", "-m pip install", "-m uv", "-m pip config list",
                                                         "-m uv pip install", "-m pip install"]
    assert fake.commands[-1] == "-m pip install --quiet --disable-pip-version-check --no-compile --no-deps -e ."
    assert capsys.readouterr().err == "lecturelib/install.py: uv could not install this (above); pip tries\n"
