"""nbgrader configuration of the Resource Accounting course (read by every `nbgrader` command run here)."""

import os

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (
    AssignLatePenalties,
    CheckCellMetadata,
    ClearHiddenTests,
    ClearOutput,
    DeduplicateIds,
    GetGrades,
    IgnorePattern,
    LimitOutput,
    OverwriteKernelspec,
    SaveAutoGrades,
)

from lecturelib.course.grading import (
    GradingExecute,
    JudgeChecks,
    OnlyFromTheCourse,
    PrepareChecks,
    RedactTests,
    RestoreMissingCells,
    SanitizeNotebook,
)
from lecturelib.course.layout import scripts_on_path
from lecturelib.course.release import AddReference, StripReference
from lecturelib.course.term import (
    EscapeNames,
    FeedbackExporter,
    HideOutputsAfterHiddenChecks,
    RefuseZipCollect,
    SafeCsvExport,
    SafeExchangeCollect,
    guard_gradebook,
)

c = get_config()  # noqa: F821 - provided by nbgrader when it loads this file

# `.venv/bin/nbgrader ...` from a shell without the venv on PATH: nbgrader runs `alembic` by name when it creates
# gradebook.db (a roster import, a due date); this interpreter's bin/ (the venv's) first on PATH finds it.
scripts_on_path()
# Every student written into a gradebook by any nbgrader command or by Formgrader: plain ids, names as text
# (lecturelib.course.term.roster); nbgrader's manual grading page prints names into its HTML, so it gets them escaped.
guard_gradebook()
c.HTMLExporter.preprocessors = [EscapeNames]

here = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.root = here
c.CourseDirectory.course_id = "resource-accounting"
c.CourseDirectory.source_directory = "source"  # instructors edit only these masters
c.CourseDirectory.release_directory = "notebooks"  # the student release, generated and committed
# submitted/, autograded/, feedback/ and gradebook.db keep their defaults in the root; .gitignore keeps them out of git.
# The exchange (nbgrader release_assignment / collect on one machine): a folder of the course, made by
# `make instructor`. With JupyterHub, set it to the shared exchange every user can write (see README).
c.Exchange.root = os.path.join(here, "exchange")
# Several autograde workers share the gradebook: wait for its lock instead of failing at once.
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(here, "gradebook.db") + "?timeout=120"

# `nbgrader collect` (and Formgrader's Collect button) copies only the assignment's own regular files from the exchange,
# never through a link. LMS downloads are collected with `python -m lecturelib.course collect ASSIGNMENT` (files or
# zips in downloaded/ASSIGNMENT/archive/ named STUDENT--FILE, or by Canvas): `nbgrader zip_collect` refuses to run.
c.ExchangeFactory.collect = SafeExchangeCollect
c.ZipCollectApp.extractor_plugin = RefuseZipCollect

# `nbgrader export` writes names and scores: into exports/ (ignored by git, like `course grades`' Canvas CSV), not
# the course root.
c.ExportPlugin.to = os.path.join(here, "exports", "grades.csv")
# nbgrader's CSV as it writes it, but quoted, and no text cell a spreadsheet would read as a formula.
c.ExportApp.plugin_class = SafeCsvExport

# A cell may build a model or time a matmul sweep: 30 s (nbgrader's default) is too short on a laptop CPU.
# (`python -m lecturelib.course autograde --cell-timeout N` overrides it for one run.)
c.Execute.timeout = 300
# Grading trusts the course's files, never the gradebook's copies of cells: the release (notebooks/) decides
# every managed cell's metadata and read-only source, and puts back deleted cells (RestoreMissingCells, in
# place of nbgrader's OverwriteCells); the checks come from the masters in source/ (PrepareChecks).
c.RestoreMissingCells.release_directory = os.path.join(here, "notebooks")
c.PrepareChecks.source_directory = os.path.join(here, "source")
c.SanitizeNotebook.release_directory = os.path.join(here, "notebooks")
c.HideOutputsAfterHiddenChecks.source_directory = os.path.join(here, "source")
# Each written answer's reference and rubric (its master's solution region) for graders in Formgrader, after it.
c.AddReference.source_directory = os.path.join(here, "source")
# Formgrader's Autograde button and plain `nbgrader autograde` refuse before nbgrader removes anything: only
# `python -m lecturelib.course autograde` grades (every kernel sandboxed).
c.Autograde.exporter_class = OnlyFromTheCourse
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    OverwriteKernelspec,
    RestoreMissingCells,
    RedactTests,  # the expected literals never reach disk next to the kernel
    CheckCellMetadata,
]

# Trusted grading (lecturelib.grading): the kernel, sandboxed, only reports plain values, judged outside it.
# GradingExecute: a timeout or a dead kernel ends the run at that cell (the cells before keep their points),
# output is capped in bytes, and it refuses to run outside `python -m lecturelib.course autograde`.
c.Autograde.autograde_preprocessors = [
    PrepareChecks,
    GradingExecute,
    JudgeChecks,
    SanitizeNotebook,  # nothing a student wrote or a kernel printed runs script where it is shown
    AddReference,  # graders only: feedback strips it (StripReference), `course feedback` checks no page shows it
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
# nbgrader 0.9.6 keeps hidden tests in feedback; remove them (their outputs never quote them, see JudgeChecks), and
# every output from the first hidden check on (it could carry the hidden inputs); verdicts stay; and the graders'
# references AddReference wrote.
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, StripReference, HideOutputsAfterHiddenChecks,
                                    SanitizeNotebook, CSSHTMLHeaderPreprocessor]
# nbconvert's HTMLExporter, its accessibility pass run only where it changes something (FeedbackExporter).
c.GenerateFeedback.exporter_class = FeedbackExporter
# Pages of Formgrader and feedback: Markdown and outputs through the course's allow-list
# (lecturelib.course.isolation.sanitize), no JavaScript or widget output, no widget state, whatever the notebook holds.
c.HTMLExporter.sanitize_html = True
c.HTMLExporter.filters = {"clean_html": "lecturelib.course.isolation.sanitize.clean_html"}
