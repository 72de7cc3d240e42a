"""Running a term: submissions in, the class list kept, grades and feedback out.

Owns: `collect` (the exchange's collect and LMS downloads into submitted/; `screen`, what a submission may hold),
`roster` (the class list in the gradebook, LMS ids, names as plain text), `grades` (the Canvas gradebook-import CSV,
nbgrader's own export made safe), `feedback` (pages that never show a hidden test or a grader's reference).

May import: the base (`lecturelib.course.layout`), `release` (feedback knows the references it must not show), and
lecturelib outside the course. Never `grading` or `isolation`: a term reads what grading left (autograded/, the
gradebook), and grading reaches the term only through the names `grading`'s docstring lists.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lecturelib.course import lazy_exports

# module -> the names this part exports from it (imported on first use; the module itself keeps its name)
EXPORTS: dict[str, tuple[str, ...]] = {
    "collect": ("LMS_NAMES", "TIMESTAMP", "RefuseZipCollect", "Releases", "SafeExchangeCollect", "collect_downloads",
                "lms_name", "read_time", "screen", "time_text"),
    "roster": ("EscapeNames", "guard_gradebook", "import_roster", "plain_text", "read_roster", "read_roster_csv",
               "read_worksheet", "valid_student"),
    "grades": ("CANVAS_IDS", "SafeCsvExport", "canvas_option", "read_canvas_ids", "spreadsheet_text", "to_csv",
               "waiting"),
    "feedback": ("FeedbackExporter", "HideOutputsAfterHiddenChecks", "hidden_inputs", "hidden_lines", "leak"),
}
__all__ = [name for names in EXPORTS.values() for name in names]

if TYPE_CHECKING:  # the same names, for mypy and readers
    from lecturelib.course.term.collect import (
        LMS_NAMES, TIMESTAMP, RefuseZipCollect, Releases, SafeExchangeCollect, collect_downloads, lms_name, read_time,
        screen, time_text
    )
    from lecturelib.course.term.roster import (
        EscapeNames, guard_gradebook, import_roster, plain_text, read_roster, read_roster_csv, read_worksheet,
        valid_student
    )
    from lecturelib.course.term.grades import (
        CANVAS_IDS, SafeCsvExport, canvas_option, read_canvas_ids, spreadsheet_text, to_csv, waiting
    )
    from lecturelib.course.term.feedback import (
        FeedbackExporter, HideOutputsAfterHiddenChecks, hidden_inputs, hidden_lines, leak
    )
else:
    __getattr__ = lazy_exports(__name__, EXPORTS)
