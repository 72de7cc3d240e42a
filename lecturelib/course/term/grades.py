"""Grades out to the LMS: a CSV in the layout of Canvas's gradebook import, per assignment or per graded cell.

Canvas imports a CSV whose first five columns name the student (`Student`, `ID`, `SIS User ID`, `SIS Login ID`,
`Section`), whose second row gives each column's `Points Possible`, and whose other columns are assignments
(a column Canvas does not know becomes a new assignment). Here a column is an assignment (its total: what
Formgrader shows, nbgrader's score less any late penalty) or, with `cells=True`, one graded cell of it (a test
cell's points, or a written answer's points graded by hand). The last column, `Notes`, is Canvas's own Notes
column: late submissions, written answers not graded by hand yet, uploads collected but not graded, missing
submissions, and what collect noted about a submission's time.

The columns are the assignments asked for, else those somebody has a grade in: never every assignment the gradebook
merely knows. With Canvas's id of an assignment (`--canvas-id NN_topic=ID`, or canvas-ids.csv in the course root),
its column is titled `NN_topic (ID)`, which Canvas matches by the id: a title that differs cannot create a new
assignment.

A score Canvas should leave alone is blank: no submission, or a total some part of which (a written answer) nobody
has graded yet (`partial=True` writes such totals anyway, and the Notes say they are partial).

A spreadsheet reads a cell that starts with `=`, `+`, `-`, `@`, a tab or a carriage return as a formula: every text
cell the course exports (names, notes, titles; here and in `nbgrader export`, SafeCsvExport) that could start one
gets a leading `'` (OWASP's advice), and ids, which never start so, stay exactly as they are.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry
from nbgrader.plugins.export import CsvExportPlugin

from lecturelib.course.term.collect import read_notes
from lecturelib.course.layout import Course, nbgrader_meta, read_notebook
from lecturelib.course.term.roster import LMS_ID, valid_student

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_ROW = "    Points Possible"  # as Canvas writes it in its own export (the leading spaces too)
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")  # what makes a spreadsheet read a cell as a formula (OWASP)
CANVAS_IDS = "canvas-ids.csv"  # in the course root: `assignment,canvas_id`, a row an assignment
CANVAS_ID = re.compile(r"\d{1,18}")  # the number in the assignment's Canvas address (/assignments/ID)


@dataclass
class Column:
    """One Canvas column: an assignment's total, or one graded cell of it."""

    title: str
    assignment: str
    cell: tuple[str, str] | None  # (notebook, grade_id), or None for the assignment's total
    points: float


@dataclass
class Table:
    """The export: a header, the points row, a row a student; what the Notes say, counted."""

    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    late: int = 0  # late submissions marked
    ungraded: int = 0  # written answers still to grade by hand
    blank: int = 0  # totals left blank: a part of them is not graded yet
    text_columns: tuple[int, ...] = (0, 3, 4)  # Student, SIS Login ID, Section; and Notes, the last


def spreadsheet_text(value: str) -> str:
    """A text cell that a spreadsheet shows as text: one that could start a formula gets OWASP's leading `'`."""
    return "'" + value if value.startswith(FORMULA_START) else value


def _number(x: float) -> str:
    return f"{x:g}"


