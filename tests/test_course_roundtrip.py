"""The autograding round trip through real nbgrader, for every notebook in source/.

Every assignment is built into one scratch course. Each gets an honest submission, the untouched release and
one with an exercise wrong and another skipped; the pilot assignment also gets every hostile submission
(cheating, tampering, crashing, broken, edited cells). `python -m lecturelib.course autograde` grades the
whole class with two workers, and every score must be what the submission deserves.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode

from lecturelib.course.audit import audit
from lecturelib.course.autograde import Outcome, autograde
from lecturelib.course.build import build
from lecturelib.course.feedback import _plain, feedback, hidden_lines
from lecturelib.course.layout import Course, fill_answers, is_test_cell, nbgrader_meta, read_notebook

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENTS = Course(ROOT).assignments()
# The assignment that also gets every hostile submission (cheats, tampering, crashes, edited cells): the
# mechanisms are the same for every notebook, so one class of them is enough and keeps CI within budget.
PILOT = "02_matmul_flops" if "02_matmul_flops" in ASSIGNMENTS else (ASSIGNMENTS or [""])[0]
CELL_TIMEOUT_S = 30  # per cell while these tests grade; the endless loop costs this much once

# Appended to one answer cell: every function it defines now answers a little wrong.
WRONG = '''
def _off_by_a_little(f):
    def perturb(r):
        if isinstance(r, bool):
            return not r
        if isinstance(r, (int, float)):
            return r + 1
        if isinstance(r, (tuple, list)):
            return type(r)(perturb(x) for x in r)
        if hasattr(r, "add"):
            return r.add(1)
        return r
    return lambda *a, **k: perturb(f(*a, **k))
for _name in {names!r}:
    globals()[_name] = _off_by_a_little(globals()[_name])
'''

# Appended to every answer cell: correct answers that chat (no newline) while they work.
CHATTY = '''
def _chatty(f):
    def g(*a, **k):
        print(".", end="", flush=True)
        return f(*a, **k)
    return g
for _name in {names!r}:
    globals()[_name] = _chatty(globals()[_name])
'''

# Replaces one answer cell: finds the course through /proc (the kernel runs in a private folder), then
# rewrites nbgrader_config.py and the gradebook: its own manual grades and extra credit, another's scores.
TAMPER = '''
import os, pathlib, sqlite3
pid, root = os.getpid(), None
while pid > 1 and root is None:
    cwd = pathlib.Path(os.readlink(f"/proc/{pid}/cwd"))
    root = next((d for d in (cwd, *cwd.parents) if (d / "gradebook.db").exists()), None)
    pid = int(open(f"/proc/{pid}/stat").read().rsplit(") ", 1)[1].split()[1])
with open(root / "nbgrader_config.py", "a") as config:
    config.write("\\n# changed by a submission\\n")
rows = "select n.id from submitted_notebook n join submitted_assignment a on n.assignment_id = a.id where a.student_id = ?"
full = "(select max_score from grade_cells c where c.id = grade.cell_id)"
db = sqlite3.connect(root / "gradebook.db", timeout=60)
db.execute(f"update grade set manual_score = {full}, extra_credit = 100 where notebook_id in ({rows})", ("tamper",))
db.execute(f"update grade set auto_score = {full} where notebook_id in ({rows})", ("cheat",))
db.commit()
'''

# Replaces every answer cell: answers that claim to equal anything, and every patch we could think of.
CHEAT = '''
import builtins, json, math, operator, sys, types
import lecturelib.grading as _g
class _Anything(int):
    def __eq__(self, other): return True
    def __ne__(self, other): return False
    __hash__ = int.__hash__
for _name in {names!r}:
    globals()[_name] = lambda *a, **k: _Anything(1)
for _fn in ("expect_count", "expect_real", "expect_bool", "expect_counts"):
    setattr(_g, _fn, lambda *a, **k: None)
_g.matches = lambda *a, **k: True
_g._report = lambda cell, i, kind, thunk: print(_g.RECORD_MARK + json.dumps({{"cell": cell, "i": i, "value": 1}}))
operator.index = lambda x: 1
math.isclose = lambda *a, **k: True
builtins.abs = lambda x: 0
_fake = types.ModuleType("lecturelib.grading")
_fake.__dict__.update({{k: (lambda *a, **k: None) for k in dir(_g) if not k.startswith("__")}})
sys.modules["lecturelib.grading"] = _fake
get_ipython().showtraceback = lambda *a, **k: None
'''


def defined_names(source: str) -> list[str]:
    """Functions an answer cell defines."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]


