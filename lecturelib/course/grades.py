"""Grades out to the LMS: a CSV in the layout of Canvas's gradebook import, per assignment or per graded cell.

Canvas imports a CSV whose first five columns name the student (`Student`, `ID`, `SIS User ID`, `SIS Login ID`,
`Section`), whose second row gives each column's `Points Possible`, and whose other columns are assignments
(a column Canvas does not know becomes a new assignment). Here a column is an assignment (its total: what
Formgrader shows, nbgrader's score less any late penalty) or, with `cells=True`, one graded cell of it (a test
cell's points, or a written answer's points graded by hand). The last column, `Notes`, is Canvas's own Notes
column: late submissions, written answers not graded by hand yet, missing submissions.

A score Canvas should leave alone is blank: no submission, or a written answer nobody has graded yet.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.api import Gradebook, MissingEntry

from lecturelib.course.layout import Course, nbgrader_meta, read_notebook

CANVAS_COLUMNS = ("Student", "ID", "SIS User ID", "SIS Login ID", "Section")
POINTS_ROW = "    Points Possible"  # as Canvas writes it in its own export (the leading spaces too)


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


def _columns(course: Course, gb: Gradebook, assignments: list[str], cells: bool) -> list[Column]:
    columns = []
    for name in assignments:
        assignment = gb.find_assignment(name)
        if not cells:
            columns.append(Column(name, name, None, float(assignment.max_score)))
            continue
        for notebook in sorted(assignment.notebooks, key=lambda n: n.name):
            order = _cell_order(course, name, notebook.name)
            graded = sorted(notebook.grade_cells, key=lambda c: (order.index(c.name) if c.name in order else len(order),
                                                                 c.name))
            columns += [Column(f"{name} {c.name}" if len(assignment.notebooks) == 1 else f"{name} {notebook.name} {c.name}",
                               name, (notebook.name, c.name), float(c.max_score)) for c in graded]
    return columns


def export(course: Course, *, assignments: list[str] | None = None, students: list[str] | None = None,
           cells: bool = False) -> Table:
    """The Canvas table of these assignments (default: every one in the gradebook, in order) and students (default:
    every one in the gradebook: import the roster to have them all, with names)."""
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        known = sorted(a.name for a in gb.assignments)
        unknown = [a for a in assignments or [] if a not in known]
        if unknown:
            raise ValueError(f"assignment {unknown[0]!r} is not in the gradebook; it has: {', '.join(known) or 'none'}")
        names = [a for a in known if assignments is None or a in assignments]
        everyone = {s.id: s for s in gb.students}
        missing = [s for s in students or [] if s not in everyone]
        if missing:
            raise ValueError(f"student {missing[0]!r} is not in the gradebook")
        table = Table(_columns(course, gb, names, cells))
        for sid in sorted(everyone if students is None else students):
            table.rows.append(_row(gb, everyone[sid], names, table))
    return table


def _row(gb: Gradebook, student: object, assignments: list[str], table: Table) -> list[str]:
    sid = str(getattr(student, "id"))
    first, last = getattr(student, "first_name") or "", getattr(student, "last_name") or ""
    name = f"{last}, {first}" if first and last else (last or first or sid)
    row = [name, getattr(student, "lms_user_id") or "", sid, "", ""]
    notes = []
    values: dict[tuple[str, tuple[str, str] | None], str] = {}
    for assignment in assignments:
        try:
            submission = gb.find_submission(assignment, sid)
        except MissingEntry:
            notes.append(f"{assignment}: no submission")
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
        values[(assignment, None)] = _number(max(0.0, total - penalty))
        late = submission.total_seconds_late
        if late > 0:
            table.late += 1
            notes.append(f"{assignment}: late by {_late(late)}" + (f" (penalty {_number(penalty)})" if penalty else ""))
        if waiting:
            table.ungraded += len(waiting)
            notes.append(f"{assignment}: {', '.join(sorted(waiting))} not graded by hand yet")
    return row + [values.get((c.assignment, c.cell), "") for c in table.columns] + ["; ".join(notes)]


def to_csv(table: Table) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([*CANVAS_COLUMNS, *(c.title for c in table.columns), "Notes"])
    writer.writerow([POINTS_ROW, "", "", "", "", *(_number(c.points) for c in table.columns), ""])
    writer.writerows(table.rows)
    return out.getvalue()


def write(course: Course, path: Path, table: Table) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(to_csv(table), encoding="utf-8")
