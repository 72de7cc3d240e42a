"""Making the release and the students' bundle: what students get, built from the instructors' masters.

Owns: `build` (source/ -> notebooks/ (the release) and solutions/; `check`: drift, stored outputs, test cells that
grade the solution or the release wrongly), `bundle` (the students' course: no source/, no solutions, no hidden test,
no lecturelib.course), `reference` (each written answer's reference and rubric, for graders in Formgrader; feedback
strips it).

May import: the base (`lecturelib.course.layout`), `isolation` (check runs each notebook's kernel on IPC sockets in
the sandbox's socket folders), and lecturelib outside the course (`lecturelib.grading`: how test cells are judged).
Never `term` or `grading`: a release is made before any term and knows nothing of grading runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lecturelib.course import lazy_exports

# module -> the names this part exports from it (imported on first use; the module itself keeps its name)
EXPORTS: dict[str, tuple[str, ...]] = {
    "build": ("check", "execute"),
    "bundle": ("BundleError", "MARKER", "scan", "secret_lines"),
    "reference": ("HEADING", "MARK", "AddReference", "StripReference", "chunks", "reference_chunks"),
}
__all__ = [name for names in EXPORTS.values() for name in names]

if TYPE_CHECKING:  # the same names, for mypy and readers
    from lecturelib.course.release.build import check, execute
    from lecturelib.course.release.bundle import BundleError, MARKER, scan, secret_lines
    from lecturelib.course.release.reference import (
        HEADING, MARK, AddReference, StripReference, chunks, reference_chunks
    )
else:
    __getattr__ = lazy_exports(__name__, EXPORTS)