@dataclass
class Plan:
    """What each submission of one assignment must score, from its master."""

    assignment: str
    points: dict[str, float] = field(default_factory=dict)  # test cell -> points
    tests_of: dict[str, list[str]] = field(default_factory=dict)  # answer cell -> the test cells after it
    expected: dict[str, float] = field(default_factory=dict)  # student -> autograded score
    outcomes: dict[str, Outcome] = field(default_factory=dict)

    @property
    def full(self) -> float:
        return sum(self.points.values())


def plan_for(master: NotebookNode, assignment: str) -> Plan:
    plan, current = Plan(assignment), None
    for cell in master.cells:
        m = nbgrader_meta(cell)
        if cell.cell_type == "code" and m.get("solution"):
            current = m["grade_id"]
            plan.tests_of[current] = []
        elif is_test_cell(cell):
            plan.points[m["grade_id"]] = float(m["points"])
            if current is not None:
                plan.tests_of[current].append(m["grade_id"])
        else:
            current = None if m.get("grade") or cell.cell_type == "code" else current
    return plan


def submit(course: Course, assignment: str, student: str, nbs: dict[str, NotebookNode | str]) -> None:
    folder = course.submitted / student / assignment
    folder.mkdir(parents=True, exist_ok=True)
    for name, nb in nbs.items():
        text = nb if isinstance(nb, str) else nbformat.writes(nb)
        (folder / name).write_text(text, encoding="utf-8")


