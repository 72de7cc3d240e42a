"""Autograding: each submission graded in a sandboxed kernel, checked, and written into the course by one process.

Owns: `autograde` (the coordinator: one run over the collected submissions; it alone writes autograded/ and the
gradebook), `task` (grading one submission: the same code on this machine and on a Dask worker), `dispatch` (threads
of this process, or the course's Dask cluster), `worker` and `credentials` (a cluster worker's preload; the course's
certificate authority, mutual TLS, what each peer may ask), `run` (one run's lock, the state a killed run leaves and
its repair), `ledger` (what each submission was last graded from: a submission unchanged since is not graded again),
`folders` (private folders short enough for Unix sockets, threads per kernel, logs read bounded), `guard` (what
grading must leave alone, checked after each submission and after the run), `preprocessors` (nbgrader's pipeline:
cells from the release, checks from the masters, judged outside the kernel), `execute` (the pipeline's kernel:
`GradingExecute`, sandboxed, its output capped, a fair stop at a cell past its limit), `kernel_stream` (the
graded kernel's stdout and stderr: it is imported inside the kernel, which is why this package imports nothing until
a name is used).

May import: the base (`lecturelib.course.layout`), `isolation` (the sandbox every kernel runs in, the allow-list of
what pages show), `release` (a grader's reference cell is no answer), lecturelib outside the course, and of `term`
only these names, from `lecturelib.course.term`:
* `screen`: a submission's files checked before anything of the run reads them;
* `valid_student`: which folder names of submitted/ are students;
* `read_time` and `TIMESTAMP`: a submission's time (timestamp.txt), for late penalties.
Nothing imports `grading` but the CLI (`lecturelib.course.__main__`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lecturelib.course import lazy_exports

# module -> the names this part exports from it (imported on first use; the module itself keeps its name)
EXPORTS: dict[str, tuple[str, ...]] = {
    "autograde": ("SUBMISSION_TIMEOUT_S", "OnlyFromTheCourse", "Outcome", "Report", "SandboxUnavailable",
                  "check_sandbox", "format_table", "printable", "score_text"),
    "credentials": ("DEFAULT_PORT", "CredentialsError"),
    "dispatch": ("ClusterError",),
    "guard": ("Guard", "RunCheck", "gradebook_cells"),
    "execute": ("SANDBOX_ENV", "GradingExecute"),
    "preprocessors": ("JudgeChecks", "PrepareChecks", "RedactTests", "RestoreMissingCells", "SanitizeNotebook"),
    "run": ("Run", "RunLocked", "Stopped"),
    "task": ("Kit", "Result", "Settings", "Task", "grade"),
    "worker": ("COURSE_ENV",),
}
__all__ = [name for names in EXPORTS.values() for name in names]

if TYPE_CHECKING:  # the same names, for mypy and readers
    from lecturelib.course.grading.autograde import (
        SUBMISSION_TIMEOUT_S, OnlyFromTheCourse, Outcome, Report, SandboxUnavailable, check_sandbox, format_table,
        printable, score_text
    )
    from lecturelib.course.grading.credentials import DEFAULT_PORT, CredentialsError
    from lecturelib.course.grading.dispatch import ClusterError
    from lecturelib.course.grading.guard import Guard, RunCheck, gradebook_cells
    from lecturelib.course.grading.execute import SANDBOX_ENV, GradingExecute
    from lecturelib.course.grading.preprocessors import (
        JudgeChecks, PrepareChecks, RedactTests, RestoreMissingCells, SanitizeNotebook
    )
    from lecturelib.course.grading.run import Run, RunLocked, Stopped
    from lecturelib.course.grading.task import Kit, Result, Settings, Task, grade
    from lecturelib.course.grading.worker import COURSE_ENV
else:
    __getattr__ = lazy_exports(__name__, EXPORTS)
