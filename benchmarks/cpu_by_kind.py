"""Where a command's CPU goes: CPU seconds by kind of process (kernels, Chromium, pytest, nbgrader, ...).

    python3 benchmarks/cpu_by_kind.py run -- make test      # samples every process while the command runs
    python3 benchmarks/cpu_by_kind.py summary cpu.json      # the table again, from a saved sample

Every 0.5 s it reads /proc/PID/stat of every process (user + system time) and keeps, per process, the last figure
seen; at the end it sums them by kind, read from the command line. A process that ends between two samples loses
at most its last 0.5 s, and one shorter than that may be missed: an undercount of short processes. Everything on
the machine is counted, so run it with nothing else busy. README "Measured" has what a CI run showed.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

TICK = os.sysconf("SC_CLK_TCK")


def kind(comm: str, cmd: str) -> str:
    """The kind of a process, from its name and command line."""
    rules = [("chrom", "chromium"), ("ipykernel", "Jupyter kernel"), ("bwrap", "bubblewrap"),
             ("forkserver", "grading processes"), ("exec(eval(sys.stdin", "pytest worker"), ("pytest", "pytest"),
             ("jupyter-lab", "Jupyter server"), ("jupyterhub", "JupyterHub"), ("nbgrader", "nbgrader command"),
             ("lecturelib.course", "course command"), ("mypy", "mypy"), ("pip install", "pip"),
             ("compileall", "compileall"), ("uv ", "uv"), ("dask", "Dask"), ("distributed", "Dask")]
    text = f"{comm} {cmd}"
    return next((name for needle, name in rules if needle in text), comm)


def sample(seen: dict[tuple[str, int], list[Any]], stop: threading.Event) -> None:
    """Until `stop`: every process's CPU seconds, name and command line, keyed by (pid, start time)."""
    initial = True  # what a process ran before the command started is not counted; a later one counts from 0
    while not stop.is_set():
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            comm, fields = stat[stat.index("(") + 1:stat.rindex(")")], stat[stat.rindex(")") + 2:].split()
            seconds, key = (int(fields[11]) + int(fields[12])) / TICK, (pid, int(fields[19]))
            row = seen.setdefault(key, [seconds if initial else 0.0, seconds, comm, cmd])  # from, last, name, cmdline
            row[1] = max(row[1], seconds)
            row[3] = cmd or row[3]  # an exiting process shows an empty command line
        initial = False
        stop.wait(0.5)


def table(rows: list[list[Any]]) -> str:
    by: collections.Counter[str] = collections.Counter()
    count: collections.Counter[str] = collections.Counter()
    for first, last, comm, cmd in rows:
        k = kind(comm, cmd)
        by[k] += last - first
        count[k] += 1
    lines = [f"{seconds:9.1f} CPU-s {count[k]:5d} processes  {k}" for k, seconds in by.most_common(25) if seconds >= 0.05]
    return "\n".join([*lines, f"{sum(by.values()):9.1f} CPU-s in all"])


def main(argv: list[str]) -> int:
    if argv[:1] == ["summary"] and len(argv) == 2:
        print(table(json.loads(Path(argv[1]).read_text())))
        return 0
    if argv[:2] != ["run", "--"] or len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    seen: dict[tuple[str, int], list[Any]] = {}
    stop = threading.Event()
    sampler = threading.Thread(target=sample, args=(seen, stop), daemon=True)
    sampler.start()
    started = time.monotonic()
    code = subprocess.run(argv[2:]).returncode
    stop.set()
    sampler.join()
    Path("cpu.json").write_text(json.dumps(list(seen.values())))
    print(f"{argv[2:]}: exit {code} after {time.monotonic() - started:.0f} s; the sample is in cpu.json")
    print(table(list(seen.values())))
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
