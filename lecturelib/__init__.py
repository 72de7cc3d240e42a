"""lecturelib: the reference calculators, measurements and grading helpers of the Resource Accounting course.

Modules (imported on first use, so `import lecturelib.grading` stays light for the autograder):
configs, params, models, flops, counter, memory, step_memory, hardware, inference, profiler, data, quant, training,
plots, widgets, runmode, grading, course.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = [
    "configs",
    "counter",
    "course",
    "data",
    "flops",
    "grading",
    "hardware",
    "inference",
    "memory",
    "models",
    "params",
    "plots",
    "profiler",
    "quant",
    "runmode",
    "step_memory",
    "training",
    "widgets",
]


def __getattr__(name: str) -> ModuleType:
    if name in __all__:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
