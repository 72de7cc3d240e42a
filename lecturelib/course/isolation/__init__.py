"""Isolation: what keeps a submission's code and output from reaching anything but its own kernel.

Owns: `sandbox` (bubblewrap: a private file system, no network, its own processes, limits; the command of the
graded kernels' kernelspec), `cgroup` and `seccomp` (a sandbox's memory and tasks counted as one; the system calls it
may not make), `sanitize` (the allow-list that makes student HTML, Markdown and outputs inert in Formgrader and
feedback), `audit` (submitted code and markup that tampers with grading, reported).

May import: the base (`lecturelib.course.layout`: audit reads notebooks) and nothing else of lecturelib. sandbox,
cgroup and seccomp use only the standard library: they run in every graded kernel's supervisor. Nothing here knows
of releases, terms or grading runs; `grading` and `release` use it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lecturelib.course import lazy_exports

# module -> the names this part exports from it (imported on first use; the module itself keeps its name)
EXPORTS: dict[str, tuple[str, ...]] = {
    "sandbox": ("GIB", "KERNEL_NAME", "STATE_ENV", "Limits", "connection_paths", "socket_folder"),
    "sanitize": ("DROPPED_NOTE", "IMAGE_TYPES", "active_svg", "clean_html", "clean_markdown", "clean_notebook",
                 "clean_output", "risky_markup"),
    "audit": ("asked_functions", "audit_source", "format_findings", "markup_findings"),
}
__all__ = [name for names in EXPORTS.values() for name in names]

if TYPE_CHECKING:  # the same names, for mypy and readers
    from lecturelib.course.isolation.sandbox import GIB, KERNEL_NAME, STATE_ENV, Limits, connection_paths, socket_folder
    from lecturelib.course.isolation.sanitize import (
        DROPPED_NOTE, IMAGE_TYPES, active_svg, clean_html, clean_markdown, clean_notebook, clean_output, risky_markup
    )
    from lecturelib.course.isolation.audit import asked_functions, audit_source, format_findings, markup_findings
else:
    __getattr__ = lazy_exports(__name__, EXPORTS)
