"""lecturelib/install.py: setup's uv gets what pip's configuration asks pip for (the venv itself is CI's setup)."""

from __future__ import annotations

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
