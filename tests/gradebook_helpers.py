"""What tests do to a gradebook as an instructor would in Formgrader."""

import sqlite3

from lecturelib.course.layout import Course


def grade_the_written_answers(course: Course) -> None:
    """What an instructor does in Formgrader before feedback (which writes no page while a written answer waits):
    every written answer nobody graded yet gets its points (1)."""
    with sqlite3.connect(course.gradebook) as db:
        db.execute("update grade set manual_score = 1, needs_manual_grade = 0 where auto_score is null and "
                   "manual_score is null")
