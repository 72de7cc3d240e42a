"""lecturelib.course.grades: the Canvas gradebook-import CSV, per assignment and per graded cell (exact files)."""

from __future__ import annotations

import datetime
import warnings
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from lecturelib.course.__main__ import main
from lecturelib.course.grades import export, to_csv
from lecturelib.course.layout import Course, scripts_on_path

DUE = datetime.datetime(2026, 12, 1, 12, 0, 0)


@pytest.fixture(scope="module")
def course(tmp_path_factory: pytest.TempPathFactory) -> Course:
    """A gradebook as autograde and Formgrader leave it: two assignments, a roster of three, one late submission,
    one written answer graded by hand and one not yet, one student who handed nothing in."""
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
        gb.add_student("ann", first_name="Ann", last_name="Lee", lms_user_id="101")
        gb.add_student("bob")
        gb.add_student("cy", first_name="Cy", last_name="Ng", lms_user_id="103")
        scores = [  # (assignment, student, submitted at, {cell: (auto, manual)})
            ("01_toy", "ann", DUE - datetime.timedelta(hours=1), {"ex1_1_test": (2.0, None), "ex1_2": (None, 2.5)}),
            ("01_toy", "bob", DUE + datetime.timedelta(hours=1, minutes=4, seconds=30),
             {"ex1_1_test": (0.0, None), "ex1_2": (None, None)}),
            ("02_toy", "ann", None, {"ex2_1_test": (4.0, None)}),
        ]
        for assignment, student, when, cells in scores:
            with warnings.catch_warnings():  # SQLAlchemy's autoflush notes inside nbgrader's add_submission
                warnings.simplefilter("ignore")
                gb.add_submission(assignment, student, timestamp=when)
            for cell, (auto, manual) in cells.items():
                grade = gb.find_grade(cell, assignment, assignment, student)
                grade.auto_score, grade.manual_score = auto, manual
        gb.db.commit()
    return course


BY_ASSIGNMENT = """\
Student,ID,SIS User ID,SIS Login ID,Section,01_toy,02_toy,Notes
    Points Possible,,,,,5,4,
"Lee, Ann",101,ann,,,4.5,4,
bob,,bob,,,0,,01_toy: late by 1 h 5 min; 01_toy: ex1_2 not graded by hand yet; 02_toy: no submission
"Ng, Cy",103,cy,,,,,01_toy: no submission; 02_toy: no submission
"""

BY_CELL = """\
Student,ID,SIS User ID,SIS Login ID,Section,01_toy ex1_1_test,01_toy ex1_2,Notes
    Points Possible,,,,,2,3,
bob,,bob,,,0,,01_toy: late by 1 h 5 min; 01_toy: ex1_2 not graded by hand yet
"""


def test_canvas_csv_per_assignment(course: Course) -> None:
    table = export(course)
    assert to_csv(table) == BY_ASSIGNMENT
    assert (table.late, table.ungraded) == (1, 1)


def test_canvas_csv_per_cell_of_one_assignment_and_student(course: Course) -> None:
    assert to_csv(export(course, assignments=["01_toy"], students=["bob"], cells=True)) == BY_CELL


def test_grades_command_writes_into_exports(course: Course, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(course.root)
    assert main(["grades"]) == 0
    assert (course.root / "exports" / "canvas-grades.csv").read_text() == BY_ASSIGNMENT
    assert capsys.readouterr().out.strip() == (
        "wrote exports/canvas-grades.csv: 3 students, 2 columns (Canvas gradebook import); Notes: 1 late submission, "
        "1 written answer not graded by hand yet")
    assert main(["grades", "--cells", "--assignment", "01_toy", "--student", "bob"]) == 0
    assert (course.root / "exports" / "canvas-grades-cells.csv").read_text() == BY_CELL
    assert main(["grades", "--assignment", "nope"]) == 2
    assert "assignment 'nope' is not in the gradebook; it has: 01_toy, 02_toy" in capsys.readouterr().err
