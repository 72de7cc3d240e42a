"""Generate nbgrader feedback, prove that it shows no hidden test, none of a hidden check's inputs and no graders'
reference, and name every submitted notebook that got no page.

A hidden check's inputs reach the kernel (it must compute on them), and from then on anything the kernel prints
could carry them: a `pre_run_cell` hook that echoes each cell, a function that records its arguments, an
exception class named after them. So feedback (`HideOutputsAfterHiddenChecks`, in GenerateFeedback's
preprocessors) keeps every cell's source and each test cell's verdict (which never quotes a hidden input), and
shows no output of a cell at or after the first test cell that holds a hidden check. `feedback` then reads every
page it wrote for the hidden test lines and for the hidden inputs themselves (the literals in the expressions of
hidden expect_* calls), and removes a page that shows one.

A page is only for a submission whose every graded cell is graded: until a person has graded a written answer, its
page would say "0.0 / 3.0" and a partial total, so `feedback` writes none and says which cells wait. An upload that
is no notebook gets no page either, and the advice is the student's (hand in the notebook), not a regrade.
"""

from __future__ import annotations

import ast
import html
import os
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import nbformat
from bs4 import BeautifulSoup
from nbconvert.exporters import HTMLExporter, TemplateExporter
from nbconvert.filters.highlight import Highlight2HTML
from nbconvert.filters.widgetsdatatypefilter import WidgetsDataTypeFilter
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import NbGraderPreprocessor
from traitlets import Unicode

from lecturelib.course.layout import HIDDEN_MARKS, Course, is_test_cell, nbgrader_meta, read_notebook
from lecturelib.course.release import chunks, reference_chunks

STOPPED = "GradingStopped"  # grading.execute.STOPPED: the grader's note on a cell it did not run (kept in feedback)

MIN_SECRET_CHARS = 20  # shorter hidden lines ("counted_matmul(") also stand in students' own code
MIN_INPUT_CHARS = 4  # a hidden input shorter than this (2, 16, "x") also stands in any page
UNGRADED = ("{where} not written: {cells} not graded by hand yet (its score would read 0 and the total would be "
            "partial): grade it (make instructor: Nbgrader > Formgrader > Manual Grading), then run feedback again")
HIDDEN_NOTE = ("[output not shown in feedback: this cell ran after the hidden checks of {gid}, and what it printed "
               "could show their inputs]")


def _plain(text: str) -> str:
    """What a page shows, whitespace folded: tags dropped (code is highlighted token by token)."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", text)).split())


def _folded(source: str) -> str:
    """A notebook's source as a page shows it (`_plain` of its HTML): the same text, whitespace folded. Source is not
    HTML: a `<` in code starts no tag (`_plain` of it would drop what stands between `<` and the next `>`)."""
    return " ".join(source.split())


def hidden_lines(course: Course, assignment: str) -> set[str]:
    """Lines of the hidden test blocks that the student release does not show anywhere."""
    lines: set[str] = set()
    for master in course.source_notebooks(assignment):
        released = course.release / assignment / master.name
        public = _folded("\n".join(c.source for c in read_notebook(released).cells)) if released.exists() else ""
        for cell in read_notebook(master).cells:
            if not is_test_cell(cell):
                continue
            inside = False
            for line in cell.source.split("\n"):
                if HIDDEN_MARKS[0] in line:
                    inside = True
                elif HIDDEN_MARKS[1] in line:
                    inside = False
                elif inside and len(_folded(line)) >= MIN_SECRET_CHARS and _folded(line) not in public:
                    lines.add(_folded(line))
    return lines


def leak(page: str, secret: set[str], inputs: list[tuple[str, ...]]) -> str:
    """What of the hidden tests a feedback page shows ('' when nothing): a hidden line anywhere on it, or a hidden
    check's inputs in what its cells printed."""
    text = _plain(page)
    lines = sorted(ln for ln in secret if ln in text)
    if lines:
        return f"a hidden test line ({lines[0][:60]})"
    printed = output_text(page)
    shown = [i for i in inputs if _shown(i, printed)]
    return f"a hidden check's inputs ({', '.join(shown[0])[:60]})" if shown else ""


