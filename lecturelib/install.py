"""Install packages into the course's venv with uv, under the same configuration pip would use.

    .venv/bin/python lecturelib/install.py -r requirements.txt
    .venv/bin/python lecturelib/install.py --no-deps --no-build-isolation -e .

Setup (both Makefiles) runs this file by its path, before lecturelib is installed: it needs only the standard
library; it has pip install uv into the venv first (`UV`), and falls back to pip should uv be unavailable or fail.
uv resolves and unpacks in parallel where pip does it one package at a time in Python (the course's requirements
into a fresh venv: 91 s with pip, 10 s with uv, README "Measured"); the packages installed are the same (the same
pins, resolved against the same indexes).

uv does not read pip's configuration, so this passes it on: the indexes, find-links, constraints, trusted hosts,
certificate and proxy that `pip config list` reports (pip.conf files and PIP_* variables: a university's mirror, a
machine's local wheels), with pip's rule of taking the best version from all indexes together. Other arguments go to
`uv pip install` unchanged.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Sequence

UV = "uv==0.13.9"  # installed by pip into the venv on the first call
# pip option -> uv option (each value of a list option passed once); a value-less pip option maps to a flag
_LIST_OPTIONS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "--constraint",
                 "trusted-host": "--allow-insecure-host"}
_ONE_VALUE = {"index-url": "--index-url"}
_FLAGS = {"no-index": "--no-index"}
_ENV = {"cert": ("SSL_CERT_FILE",), "proxy": ("HTTPS_PROXY", "HTTP_PROXY")}
# where a pip option is set, the first that sets it wins: environment variables, then [install], then [global]
_SECTIONS = (":env:", "install", "global")


def pip_settings(listing: str) -> dict[str, str]:
    """pip's effective options from the output of `pip config list` (`section.name='value'` lines)."""
    found: dict[tuple[str, str], str] = {}
    for line in listing.splitlines():
        key, sep, value = line.partition("=")
        section, dot, name = key.rpartition(".")
        if not sep or not dot or section not in _SECTIONS:
            continue
        try:
            (text,) = shlex.split(value)
        except ValueError:
            continue
        found[section, name] = text
    settings: dict[str, str] = {}
    for section in reversed(_SECTIONS):  # the more specific section overwrites
        settings.update({name: text for (where, name), text in found.items() if where == section})
    return settings


def uv_arguments(settings: dict[str, str], given: Sequence[str] = ()) -> tuple[list[str], dict[str, str]]:
    """(options of `uv pip install`, environment variables) that ask uv for what these pip settings ask pip; an
    option among the `given` arguments (`--index-url URL` for PyTorch's CPU build) replaces the configured one."""
    args = ["--index-strategy", "unsafe-best-match"]  # pip's rule: the best version among every index
    env: dict[str, str] = {}
    for name, text in sorted(settings.items()):  # a fixed order, whatever order pip listed them in
        if name in _LIST_OPTIONS:
            for value in text.split():
                args += [_LIST_OPTIONS[name], value]
        elif name in _ONE_VALUE and _ONE_VALUE[name] not in given:
            args += [_ONE_VALUE[name], text]
        elif name in _FLAGS and text.strip().lower() in {"1", "true", "yes", "on"}:
            args.append(_FLAGS[name])
        elif name in _ENV:
            env.update({variable: text for variable in _ENV[name]})
    return args, env


def has_uv() -> bool:
    """Whether this venv runs uv (the wheel's `python -m uv`)."""
    return subprocess.run([sys.executable, "-m", "uv", "--version"], capture_output=True).returncode == 0


def main(argv: list[str]) -> int:
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    ready = has_uv()
    if not ready:
        subprocess.run([*pip, UV])  # from the indexes pip is configured with
        ready = has_uv()
    if ready:
        listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
        args, env = uv_arguments(pip_settings(listing.stdout if listing.returncode == 0 else ""), argv)
        # copies, not links into uv's cache: the venv's files stay the venv's own, as pip leaves them
        command = [sys.executable, "-m", "uv", "pip", "install", "--quiet", "--python", sys.executable,
                   "--link-mode", "copy", *args, *argv]
        if subprocess.run(command, env={**os.environ, **env}).returncode == 0:
            return 0
        print("lecturelib/install.py: uv could not install this (above); pip tries", file=sys.stderr, flush=True)
    else:
        print(f"lecturelib/install.py: {UV} could not be installed; installing with pip (slower)", file=sys.stderr,
              flush=True)
    return subprocess.run([*pip, "--no-compile", *argv]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
