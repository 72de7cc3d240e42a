"""What one notebook costs in CPU at quick sizes (what every grading of it runs), and how much of that is imports.

    .venv/bin/python benchmarks/notebook_cpu.py solutions/02_matmul_flops.ipynb [more.ipynb ...]

Runs the notebook's code cells in order in one IPython shell of this process (the inline backend, as in a kernel,
so every figure is rendered to PNG), with `LECTURELIB_QUICK=1` and one thread, and prints per notebook: the CPU
seconds of all its cells, of rendering its figures, and what the three largest imports cost when the notebook
first reaches them (torch; torch._dynamo, which PyTorch imports at the first TorchDispatchMode, FlopCounterMode or
torch.export; matplotlib.pyplot). A kernel's own start (about 0.5 CPU-s) and nbgrader's work are not included:
README "Measured" has a whole CI run's figures per kind of process (benchmarks/cpu_by_kind.py).
"""

from __future__ import annotations

import builtins
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

os.environ["LECTURELIB_QUICK"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", "1")

WATCHED = ("torch", "torch._dynamo", "matplotlib.pyplot")


class ImportClock:
    """CPU seconds of the first import of each watched module, its own imports included (builtins.__import__, which
    every `import` statement goes through, wrapped)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.original = builtins.__import__

    def __call__(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (), level: int = 0) -> Any:
        if level or name not in WATCHED or name in sys.modules or name in self.seconds:
            return self.original(name, globals, locals, fromlist, level)
        started = time.process_time()
        try:
            return self.original(name, globals, locals, fromlist, level)
        finally:
            self.seconds[name] = time.process_time() - started


def measure(path: Path) -> dict[str, Any]:
    from IPython.core import pylabtools
    from IPython.core.interactiveshell import InteractiveShell

    class Shell(InteractiveShell):
        def enable_gui(self, gui: str | None = None) -> None:  # the inline backend needs no event loop
            pass

    clock = ImportClock()
    builtins.__import__ = clock
    shell = Shell.instance()
    started = time.process_time()  # from here on, what a kernel pays for the notebook: pyplot comes with the backend
    clock("matplotlib.pyplot")  # what enabling the backend imports first (through importlib, not an import statement)
    shell.enable_matplotlib("inline")
    figures = {"n": 0, "s": 0.0}
    render = pylabtools.print_figure

    def timed_render(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return render(*args, **kwargs)
        finally:
            figures["n"] += 1
            figures["s"] += time.process_time() - started

    pylabtools.print_figure = timed_render
    pylabtools.select_figure_formats(shell, {"png"})  # registered again, with the timed function
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    errors = 0
    for cell in cells:
        result = shell.run_cell("".join(cell["source"]), silent=False)
        errors += not result.success
    return {"cells": time.process_time() - started, "figures": figures["n"], "figure_s": figures["s"],
            "imports": clock.seconds, "errors": errors}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    if len(argv) > 1:  # each notebook in a fresh process: imports are what a fresh kernel pays
        import subprocess
        return max(subprocess.run([sys.executable, __file__, a]).returncode for a in argv)
    path = Path(argv[0])
    saved = sys.stdout
    sys.stdout = open(os.devnull, "w")  # the notebook's own output
    try:
        m = measure(path)
    finally:
        sys.stdout.close()
        sys.stdout = saved
    imports = ", ".join(f"{name} {m['imports'].get(name, 0.0):.2f}" for name in WATCHED)
    print(f"{path.stem}: cells {m['cells']:.1f} CPU-s; imports: {imports}; {m['figures']} figures "
          f"{m['figure_s']:.2f} CPU-s" + (f"; {m['errors']} cells failed" if m["errors"] else ""))
    return 1 if m["errors"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