def _markdown_chunks(path: Path) -> set[str]:
    """What the markdown cells of a notebook show (a student's own words may repeat the reference)."""
    try:
        return set().union(*(chunks(c.source) for c in read_notebook(path).cells if c.cell_type == "markdown"))
    except (OSError, ValueError):
        return set()


def unwritten(course: Course, assignment: str, students: list[str] | None = None) -> list[str]:
    """Every submitted notebook of `assignment` (of `students`, if given) without a feedback page as new as its
    autograded notebook, and why."""
    problems = []
    for notebook in sorted(course.submitted.glob(f"*/{assignment}/*.ipynb")) if course.submitted.is_dir() else []:
        if not (course.release / assignment / notebook.name).is_file():
            continue  # not a notebook of the assignment (nbgrader grades only those)
        student = notebook.parent.parent.name
        if students is not None and student not in students:
            continue
        graded = course.autograded / student / assignment / notebook.name
        page = (course.feedback / student / assignment / notebook.name).with_suffix(".html")
        where = f"feedback/{student}/{assignment}/{page.name}"
        broken = "" if graded.is_file() else _not_a_notebook(notebook)
        if broken:
            problems.append(f"{where} not written: {student}'s upload submitted/{student}/{assignment}/{notebook.name} "
                            f"is not a notebook ({broken}), so there is nothing to grade: the student must hand in the "
                            f"notebook itself (the .ipynb file, JupyterLab: File > Download), which you then collect "
                            f"again (--force) and autograde")
        elif not graded.is_file():
            problems.append(f"{where} not written: {student}'s {assignment} is not autograded (no autograded/{student}/"
                            f"{assignment}/{notebook.name}); grade it with `python -m lecturelib.course autograde "
                            f"{assignment} --student {student}`, then run feedback again")
        elif not page.is_file() or page.stat().st_mtime < graded.stat().st_mtime:
            problems.append(f"{where} not written: nbgrader generate_feedback made no page for it")
    return problems


def _not_a_notebook(path: Path) -> str:
    """Why a submitted file is no notebook ('' when it is one)."""
    try:
        nbformat.validate(nbformat.read(str(path), as_version=4))
    except Exception as e:  # noqa: BLE001 - any unreadable file: whatever the reason, it says why
        return (str(e).splitlines()[0][:120] if str(e) else type(e).__name__) or type(e).__name__
    return ""


def local_mathjax(course: Course) -> None:
    """feedback/mathjax/: jupyter-server-mathjax's MathJax (what Formgrader serves), which a feedback page opened from
    disk loads (jupyter/share's mathjax template) instead of the CDN: formulas render offline."""
    import jupyter_server_mathjax

    kept, copy = course.feedback / "mathjax", Path(jupyter_server_mathjax.__file__).parent / "static"
    if not (kept / "MathJax.js").is_file() or (kept / "MathJax.js").read_bytes() != (copy / "MathJax.js").read_bytes():
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(copy, kept)