def _late(seconds: float) -> str:
    """'2 d 3 h 5 min' (rounded up to the minute: a second late is late)."""
    minutes = int(-(-seconds // 60))
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    return " ".join(f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min")) if n) or "0 min"


def _cell_order(course: Course, assignment: str, notebook: str) -> list[str]:
    """grade_ids of a notebook's graded cells in the order the release shows them (else none: sorted by name)."""
    path = course.release / assignment / f"{notebook}.ipynb"
    if not path.is_file():
        return []
    return [nbgrader_meta(c)["grade_id"] for c in read_notebook(path).cells if nbgrader_meta(c).get("grade")]


def read_canvas_ids(path: Path) -> dict[str, str]:
    """canvas-ids.csv: assignment -> its Canvas id (none when there is no such file); ValueError on a bad row."""
    if not path.is_file():
        return {}
    ids = {}
    with path.open(newline="", encoding="utf-8-sig") as f:
        for number, row in enumerate(csv.reader(f), 1):
            cells = [c.strip() for c in row]
            if not any(cells) or (number == 1 and [c.lower() for c in cells[:2]] == ["assignment", "canvas_id"]):
                continue
            if len(cells) != 2 or not CANVAS_ID.fullmatch(cells[1]):
                raise ValueError(f"{path.name} line {number}: not `assignment,canvas_id` (e.g. `02_matmul_flops,12345`, "
                                 "the number in the assignment's Canvas address)")
            ids[cells[0]] = cells[1]
    return ids


def canvas_option(values: list[str]) -> dict[str, str]:
    """`--canvas-id NN_topic=ID` values: assignment -> Canvas id; ValueError on a bad one."""
    ids = {}
    for value in values:
        name, _, number = value.partition("=")
        if not name or not CANVAS_ID.fullmatch(number.strip()):
            raise ValueError(f"--canvas-id {value!r}: write ASSIGNMENT=ID, e.g. 02_matmul_flops=12345 (the number in "
                             "the assignment's Canvas address)")
        ids[name.strip()] = number.strip()
    return ids


def _columns(course: Course, gb: Gradebook, assignments: list[str], cells: bool,
             canvas_ids: dict[str, str]) -> list[Column]:
    columns = []
    for name in assignments:
        assignment = gb.find_assignment(name)
        if not cells:
            title = f"{name} ({canvas_ids[name]})" if name in canvas_ids else name
            columns.append(Column(title, name, None, float(assignment.max_score)))
            continue
        for notebook in sorted(assignment.notebooks, key=lambda n: n.name):
            order = _cell_order(course, name, notebook.name)
            graded = sorted(notebook.grade_cells, key=lambda c: (order.index(c.name) if c.name in order else len(order),
                                                                 c.name))
            columns += [Column(f"{name} {c.name}" if len(assignment.notebooks) == 1 else f"{name} {notebook.name} {c.name}",
                               name, (notebook.name, c.name), float(c.max_score)) for c in graded]
    return columns


def export(course: Course, *, assignments: list[str] | None = None, students: list[str] | None = None,
           cells: bool = False, partial: bool = False, canvas_ids: dict[str, str] | None = None) -> Table:
    """The Canvas table of these assignments (default: every one of the gradebook that has a submission, in order)
    and students (default: every one in the gradebook: import the roster to have them all, with names). A total is
    blank until every part of it is graded, unless `partial`. `canvas_ids` (default: canvas-ids.csv's) title the
    columns `NN_topic (ID)`."""
    ids = read_canvas_ids(course.root / CANVAS_IDS) if canvas_ids is None else canvas_ids
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        known = sorted(a.name for a in gb.assignments)
        unknown = [a for a in [*(assignments or []), *ids] if a not in known and a not in _course_assignments(course)]
        if unknown:
            raise ValueError(f"assignment {unknown[0]!r} is not in the gradebook; it has: {', '.join(known) or 'none'}")
        missing_now = [a for a in assignments or [] if a not in known]
        if missing_now:
            raise ValueError(f"assignment {missing_now[0]!r} is not in the gradebook yet (nothing of it is graded); it "
                             f"has: {', '.join(known) or 'none'}")
        graded = {a.name for a in gb.assignments if a.submissions}
        names = [a for a in known if (a in assignments if assignments is not None else a in graded)]
        everyone = {s.id: s for s in gb.students}
        missing = [s for s in students or [] if s not in everyone]
        if missing:
            raise ValueError(f"student {missing[0]!r} is not in the gradebook")
        table = Table(_columns(course, gb, names, cells, ids))
        for sid in sorted(everyone if students is None else students):
            table.rows.append(_row(course, gb, everyone[sid], names, table, partial))
    return table


def _course_assignments(course: Course) -> list[str]:
    return course.assignments() if course.source.is_dir() else []


def _row(course: Course, gb: Gradebook, student: object, assignments: list[str], table: Table,
         partial: bool) -> list[str]:
    sid = str(getattr(student, "id"))
    lms_user_id = getattr(student, "lms_user_id") or ""
    for what, value, ok in (("id", sid, valid_student(sid)), ("lms_user_id", lms_user_id,
                                                               not lms_user_id or LMS_ID.fullmatch(lms_user_id))):
        if not ok:  # an id is exported as it is: one that a spreadsheet could read as a formula is never written
            raise ValueError(f"student {sid!r}: the gradebook's {what} {value!r} is not a plain id (a spreadsheet could "
                             "read it as a formula): correct the roster (course roster), then export again")
    first, last = getattr(student, "first_name") or "", getattr(student, "last_name") or ""
    name = f"{last}, {first}" if first and last else (last or first or sid)
    row = [name, lms_user_id, sid, "", ""]
    notes = []
    values: dict[tuple[str, tuple[str, str] | None], str] = {}
    for assignment in assignments:
        try:
            submission = gb.find_submission(assignment, sid)
        except MissingEntry:
            collected = (course.submitted / sid / assignment).is_dir()
            notes.append(f"{assignment}: {'not graded (collected but not autograded)' if collected else 'no submission'}")
            continue
        total, waiting = 0.0, []
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                key = (assignment, (notebook.name, grade.name))
                if grade.manual_score is None and grade.auto_score is None:  # a written answer nobody graded yet
                    waiting.append(grade.name)
                    values[key] = ""
                else:
                    values[key] = _number(float(grade.score))
                    total += float(grade.score)
        penalty = float(submission.late_submission_penalty or 0.0)
        values[(assignment, None)] = _number(max(0.0, total - penalty)) if partial or not waiting else ""
        late = submission.total_seconds_late
        if late > 0:
            table.late += 1
            notes.append(f"{assignment}: late by {_late(late)}" + (f" (penalty {_number(penalty)})" if penalty else ""))
        notes += [f"{assignment}: {note}" for note in read_notes(course.submitted / sid / assignment)]
        if waiting:
            table.ungraded += len(waiting)
            totals = any(c.cell is None for c in table.columns)
            table.blank += totals and not partial
            notes.append(f"{assignment}: {', '.join(sorted(waiting))} not graded by hand yet"
                         + ("" if not totals else "; the total is partial" if partial else "; total left blank"))
    return row + [values.get((c.assignment, c.cell), "") for c in table.columns] + ["; ".join(notes)]


def to_csv(table: Table) -> str:
    """The table as Canvas imports it; text cells that could start a formula neutralised (ids and scores as they are)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([spreadsheet_text(t) for t in (*CANVAS_COLUMNS, *(c.title for c in table.columns), "Notes")])
    writer.writerow([POINTS_ROW, "", "", "", "", *(_number(c.points) for c in table.columns), ""])
    text = {*table.text_columns, len(CANVAS_COLUMNS) + len(table.columns)}
    writer.writerows([spreadsheet_text(v) if i in text else v for i, v in enumerate(row)] for row in table.rows)
    return out.getvalue()


def write(course: Course, path: Path, table: Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_csv(table), encoding="utf-8")


class SafeCsvExport(CsvExportPlugin):
    """`nbgrader export` for this course (c.ExportApp.plugin_class): nbgrader's columns and rows, written as CSV
    (quoted: a comma in a name stays in its cell) with no text cell a spreadsheet would read as a formula."""

    KEYS = ("assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email", "raw_score",
            "late_submission_penalty", "score", "max_score")
    TEXT = ("last_name", "first_name", "email")

    def export(self, gradebook: Gradebook) -> None:
        dest = Path(self.to or "grades.csv")
        dest.parent.mkdir(parents=True, exist_ok=True)
        only_students, only_assignments = {str(s) for s in self.student}, {str(a) for a in self.assignment}
        self.log.info("Exporting grades to %s", dest)
        rows = []
        for assignment in gradebook.assignments:
            if only_assignments and assignment.name not in only_assignments:
                continue
            for student in gradebook.students:
                if only_students and student.id not in only_students:
                    continue
                row = {"assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
                       "last_name": student.last_name, "first_name": student.first_name, "email": student.email,
                       "max_score": assignment.max_score}
                try:
                    submission = gradebook.find_submission(assignment.name, student.id)
                except MissingEntry:  # nothing handed in: nbgrader's zero
                    row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
                else:
                    penalty = submission.late_submission_penalty
                    row.update(timestamp=submission.timestamp, raw_score=submission.score,
                               late_submission_penalty=penalty, score=max(0.0, submission.score - (penalty or 0.0)))
                rows.append([spreadsheet_text(str(row[k] or "")) if k in self.TEXT else
                             ("" if row[k] is None else str(row[k])) for k in self.KEYS])
        with dest.open("w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n")
            writer.writerow(self.KEYS)
            writer.writerows(rows)


def waiting(course: Course, assignment: str) -> dict[tuple[str, str], list[tuple[str, float]]]:
    """(student, notebook) -> [(grade id, points)] of the graded cells of `assignment` nobody has graded yet (a
    written answer before manual grading), read from the gradebook without writing it."""
    import sqlite3

    if not course.gradebook.is_file():
        return {}
    found: dict[tuple[str, str], list[tuple[str, float]]] = {}
    db = sqlite3.connect(f"{course.gradebook.resolve().as_uri()}?mode=ro", uri=True, timeout=120)
    try:
        rows = db.execute(
            "select sa.student_id, n.name, c.name, gc.max_score from grade g"
            " join submitted_notebook sn on g.notebook_id = sn.id join notebook n on sn.notebook_id = n.id"
            " join submitted_assignment sa on sn.assignment_id = sa.id join assignment a on sa.assignment_id = a.id"
            " join base_cell c on g.cell_id = c.id join grade_cells gc on gc.id = c.id"
            " where a.name = ? and g.auto_score is null and g.manual_score is null order by c.name",
            (assignment,)).fetchall()
    finally:
        db.close()
    for student, notebook, cell, points in rows:
        found.setdefault((student, notebook), []).append((cell, float(points)))
    return found
