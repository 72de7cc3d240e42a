"""The instructor's course (not in the students' bundle): four parts on one shared base, and the CLI.

* `layout` (this folder): the base every part imports — where the course's files live (`Course`), nbgrader's clean
  environment, and the notebook transforms build and check share. It imports nothing of lecturelib.course.
* `release`: making the release, the solutions and the students' bundle (build, check, bundle, reference).
* `term`: running a term (collect, roster, grades, feedback).
* `grading`: autograding (autograde, dispatch, worker, credentials, task, run, ledger, folders, guard, preprocessors,
  execute, kernel_stream).
* `isolation`: what keeps a submission from reaching anything (sandbox, cgroup, seccomp, sanitize, audit).
* `__main__`: `python -m lecturelib.course ...`, the commands of all four.

What each part may import (its `__init__` says it; tests/test_course_layout_imports.py reads it there and enforces it):
isolation only the base; release the base and isolation; term the base and release; grading the base, isolation,
release, and of the term only the names its `__init__` lists. A module imports another part through that part's
package (`from lecturelib.course.isolation import sandbox, Limits`), its own part's modules directly.

Each part's `__init__` re-exports its API explicitly (`lazy_exports`), imported on first use: the modules that run
in a graded kernel (grading.kernel_stream), the sandbox's supervisor (isolation.sandbox) and Dask's preloads load
nothing else of the course. A part exports no name that is one of its modules: `release.build` is the module, the
function is `release.build.build`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A part's module `__getattr__` (PEP 562): each name of `exports` (module -> names), from its module on first use."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str) -> Any:
        if name not in where:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        setattr(sys.modules[package], name, value)  # found without this function from now on
        return value

    return __getattr__