def feedback(course: Course, assignments: list[str], students: list[str] | None = None) -> list[str]:
    """Generate feedback for every autograded submission (of `students`, if given) whose every graded cell is
    graded; return problems: a submission with a written answer not graded yet (no page), a leak, and every
    submitted notebook that got no page."""
    from lecturelib.course.term.grades import waiting

    problems = []
    for assignment in assignments:
        graded = {p.parent.parent.name for p in course.autograded.glob(f"*/{assignment}/*.ipynb")}
        others = sorted(graded - set(students)) if students is not None else []
        if graded - set(others):  # one nbgrader run for all of them (each run costs seconds to start); none: nothing to do
            local_mathjax(course)  # student ids never hold a comma (roster.STUDENT_ID)
            done = course.nbgrader("generate_feedback", assignment, "--force",
                                   *([f"--CourseDirectory.student_id_exclude={','.join(others)}"] if others else []))
            if done.returncode != 0:
                errors = [ln.split("] ", 1)[-1] for ln in done.stderr.splitlines() if "ERROR" in ln]
                problems.append(f"{assignment}: nbgrader generate_feedback failed: {(errors or ['no message'])[0][:200]}")
        secret, inputs = hidden_lines(course, assignment), hidden_inputs(course, assignment)
        graders = reference_chunks(course.source_notebooks(assignment))  # the written answers' references
        pages = sorted(course.feedback.glob(f"*/{assignment}/*.html"))
        ungraded, said = waiting(course, assignment), set()
        for page in [p for p in pages if students is None or p.parent.parent.name in students]:
            cells = ungraded.get((page.parent.parent.name, page.stem))
            if cells:  # a page would say "0.0 / 3.0" for an answer nobody graded, and a partial total
                page.unlink()
                said.add(str(page.relative_to(course.root)))
                problems.append(UNGRADED.format(where=page.relative_to(course.root), cells=", ".join(
                    f"{cell} ({points:g} point{'s' if points != 1 else ''})" for cell, points in cells)))
                continue
            raw = page.read_text(encoding="utf-8", errors="replace")
            what = leak(raw, secret, inputs)
            if what:
                page.unlink()  # never leave a page that shows hidden tests where it could be released
                problems.append(f"{page.relative_to(course.root)} showed {what}; removed")
                continue
            text = _plain(raw)
            mine = _markdown_chunks(course.submitted / page.parent.parent.name / assignment / f"{page.stem}.ipynb")
            public = _markdown_chunks(course.release / assignment / f"{page.stem}.ipynb")
            shown = sorted(c for c in graders - mine - public if c in text)  # not what the student wrote
            if shown:
                page.unlink()
                problems.append(f"{page.relative_to(course.root)} showed the graders' reference ({shown[0][:60]}); "
                                "removed")
        said |= {p.split(" showed ", 1)[0] for p in problems}  # removed pages: said already
        problems += [p for p in unwritten(course, assignment, students) if p.split(" not written", 1)[0] not in said]
    return problems


def hidden_test_cells(master: NotebookNode) -> list[str]:
    """grade_ids of the test cells of a master that hold hidden checks, in order."""
    return [nbgrader_meta(c)["grade_id"] for c in master.cells if is_test_cell(c) and HIDDEN_MARKS[0] in c.source]


# What nbconvert's accessibility pass changes: an image without alt text, a lab template's input or output area
A11Y_TARGETS = re.compile(r"<img\b|jp-Cell-inputWrapper|jp-OutputArea-output", re.IGNORECASE)


class FeedbackExporter(HTMLExporter):
    """nbconvert's HTML exporter for feedback pages (c.GenerateFeedback.exporter_class), with its accessibility
    pass (alt text on every image, focusable input and output areas) run only on a page it would change."""

    # HTMLExporter.from_notebook_node (nbconvert 7.17) reads the whole page into BeautifulSoup's pure-Python parser and
    # writes it out again, every time: about half of a page's CPU (`nbgrader generate_feedback` of the pilot's three
    # pages, two without an image: 8.5 s -> 6.0 s). This is its code with the pass made conditional;
    # test_feedback_exporter_writes_what_nbconvert_writes checks that a page reads the same as nbconvert's.
    def from_notebook_node(  # type: ignore[override]
        self, nb: NotebookNode, resources: dict[str, Any] | None = None, **kw: Any
    ) -> tuple[str, dict[str, Any]]:
        langinfo = nb.metadata.get("language_info", {})
        lexer = langinfo.get("pygments_lexer", langinfo.get("name", None))
        highlight_code = self.filters.get("highlight_code", Highlight2HTML(pygments_lexer=lexer, parent=self))
        resources = self._init_resources(resources)
        filter_data_type = WidgetsDataTypeFilter(notebook_metadata=self._nb_metadata, parent=self, resources=resources)
        self.register_filter("highlight_code", highlight_code)
        self.register_filter("filter_data_type", filter_data_type)
        page, resources = TemplateExporter.from_notebook_node(self, nb, resources, **kw)
        if not A11Y_TARGETS.search(page):
            return page, resources
        soup = BeautifulSoup(page, features="html.parser")
        missing_alt = 0
        for elem in soup.select("img:not([alt])"):
            elem.attrs["alt"] = "No description has been provided for this image"
            missing_alt += 1
        if missing_alt:
            self.log.warning("Alternative text is missing on %s image(s).", missing_alt)
        for elem in soup.select(".jp-Notebook div.jp-Cell-inputWrapper, .jp-Notebook div.jp-OutputArea-output"):
            elem.attrs["tabindex"] = "0"
        return str(soup), resources


