"""Generate nbgrader feedback, prove that it shows no hidden test and no graders' reference, and name what got no page."""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path

from lecturelib.course.layout import HIDDEN_MARKS, Course, is_test_cell, read_notebook
from lecturelib.course.reference import chunks, reference_chunks

MIN_SECRET_CHARS = 20  # shorter hidden lines ("counted_matmul(") also stand in students' own code


def _plain(text: str) -> str:
    """What a page shows, whitespace folded: tags dropped (code is highlighted token by token)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


def hidden_lines(course: Course, assignment: str) -> set[str]:
    """Lines of the hidden test blocks that the student release does not show anywhere."""
    lines: set[str] = set()
    for master in course.source_notebooks(assignment):
        released = course.release / assignment / master.name
        public = _plain("\n".join(c.source for c in read_notebook(released).cells)) if released.exists() else ""
        for cell in read_notebook(master).cells:
            if not is_test_cell(cell):
                continue
            inside = False
            for line in cell.source.split("\n"):
                if HIDDEN_MARKS[0] in line:
                    inside = True
                elif HIDDEN_MARKS[1] in line:
                    inside = False
                elif inside and len(_plain(line)) >= MIN_SECRET_CHARS and _plain(line) not in public:
                    lines.add(_plain(line))
    return lines


def _markdown_chunks(path: Path) -> set[str]:
    """What the markdown cells of a notebook show (a student's own words may repeat the reference)."""
    try:
        return set().union(*(chunks(c.source) for c in read_notebook(path).cells if c.cell_type == "markdown"))
    except (OSError, ValueError):
        return set()


def unwritten(course: Course, assignment: str) -> list[str]:
    """Every submitted notebook of `assignment` without a feedback page as new as its autograded notebook, and why."""
    problems = []
    for notebook in sorted(course.submitted.glob(f"*/{assignment}/*.ipynb")) if course.submitted.is_dir() else []:
        if not (course.release / assignment / notebook.name).is_file():
            continue  # not a notebook of the assignment (nbgrader grades only those)
        student = notebook.parent.parent.name
        graded = course.autograded / student / assignment / notebook.name
        page = (course.feedback / student / assignment / notebook.name).with_suffix(".html")
        where = f"feedback/{student}/{assignment}/{page.name}"
        if not graded.is_file():
            problems.append(f"{where} not written: {student}'s {assignment} is not autograded (no autograded/{student}/"
                            f"{assignment}/{notebook.name}); grade it with `python -m lecturelib.course autograde "
                            f"{assignment} --student {student}`, then run feedback again")
        elif not page.is_file() or page.stat().st_mtime < graded.stat().st_mtime:
            problems.append(f"{where} not written: nbgrader generate_feedback made no page for it")
    return problems


def local_mathjax(course: Course) -> None:
    """feedback/mathjax/: jupyter-server-mathjax's MathJax (what Formgrader serves), which a feedback page opened from
    disk loads (jupyter/share's mathjax template) instead of the CDN: formulas render offline."""
    import jupyter_server_mathjax

    kept, copy = course.feedback / "mathjax", Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (kept / "MathJax.js").is_file() or (kept / "MathJax.js").read_bytes() != (copy / "MathJax.js").read_bytes():
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(copy, kept)


def feedback(course: Course, assignments: list[str]) -> list[str]:
    """Generate feedback for every autograded submission; return problems: a leak, and every submitted notebook
    that got no page."""
    problems = []
    for assignment in assignments:
        if list(course.autograded.glob(f"*/{assignment}/*.ipynb")):  # else nbgrader would fail: nothing to do
            local_mathjax(course)
            done = course.nbgrader("generate_feedback", assignment, "--force")
            if done.returncode != 0:
                errors = [ln.split("] ", 1)[-1] for ln in done.stderr.splitlines() if "ERROR" in ln]
                problems.append(f"{assignment}: nbgrader generate_feedback failed: {(errors or ['no message'])[0][:200]}")
        secret = hidden_lines(course, assignment)
        graders = reference_chunks(course.source_notebooks(assignment))  # the written answers' references
        for page in sorted(course.feedback.glob(f"*/{assignment}/*.html")):
            text = _plain(page.read_text(encoding="utf-8", errors="replace"))
            leaks = sorted(ln for ln in secret if ln in text)
            mine = _markdown_chunks(course.submitted / page.parent.parent.name / assignment / f"{page.stem}.ipynb")
            public = _markdown_chunks(course.release / assignment / f"{page.stem}.ipynb")
            shown = sorted(c for c in graders - mine - public if c in text)  # not what the student wrote
            if shown and not leaks:
                page.unlink()
                problems.append(f"{page.relative_to(course.root)} showed the graders' reference ({shown[0][:60]}); "
                                "removed")
            if leaks:
                page.unlink()  # never leave a page that shows hidden tests where it could be released
                problems.append(f"{page.relative_to(course.root)} showed a hidden test line ({leaks[0][:60]}); removed")
        leaked = {p.split(" showed ", 1)[0] for p in problems}  # removed pages: said already
        problems += [p for p in unwritten(course, assignment) if p.split(" not written", 1)[0] not in leaked]
    return problems
