"""Generate nbgrader feedback and prove that it shows no hidden test."""

from __future__ import annotations

import html

from lecturelib.course.layout import HIDDEN_MARKS, Course, is_test_cell, read_notebook


def hidden_lines(course: Course, assignment: str) -> set[str]:
    """The stripped lines of every hidden test block of an assignment's masters."""
    lines: set[str] = set()
    for master in course.source_notebooks(assignment):
        for cell in read_notebook(master).cells:
            if not is_test_cell(cell):
                continue
            inside, visible = False, set()
            hidden: set[str] = set()
            for line in cell.source.split("\n"):
                if HIDDEN_MARKS[0] in line:
                    inside = True
                elif HIDDEN_MARKS[1] in line:
                    inside = False
                else:
                    (hidden if inside else visible).add(line.strip())
            lines |= {ln for ln in hidden - visible if len(ln) >= 8}
    return lines


def feedback(course: Course, assignments: list[str]) -> list[str]:
    """Generate feedback for every autograded submission; return problems (a leak is one)."""
    problems = []
    for assignment in assignments:
        done = course.nbgrader("generate_feedback", assignment, "--force")
        if done.returncode != 0:
            problems.append(f"{assignment}: nbgrader generate_feedback failed (see its log)")
        secret = hidden_lines(course, assignment)
        for page in sorted(course.feedback.glob(f"*/{assignment}/*.html")):
            text = html.unescape(page.read_text(encoding="utf-8", errors="replace"))
            leaks = sorted(ln for ln in secret if ln in text)
            if leaks:
                page.unlink()  # never leave a page that shows hidden tests where it could be released
                problems.append(f"{page.relative_to(course.root)} showed a hidden test line ({leaks[0][:60]}); removed")
    return problems