def edited(nb: NotebookNode, edits: dict[str, str], drop: Callable[[NotebookNode], bool] = lambda c: False) -> NotebookNode:
    """A copy of `nb` with some cells' sources replaced and the cells `drop` picks deleted."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        gid = nbgrader_meta(cell).get("grade_id")
        if gid in edits:
            cell.source = edits[gid]
    out.cells = [c for c in out.cells if not drop(c)]
    return out


def is_locked_only(cell: NotebookNode) -> bool:
    """A read-only cell that is neither an answer nor a test: setup code, parameters, prose."""
    m = nbgrader_meta(cell)
    return bool(m.get("locked")) and not m.get("grade") and not m.get("solution")


def _materials(course: Course, assignment: str) -> tuple[str, NotebookNode, NotebookNode, dict[str, str], Plan]:
    """(notebook file name, release, reference submission, answers by grade_id, plan) of one assignment."""
    masters = course.source_notebooks(assignment)
    assert len(masters) == 1, "the round trip handles one notebook per assignment"
    name = masters[0].name
    master = read_notebook(masters[0])
    release = read_notebook(course.release / assignment / name)
    solved = fill_answers(release, master)
    answers = {nbgrader_meta(c)["grade_id"]: c.source for c in solved.cells
               if c.cell_type == "code" and nbgrader_meta(c).get("solution")}
    return name, release, solved, answers, plan_for(master, assignment)


def make_class(course: Course, assignment: str) -> Plan:
    """The submissions every assignment gets: honest, blank, and one exercise wrong with another skipped."""
    name, release, solved, answers, plan = _materials(course, assignment)
    graded_answers = [a for a, tests in plan.tests_of.items() if tests]
    assert len(graded_answers) >= 2, f"{assignment}: the round trip needs two graded exercises"
    submit(course, assignment, "solution", {name: solved})
    plan.expected["solution"] = plan.full
    submit(course, assignment, "untouched", {name: release})
    plan.expected["untouched"] = 0.0
    # the first exercise answers a little wrong; the last is skipped (its answer and its tests deleted)
    wrong, skipped = graded_answers[0], graded_answers[-1]
    gone = {skipped, *plan.tests_of[skipped]}
    source = answers[wrong] + WRONG.format(names=defined_names(answers[wrong]))
    submit(course, assignment, "wrong-and-skipped",
           {name: edited(solved, {wrong: source}, drop=lambda c: nbgrader_meta(c).get("grade_id") in gone)})
    plan.expected["wrong-and-skipped"] = plan.full - sum(plan.points[t] for t in plan.tests_of[wrong] + plan.tests_of[skipped])
    return plan


def add_hostile_class(course: Course, assignment: str, plan: Plan) -> None:
    """On the pilot assignment only: every way of editing, breaking or cheating a submission we know of."""
    name, release, solved, answers, _ = _materials(course, assignment)
    graded_answers = [a for a, tests in plan.tests_of.items() if tests]
    all_names = [n for src in answers.values() for n in defined_names(src)]
    submit(course, assignment, "no-tests", {name: edited(solved, {}, drop=is_test_cell)})
    plan.expected["no-tests"] = plan.full
    submit(course, assignment, "no-read-only-cells", {name: edited(solved, {}, drop=is_locked_only)})
    plan.expected["no-read-only-cells"] = plan.full  # setup and parameters cells are restored too
    for answer in graded_answers[1:2]:  # one exercise wrong alone: it loses exactly its tests' points
        student = f"wrong-{answer}"
        wrong = answers[answer] + WRONG.format(names=defined_names(answers[answer]))
        submit(course, assignment, student, {name: edited(solved, {answer: wrong})})
        plan.expected[student] = plan.full - sum(plan.points[t] for t in plan.tests_of[answer])
    chatty = {a: src + CHATTY.format(names=defined_names(src)) for a, src in answers.items()}
    submit(course, assignment, "chatty", {name: edited(solved, chatty)})
    plan.expected["chatty"] = plan.full
    pasted = copy.deepcopy(solved)  # Jupyter's copy-paste: an answer and its test twice, same metadata
    first = {graded_answers[0], *plan.tests_of[graded_answers[0]]}
    first_cells = [c for c in pasted.cells if nbgrader_meta(c).get("grade_id") in first]
    for cell in copy.deepcopy(first_cells):
        cell["id"] = f"{cell['id']}-copy"  # Jupyter gives a pasted cell a new id, and keeps its metadata
        pasted.cells.append(cell)
    submit(course, assignment, "pasted-cells", {name: pasted})
    plan.expected["pasted-cells"] = plan.full
    stripped = copy.deepcopy(solved)  # an editor that drops cell metadata but keeps cell ids
    for cell in stripped.cells:
        cell.metadata.pop("nbgrader", None)
    submit(course, assignment, "no-metadata", {name: stripped})
    plan.expected["no-metadata"] = plan.full
    moved = edited(solved, {}, drop=lambda c: c.cell_type == "code" and bool(nbgrader_meta(c).get("solution")))
    setup = next(i for i, c in enumerate(moved.cells) if c.cell_type == "code") + 1
    moved.cells.insert(setup, nbformat.v4.new_code_cell("\n\n".join(answers.values())))  # all answers in one cell
    submit(course, assignment, "answers-moved", {name: moved})
    plan.expected["answers-moved"] = plan.full
    meddled = copy.deepcopy(solved)  # metadata edited to claim more: only the release's metadata counts
    for cell in meddled.cells:
        m = cell.metadata.get("nbgrader", {})
        if is_test_cell(cell):
            m["points"] = 100
        elif m.get("solution"):
            m.update(grade=True, points=50)
    bonus = nbformat.v4.new_code_cell("print('bonus')", metadata={"nbgrader": {
        "grade": True, "solution": False, "locked": True, "points": 1000, "grade_id": "bonus", "schema_version": 3}})
    meddled.cells.append(bonus)
    submit(course, assignment, "meddled-metadata", {name: meddled})
    plan.expected["meddled-metadata"] = plan.full
    cheat = {a: CHEAT.format(names=all_names) for a in answers}
    submit(course, assignment, "cheat", {name: edited(release, cheat)})
    plan.expected["cheat"] = 0.0
    submit(course, assignment, "tamper", {name: edited(release, {graded_answers[0]: TAMPER})})
    plan.expected["tamper"] = 0.0
    crashing = graded_answers[0]
    submit(course, assignment, "crash", {name: edited(solved, {crashing: "import os\nos._exit(1)"})})
    loop = answers[crashing] + "\nwhile True:\n    pass\n"
    submit(course, assignment, "endless-loop", {name: edited(solved, {crashing: loop})})
    plan.expected["endless-loop"] = plan.full  # the loop is interrupted at the cell timeout, the rest runs
    submit(course, assignment, "not-a-notebook", {name: '{"cells": [ this is not JSON'})


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Course, Plan]]:
    root = tmp_path_factory.mktemp("course")
    shutil.copy2(ROOT / "nbgrader_config.py", root)
    shutil.copytree(ROOT / "source", root / "source")
    course = Course(root)
    assert build(course) == []
    plans = {a: make_class(course, a) for a in ASSIGNMENTS}
    add_hostile_class(course, PILOT, plans[PILOT])
    outcomes = autograde(course, ASSIGNMENTS, workers=2, cell_timeout_s=CELL_TIMEOUT_S)
    for o in outcomes:
        plans[o.assignment].outcomes[o.student] = o
    return {a: (course, plans[a]) for a in ASSIGNMENTS}


pytestmark = pytest.mark.skipif(not ASSIGNMENTS, reason="no assignment in source/")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_every_gradable_submission_scores_what_it_deserves(graded, assignment: str) -> None:
    _, plan = graded[assignment]
    got = {s: plan.outcomes[s].score for s in plan.expected}
    assert got == plan.expected
    assert plan.full > 0


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_untouched_release_fails_every_single_check(graded, assignment: str) -> None:
    """Not only every test cell: every check in it fails on the release (none passes without an answer)."""
    course, plan = graded[assignment]
    (path,) = (course.autograded / "untouched" / assignment).glob("*.ipynb")
    verdicts = {nbgrader_meta(c)["grade_id"]: c.outputs for c in read_notebook(path).cells if is_test_cell(c)}
    assert set(verdicts) == set(plan.points)
    for gid, outputs in verdicts.items():
        (error,) = [o for o in outputs if o.output_type == "error"]
        failed, total = re.match(rf"{gid}: (\d+) of (\d+) checks failed", error.evalue).groups()
        assert failed == total, (gid, error.evalue)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_honest_submissions_are_reported_clean(graded, assignment: str) -> None:
    _, plan = graded[assignment]
    for student in ("solution", "untouched", "wrong-and-skipped"):
        o = plan.outcomes[student]
        assert o.graded, (student, o.problems)
        # the only report an honest submission may get: "tamper" was graded beside it (see below)
        assert all("changed while it was graded alongside" in p and "tamper" in p for p in o.problems), o


def test_roundtrip_crash_and_broken_file_cost_only_their_student(graded) -> None:
    _, plan = graded[PILOT]
    crash, broken = plan.outcomes["crash"], plan.outcomes["not-a-notebook"]
    assert not crash.graded and "Kernel died" in crash.problems[0]
    assert not broken.graded and "is not a valid notebook" in broken.problems[0]
    assert f"submitted/not-a-notebook/{PILOT}/" in broken.problems[0]
    assert all(o.graded for s, o in plan.outcomes.items() if s not in ("crash", "not-a-notebook"))
    for student, o in plan.outcomes.items():  # graded beside "tamper", a submission hears of it, naming it
        if student not in ("crash", "not-a-notebook", "tamper"):
            assert all("changed while it was graded alongside" in p and "tamper" in p for p in o.problems), o


def test_roundtrip_tampering_with_course_or_gradebook_is_undone_and_reported(graded) -> None:
    course, plan = graded[PILOT]
    problems = plan.outcomes["tamper"].problems
    assert any(p.startswith("course files or grades changed") and p.endswith("(restored): nbgrader_config.py")
               for p in problems), problems
    assert any("grades restored): the gradebook" in p for p in problems), problems
    assert (course.root / "nbgrader_config.py").read_bytes() == (ROOT / "nbgrader_config.py").read_bytes()
    # the scores: tamper's own and cheat's are checked in test_roundtrip_every_gradable_submission_…


def test_roundtrip_regrading_gives_same_scores_and_leaves_submissions(graded) -> None:
    course, plan = graded[PILOT]
    digest = lambda: {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in course.submitted.rglob("*") if p.is_file()}
    before = digest()
    students = ["solution", "untouched", "cheat", "wrong-and-skipped"]
    again = autograde(course, [PILOT], workers=2, students=students, cell_timeout_s=CELL_TIMEOUT_S)
    assert {o.student: o.score for o in again} == {s: plan.outcomes[s].score for s in students}
    assert digest() == before


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_feedback_never_shows_hidden_tests(graded, assignment: str) -> None:
    course, _ = graded[assignment]
    assert feedback(course, [assignment]) == []
    pages = list(course.feedback.glob(f"*/{assignment}/*.html"))
    assert pages and hidden_lines(course, assignment)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in text
        assert not [line for line in hidden_lines(course, assignment) if line in _plain(text)]


def test_roundtrip_audit_flags_cheats_not_honest_work(graded) -> None:
    course, _ = graded[PILOT]
    findings = audit(course, ASSIGNMENTS)
    flagged = {(f.student, f.assignment) for f in findings}
    assert {("cheat", PILOT), ("crash", PILOT), ("tamper", PILOT)} <= flagged
    honest = {"solution", "untouched", "wrong-and-skipped", "no-tests", "no-read-only-cells", "chatty",
              "pasted-cells", "no-metadata", "answers-moved", "meddled-metadata"}
    assert not {s for s, _ in flagged} & honest
    whats = " ".join(f.what for f in findings if f.student == "cheat")
    for expected in ("defines __eq__", "patches operator", "patches math", "patches IPython", "setattr()"):
        assert expected in whats