class HideOutputsAfterHiddenChecks(NbGraderPreprocessor):
    """Feedback: no output of a cell at or after the first test cell with hidden checks, but the test cells'
    verdicts (the masters in source/ say which test cells hold hidden checks)."""

    source_directory = Unicode("", help="the folder of the masters (source/)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        info = resources.get("nbgrader", {})
        path = os.path.join(self.source_directory, info.get("assignment", ""), info.get("notebook", "") + ".ipynb")
        hidden = set(hidden_test_cells(read_notebook(path))) if os.path.isfile(path) else None
        after = ""
        for cell in nb.cells:
            gid = nbgrader_meta(cell).get("grade_id")
            holds = gid in hidden if hidden is not None else is_test_cell(cell) and HIDDEN_MARKS[0] in cell.source
            if holds and not after:
                after = str(gid)
            if after and cell.cell_type == "code" and not is_test_cell(cell) and cell.get("outputs"):
                stops = [o for o in cell.outputs if o.get("output_type") == "error" and o.get("ename") == STOPPED]
                cell.outputs = stops or [from_dict({"output_type": "stream", "name": "stdout",  # the grader's own word
                                                    "text": HIDDEN_NOTE.format(gid=after) + "\n"})]
        return nb, resources


def _literals(node: ast.AST) -> list[str]:
    """The literal values in an expression, as a page would show them (numbers and strings), in order."""
    found = []
    for n in ast.walk(node):
        if isinstance(n, ast.Constant) and not isinstance(n.value, bool) and n.value is not None:
            found.append(n.value if isinstance(n.value, str) else repr(n.value))
    return found


def hidden_inputs(course: Course, assignment: str) -> list[tuple[str, ...]]:
    """The inputs of every hidden check: the literals of the expression each hidden expect_* call judges, for each
    call whose inputs do not also stand in the student release (those are no secret)."""
    from lecturelib.grading import _hidden_lines

    found = []
    for master in course.source_notebooks(assignment):
        released = course.release / assignment / master.name
        public = "\n".join(c.source for c in read_notebook(released).cells) if released.exists() else ""
        for cell in read_notebook(master).cells:
            if not is_test_cell(cell):
                continue
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            hidden = _hidden_lines(cell.source)
            for node in ast.walk(tree):
                if (isinstance(node, ast.Call) and node.args and node.lineno in hidden
                        and getattr(node.func, "id", getattr(node.func, "attr", "")).startswith("expect_")):
                    inputs = tuple(_literals(node.args[0]))
                    if _distinctive(inputs) and not _shown(inputs, public):
                        found.append(inputs)
    return found


def _distinctive(inputs: tuple[str, ...]) -> bool:
    """Inputs that a page would not show by chance: at least MIN_INPUT_CHARS characters, one of them 3 or more."""
    return sum(map(len, inputs)) >= MIN_INPUT_CHARS and max(map(len, inputs), default=0) >= 3


class _Outputs(HTMLParser):
    """The text of a page's output areas (nbconvert's output_area / jp-OutputArea): what cells printed."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.inside: list[int] = []
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "img", "hr", "input", "meta", "link", "col", "wbr"):
            return
        self.depth += 1
        classes = (dict(attrs).get("class") or "").split()
        if "output_area" in classes or "jp-OutputArea" in classes:
            self.inside.append(self.depth)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("br", "img", "hr", "input", "meta", "link", "col", "wbr"):
            return
        if self.inside and self.inside[-1] == self.depth:
            self.inside.pop()
        self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.inside:
            self.parts.append(data)


def output_text(page: str) -> str:
    """What the cells of a feedback page printed (their outputs, not their code), whitespace folded."""
    parser = _Outputs()
    parser.feed(page)
    return " ".join(" ".join(parser.parts).split())


NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _shown(inputs: tuple[str, ...], text: str) -> bool:
    """Whether `text` shows these inputs: numbers in this order with nothing but non-numbers between them (commas,
    spaces, underscores, a class name's letters), strings as they are."""
    numbers = [i for i in inputs if NUMBER.fullmatch(i)]
    words = [i for i in inputs if not NUMBER.fullmatch(i)]
    if words and not all(len(w) >= MIN_INPUT_CHARS and w in text for w in words):
        return False
    if not numbers:
        return bool(words)
    seen, k = NUMBER.findall(text.replace("_", " ")), len(numbers)
    return any(seen[i:i + k] == numbers for i in range(len(seen) - k + 1))
