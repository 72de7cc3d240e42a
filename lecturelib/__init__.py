"""lecturelib: the reference calculators, measurements and grading helpers of the Resource Accounting course.

Modules (imported on first use, so `import lecturelib.grading` stays light for the autograder):
configs, params, models, flops, counter, traffic, memory, step_memory, hardware, machine, inference, profiler, data,
quant, training, plots, widgets, runmode, grading, workspace, course (the instructor's; not in the student bundle).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

_MODULES = [
    "configs",
    "counter",
    "course",
    "data",
    "flops",
    "grading",
    "hardware",
    "inference",
    "machine",
    "memory",
    "models",
    "params",
    "plots",
    "profiler",
    "quant",
    "runmode",
    "step_memory",
    "traffic",
    "training",
    "widgets",
    "workspace",
]
_HERE = Path(__file__).parent
__all__ = [m for m in _MODULES if (_HERE / f"{m}.py").is_file() or (_HERE / m / "__init__.py").is_file()]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
