"""The autograding round trip through real nbgrader, for every notebook in source/, every kernel sandboxed.

Every assignment's committed release goes into one scratch course (test_course_build checks it is what `build`
makes). Each gets an honest submission, the untouched release and one with an exercise wrong and another skipped
(and its registered wrong builds, tests/wrong_answers/); the pilot assignment also gets every way of editing its
cells (deleted, pasted, moved, metadata stripped or meddled with, chatty) and a file that is not a notebook. Cheats,
kernels that die or hang, and the attacks on the grader itself (planted code, the gradebook, other students' files,
detached processes, broken builtins, floods of output, fork bombs, litter and kills) go to a two-exercise toy
assignment, between honest students, in the same run: what they do does not depend on the notebook. `python -m lecturelib.course autograde`
grades the whole class with two workers, then regrades the attackers and the honest students around them: every
score must be what the submission's answers deserve, and nothing an attacker planted or started may survive
outside its sandbox.
"""

from __future__ import annotations

import ast
import copy
import hashlib
import os
import re
import shutil
import site
import sysconfig
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode

from lecturelib.course.isolation import sandbox
from lecturelib.course.isolation.audit import audit
from lecturelib.course.grading.autograde import Outcome, Report, autograde, score_text
from lecturelib.course.term.feedback import _plain, feedback, hidden_lines
from lecturelib.course.grading.guard import gradebook_cells
from lecturelib.course.layout import Course, fill_answers, is_test_cell, nbgrader_meta, read_notebook, write_notebook
from lecturelib.course.release.reference import MARK, reference_chunks
from gradebook_helpers import grade_the_written_answers
from wrong_answers import Wrong
from wrong_answers import load as load_wrong

ROOT = Path(__file__).resolve().parents[1]
# LECTURELIB_ROUNDTRIP=02_matmul_flops,05_training_memory grades only those (an author's inner loop); CI grades all.
ONLY = [a for a in os.environ.get("LECTURELIB_ROUNDTRIP", "").split(",") if a]
ASSIGNMENTS = [a for a in Course(ROOT).assignments() if not ONLY or a in ONLY]
# The assignment that also gets every hostile submission (cheats, tampering, crashes, edited cells): the
# mechanisms are the same for every notebook, so one class of them is enough and keeps CI within budget.
PILOT = "02_matmul_flops" if "02_matmul_flops" in ASSIGNMENTS else None
CELL_TIMEOUT_S = 30  # per cell while these tests grade; the endless loop and broken builtins cost this much
# The attackers on the grader itself (files planted, the gradebook rewritten, processes left behind, builtins broken,
# floods, fork bombs) submit to a two-exercise toy assignment graded in the same run as the class, between honest
# students: what they try does not depend on the notebook, and a toy runs in a second where the pilot takes ten.
TOY = "99_attack_toy"
ATTACK = "lecturelib-attack"  # in every file an attacker plants and every process it starts
NO_SANDBOX = sandbox.unavailable()

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

# Replaces one answer cell: finds the course through /proc (the kernel once ran in the grader's process tree),
# then rewrites nbgrader_config.py and the gradebook: its own manual grades and extra credit, another's scores.
# In the sandbox there is no grader process to find, so the cell fails and its exercise scores 0.
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


# The attacks on the grader itself (issue 16). Each knows where the course lives (@ROOT@, as a student who has
# seen the instructor's screen would), so that without the sandbox it would hit this scratch course only.

# Appended to the last answer (answers stay right): code planted where later grading would run it: a .pth and a
# sitecustomize in the venv, an nbgrader_config.py in ~/.jupyter, IPython startup files, in every HOME it can name.
PLANT = '''
import os, pathlib, site, sysconfig
_judge_all = "import sys; exec('import lecturelib.grading as g; g.matches = lambda *a, **k: True') if any('nbgrader' in a for a in sys.argv) else None  # @ATTACK@\\n"
_silence = "import lecturelib.grading as g; g._report = lambda *a, **k: None  # @ATTACK@\\n"
_config = "c.JudgeChecks.enabled = False  # @ATTACK@\\n"
_targets = [(pathlib.Path(d) / "zz_lecturelib_attack.pth", _judge_all)
            for d in {*site.getsitepackages(), site.getusersitepackages(), sysconfig.get_paths()["purelib"]}]
_targets += [(pathlib.Path(d) / "sitecustomize.py", _silence) for d in site.getsitepackages()]
for _home in {pathlib.Path.home(), pathlib.Path("/root"), pathlib.Path("@HOME@"), *pathlib.Path("/home").glob("*")}:
    _targets += [(_home / ".jupyter" / "nbgrader_config.py", _config),
                 (_home / ".ipython" / "profile_default" / "startup" / "00-attack.py", _silence)]
_targets += [(pathlib.Path("@ROOT@") / "nbgrader_config.py", _config)]
for _path, _text in _targets:
    try:
        _path.parent.mkdir(parents=True, exist_ok=True)
        with open(_path, "a") as _f:
            _f.write(_text)
    except OSError:
        pass
'''

# Replaces every answer (it answers nothing): reads the hidden tests, rewrites the gradebook's test cells with
# valid checksums and every grade to full marks, blanks the other students' submitted and autograded notebooks.
GRADEBOOK = '''
import glob, os, sqlite3
_root = "@ROOT@"
for _master in glob.glob(_root + "/source/*/*.ipynb"):
    print(open(_master).read()[:2000])  # the hidden tests, into its feedback
try:
    from nbformat.notebooknode import from_dict
    from nbgrader.utils import compute_checksum
    with sqlite3.connect(_root + "/gradebook.db", timeout=30) as _db:
        _rows = _db.execute("select s.id, s.name, s.cell_type, g.max_score from source_cell s join base_cell b on b.name = s.name"
                            " join grade_cells g on g.id = b.id").fetchall()
        for _id, _name, _type, _points in _rows:
            _cell = from_dict({"cell_type": _type, "source": "pass", "metadata": {"nbgrader": {
                "grade": True, "solution": False, "locked": True, "points": _points, "grade_id": _name}}})
            _db.execute("update source_cell set source = 'pass', checksum = ? where id = ?", (compute_checksum(_cell), _id))
        _db.execute("update grade set auto_score = (select max_score from grade_cells c where c.id = grade.cell_id)")
except Exception as _e:
    print("gradebook:", type(_e).__name__)
for _folder in ("submitted", "autograded"):
    for _nb in glob.glob(f"{_root}/{_folder}/*/*/*.ipynb"):
        if "/attack-gradebook/" not in _nb:
            try:
                with open(_nb, "w") as _f:
                    _f.write('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
            except OSError:
                pass
'''

# Appended to the last answer: a process in a new session (it escapes a process-group kill) that keeps
# zeroing every grade in the gradebook for five minutes, long after this kernel.
DETACHED = '''
import subprocess, sys
_code = "import sqlite3, time\\nfor _ in range(1200):\\n    time.sleep(0.25)\\n    try:\\n        db = sqlite3.connect('@ROOT@/gradebook.db', timeout=5)\\n        db.execute('update grade set auto_score = 0')\\n        db.commit()\\n    except Exception:\\n        pass\\n"
subprocess.Popen(["setsid", sys.executable, "-c", _code, "@ATTACK@-detached"], start_new_session=True,
                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
'''

# Appended to the last answer: builtins broken so that the kernel can no longer answer: it hangs until the
# cell time limit, and the exercises before keep their points.
BREAK_BUILTINS = '''
import builtins
builtins.getattr = None
'''

# Appended to the first answer (answers stay right): 256 MB of output, in 1 MB writes.
FLOOD = '''
import sys, time
for _ in range(256):
    sys.stdout.write("x" * 2**20 + "\\n")
    time.sleep(0.005)
'''

# Appended to the last answer: a fork bomb (a shell forks fast; bounded should the task limit fail), killed at the
# task limit long before the cell time limit.
FORK_BOMB = '''
import subprocess, time
subprocess.Popen(["sh", "-c", "i=0; while [ $i -lt 4000 ]; do sleep 600 & i=$((i+1)); done; wait"])
time.sleep(3600)
'''

# Appended to the last answer: litter in every temporary folder it can name, the course's config edited,
# the grader's process killed, then itself.
LITTER_AND_KILL = '''
import os, pathlib, signal, tempfile
for _folder in {tempfile.gettempdir(), "/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd(), "@TMP@"}:
    for _i in range(20):
        try:
            (pathlib.Path(_folder) / f"@ATTACK@-litter-{_i}").mkdir(exist_ok=True)
            (pathlib.Path(_folder) / f"@ATTACK@-litter-{_i}" / "junk").write_bytes(b"x" * 2**16)
        except OSError:
            pass
try:
    with open("@ROOT@/nbgrader_config.py", "a") as _f:
        _f.write("\\nc.JudgeChecks.enabled = False  # @ATTACK@\\n")
except OSError:
    pass
try:
    os.kill(os.getppid(), signal.SIGKILL)  # the grader, were it the parent
except OSError:
    pass
os.kill(os.getpid(), signal.SIGKILL)
'''

# Appended to the first answer (answers stay right): the network, and far more memory than the limit.
NETWORK_AND_MEMORY = '''
import socket
for _address in (("1.1.1.1", 53), ("127.0.0.1", 22), ("localhost", 8888)):
    try:
        socket.create_connection(_address, timeout=1).close()
        print("reached", _address)
    except OSError:
        pass
try:
    _hog = bytearray(64 * 2**30)
except MemoryError:
    pass
'''


def attack(code: str, root: Path) -> str:
    return (code.replace("@ROOT@", str(root)).replace("@ATTACK@", ATTACK)
            .replace("@HOME@", os.path.expanduser("~")).replace("@TMP@", tempfile.gettempdir()))


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
    order: list[str] = field(default_factory=list)  # every grade_id, in the master's order
    manual: float = 0.0  # points of the cells graded by hand
    report: Report | None = None  # the first grading of the whole class
    left: tuple[list[Path], list[str]] = ([], [])  # planted files and attack processes found right after it
    teaches: dict[str, list[Wrong]] = field(default_factory=dict)  # student -> the registered wrong builds it holds

    @property
    def full(self) -> float:
        return sum(self.points.values())

    def before(self, grade_id: str) -> float:
        """Points of the tests above a cell: what a submission keeps when grading stops at that cell."""
        return sum(self.points.get(g, 0.0) for g in self.order[: self.order.index(grade_id)])


def plan_for(master: NotebookNode, assignment: str) -> Plan:
    plan, current = Plan(assignment), None
    for cell in master.cells:
        m = nbgrader_meta(cell)
        if m.get("grade_id"):
            plan.order.append(m["grade_id"])
        if m.get("grade") and m.get("solution"):
            plan.manual += float(m["points"])
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
    """The submissions every assignment gets: honest, blank, and wrong builds with another exercise wrong and one skipped."""
    name, release, solved, answers, plan = _materials(course, assignment)
    graded_answers = [a for a, tests in plan.tests_of.items() if tests]
    assert len(graded_answers) >= 2, f"{assignment}: the round trip needs two graded exercises"
    submit(course, assignment, "solution", {name: solved})
    plan.expected["solution"] = plan.full
    submit(course, assignment, "untouched", {name: release})
    plan.expected["untouched"] = 0.0
    # the registered wrong builds (tests/wrong_answers/), the first of each answer cell here, later ones below;
    # the first other exercise answers a little wrong; the last other one is skipped (answer and tests deleted)
    mistakes = load_wrong(assignment)
    for w in mistakes:
        assert w.cell in plan.tests_of and plan.tests_of[w.cell], f"{assignment}: {w.label}: {w.cell} is no graded answer"
        assert set(w.fails) <= set(plan.points), f"{assignment}: {w.label}: unknown test cells {w.fails}"
        # a build that skips the mechanism its exercise teaches keeps at most a third of the exercise's points
        exercise = sum(plan.points[t] for t in plan.tests_of[w.cell])
        kept = exercise - sum(plan.points[t] for t in (w.fails or plan.tests_of[w.cell]) if t in plan.tests_of[w.cell])
        assert kept <= exercise / 3, f"{assignment}: {w.label}: keeps {kept:g} of {exercise:g} points"
    rounds: list[dict[str, Wrong]] = []
    for w in mistakes:
        k = next((i for i, r in enumerate(rounds) if w.cell not in r), len(rounds))
        rounds[k:] = rounds[k:] or [{}]
        rounds[k][w.cell] = w
    others = [a for a in graded_answers if a not in {w.cell for w in mistakes}]
    wrong = others[0] if others else None
    skipped = others[-1] if len(others) >= 2 else None
    gone = {skipped, *plan.tests_of[skipped]} if skipped else set()
    edits = {c: w.source for c, w in (rounds[0] if rounds else {}).items()}
    if wrong:
        edits[wrong] = answers[wrong] + WRONG.format(names=defined_names(answers[wrong]))
    lost = {t for w in (rounds[0] if rounds else {}).values() for t in (w.fails or plan.tests_of[w.cell])}
    lost |= set(plan.tests_of[wrong] if wrong else []) | set(plan.tests_of[skipped] if skipped else [])
    submit(course, assignment, "wrong-and-skipped",
           {name: edited(solved, edits, drop=lambda c: nbgrader_meta(c).get("grade_id") in gone)})
    plan.expected["wrong-and-skipped"] = plan.full - sum(plan.points[t] for t in lost)
    plan.teaches["wrong-and-skipped"] = [w for w in (rounds[0] if rounds else {}).values()]
    for k, more in enumerate(rounds[1:], start=2):
        plan.teaches[f"wrong-{k}"] = list(more.values())
        submit(course, assignment, f"wrong-{k}", {name: edited(solved, {c: w.source for c, w in more.items()})})
        plan.expected[f"wrong-{k}"] = plan.full - sum(
            plan.points[t] for t in {t for w in more.values() for t in (w.fails or plan.tests_of[w.cell])})
    return plan


def add_hostile_class(course: Course, assignment: str, plan: Plan) -> None:
    """On the pilot assignment only: every way of editing a real notebook's cells we know of (the grader restores or
    ignores each), and a file that is not a notebook."""
    name, release, solved, answers, _ = _materials(course, assignment)
    graded_answers = [a for a, tests in plan.tests_of.items() if tests]
    # every test cell and every read-only cell deleted: the tests, setup and parameters cells are restored
    submit(course, assignment, "deleted-cells",
           {name: edited(solved, {}, drop=lambda c: is_test_cell(c) or is_locked_only(c))})
    plan.expected["deleted-cells"] = plan.full
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
    submit(course, assignment, "not-a-notebook", {name: '{"cells": [ this is not JSON'})


def toy_master() -> NotebookNode:
    """Two exercises, each with a visible and a hidden test: what the attackers answer (and attack) in."""
    def cell(kind: str, source: str, gid: str, grade: bool = False, solution: bool = False, points: int = 0):  # noqa: ANN202
        meta = {"grade": grade, "solution": solution, "locked": not solution, "grade_id": gid, "schema_version": 3}
        meta.update({"points": points} if grade else {})
        return (nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell)(source, metadata={
            "nbgrader": meta})
    return nbformat.v4.new_notebook(cells=[
        cell("markdown", "# Toy", "intro"),
        cell("code", "from lecturelib.grading import expect_count", "setup"),
        cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "toy_1",
             solution=True),
        cell("code", "expect_count(double(2), 4)  # 2*2\n### BEGIN HIDDEN TESTS\nexpect_count(double(7919), 15838)"
             "\n### END HIDDEN TESTS", "toy_1_test", grade=True, points=2),
        cell("code", "def triple(x):\n    ### BEGIN SOLUTION\n    return 3 * x\n    ### END SOLUTION", "toy_2",
             solution=True),
        cell("code", "expect_count(triple(2), 6)  # 3*2\n### BEGIN HIDDEN TESTS\nexpect_count(triple(7907), 23721)"
             "\n### END HIDDEN TESTS", "toy_2_test", grade=True, points=3),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


def add_attackers(course: Course, assignment: str, plan: Plan) -> None:
    """Attacks on the grader itself, between honest students (graded before and after them); cheats (answers that
    equal anything, patched checks, a rewritten gradebook) and kernels that die or hang in an exercise."""
    name, release, solved, answers, _ = _materials(course, assignment)
    graded_answers = [a for a, tests in plan.tests_of.items() if tests]
    first, last = graded_answers[0], graded_answers[-1]
    for honest in ("0-honest-first", "zz-honest-last"):
        submit(course, assignment, honest, {name: solved})
        plan.expected[honest] = plan.full
    after = lambda gid, code: answers[gid] + "\n" + attack(code, course.root)  # noqa: E731 - the answer, then the attack
    cheat = {a: CHEAT.format(names=[n for src in answers.values() for n in defined_names(src)]) for a in answers}
    submit(course, assignment, "cheat", {name: edited(release, cheat)})
    plan.expected["cheat"] = 0.0
    submit(course, assignment, "tamper", {name: edited(release, {graded_answers[0]: TAMPER})})
    plan.expected["tamper"] = 0.0
    # a kernel that dies or hangs in an exercise: the exercises above it keep their points, the rest score 0
    crashing = graded_answers[1]
    submit(course, assignment, "crash", {name: edited(solved, {crashing: "import os\nos._exit(1)"})})
    plan.expected["crash"] = plan.before(crashing)
    loop = answers[crashing] + "\nimport time\nwhile True:\n    time.sleep(0.1)\n"  # hangs, leaving the CPU to the others
    submit(course, assignment, "endless-loop", {name: edited(solved, {crashing: loop})})
    plan.expected["endless-loop"] = plan.before(crashing)  # stopped at the cell time limit
    submit(course, assignment, "attack-plant", {name: edited(solved, {last: after(last, PLANT)})})
    plan.expected["attack-plant"] = plan.full
    submit(course, assignment, "attack-gradebook",
           {name: edited(release, {a: attack(GRADEBOOK, course.root) for a in graded_answers})})
    plan.expected["attack-gradebook"] = 0.0
    submit(course, assignment, "attack-detached", {name: edited(solved, {last: after(last, DETACHED)})})
    plan.expected["attack-detached"] = plan.full
    submit(course, assignment, "attack-builtins", {name: edited(solved, {last: after(last, BREAK_BUILTINS)})})
    plan.expected["attack-builtins"] = plan.before(last)
    submit(course, assignment, "attack-flood", {name: edited(solved, {first: after(first, FLOOD)})})
    plan.expected["attack-flood"] = plan.full
    submit(course, assignment, "attack-fork-bomb", {name: edited(solved, {last: after(last, FORK_BOMB)})})
    plan.expected["attack-fork-bomb"] = plan.before(last)
    submit(course, assignment, "attack-litter-kill", {name: edited(solved, {last: after(last, LITTER_AND_KILL)})})
    plan.expected["attack-litter-kill"] = plan.before(last)
    submit(course, assignment, "attack-network", {name: edited(solved, {first: after(first, NETWORK_AND_MEMORY)})})
    plan.expected["attack-network"] = plan.full


def planted_files() -> list[Path]:
    """Files outside any sandbox that hold an attacker's marker: the venv, the HOMEs, the temporary folder."""
    places = [Path(p) for p in {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}]
    homes = [Path.home(), Path("/root")]
    candidates = [f for d in places for f in (d / "zz_lecturelib_attack.pth", d / "sitecustomize.py")]
    candidates += [h / ".jupyter" / "nbgrader_config.py" for h in homes]
    candidates += [h / ".ipython" / "profile_default" / "startup" / "00-attack.py" for h in homes]
    found = [f for f in candidates if f.is_file() and ATTACK in f.read_text(errors="replace")]
    litter = [p for d in {Path(tempfile.gettempdir()), Path("/tmp"), Path("/dev/shm"), Path.home()} if d.is_dir()
              for p in d.glob(f"{ATTACK}-*")]
    return found + litter


def attack_processes() -> list[str]:
    """Processes of this machine started by an attacker (their command line holds the marker)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if ATTACK in cmdline and "pytest" not in cmdline:
            found.append(f"{pid}: {cmdline[:100]}")
    return found


def relevant(notes: list[str]) -> list[str]:
    """A run's notes but the one about folders that runs killed earlier on this machine left in /tmp."""
    return [n for n in notes if not n.startswith("removed the temporary folders of an autograde run")]


def remove_planted() -> None:
    """Should a plant have got out, never leave it behind: a venv or a HOME that grades wrongly from then on."""
    for f in planted_files():
        if f.is_dir():
            shutil.rmtree(f, ignore_errors=True)
            continue
        kept = [line for line in f.read_text(errors="replace").splitlines(keepends=True) if ATTACK not in line]
        if "".join(kept).strip():
            f.write_text("".join(kept))
        else:
            f.unlink()


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Course, Plan]]]:
    if NO_SANDBOX and not os.environ.get("CI"):
        pytest.skip(f"no sandbox on this machine ({NO_SANDBOX}): install bubblewrap")
    root = tmp_path_factory.mktemp("course")
    shutil.copy2(ROOT / "nbgrader_config.py", root)
    for assignment in ASSIGNMENTS:  # only those graded (LECTURELIB_ROUNDTRIP); the committed release, which
        shutil.copytree(ROOT / "source" / assignment, root / "source" / assignment)  # test_course_build checks
        shutil.copytree(ROOT / "notebooks" / assignment, root / "notebooks" / assignment)  # is what `build` makes
    course = Course(root)
    graded_here = [*ASSIGNMENTS, *([TOY] if PILOT else [])]
    if PILOT:  # the toy, built as every assignment is (it is in no committed release), in a course of its own: the
        write_notebook(toy_master(), course.source / TOY / f"{TOY}.ipynb")  # gradebook gets it as it gets the others
        toy_course = Course(root.parent / f"{root.name}-toy")
        toy_course.root.mkdir()
        shutil.copy2(ROOT / "nbgrader_config.py", toy_course.root)
        shutil.copytree(course.source / TOY, toy_course.source / TOY)
        assert toy_course.nbgrader("generate_assignment", TOY, "--force").returncode == 0
        shutil.copytree(toy_course.release / TOY, course.release / TOY)
    plans = {a: make_class(course, a) for a in ASSIGNMENTS}
    if PILOT:
        add_hostile_class(course, PILOT, plans[PILOT])
        plans[TOY] = plan_for(toy_master(), TOY)
        add_attackers(course, TOY, plans[TOY])
    assert not planted_files() and not attack_processes(), "leftovers of an earlier run"
    try:
        report = autograde(course, graded_here, workers=2, cell_timeout_s=CELL_TIMEOUT_S)
        for o in report.outcomes:
            plans[o.assignment].outcomes[o.student] = o
        if PILOT:
            plans[TOY].report, plans[TOY].left = report, (planted_files(), attack_processes())
        yield {a: (course, plans[a]) for a in graded_here}
    finally:
        remove_planted()


pytestmark = pytest.mark.skipif(not ASSIGNMENTS, reason="no assignment in source/")
needs_pilot = pytest.mark.skipif(PILOT is None, reason="the hostile class runs on 02_matmul_flops (LECTURELIB_ROUNDTRIP leaves it out)")


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_every_gradable_submission_scores_what_it_deserves(graded, assignment: str) -> None:
    _, plan = graded[assignment]
    got = {s: plan.outcomes[s].score for s in plan.expected}
    assert got == plan.expected
    assert plan.full > 0


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_solution_runs_every_cell_under_quick_sizes_and_one_thread(graded, assignment: str) -> None:
    # the second condition every verdict must hold under (the browser tests, or nbval, run the full sizes): no cell may raise
    course, _ = graded[assignment]
    name = course.source_notebooks(assignment)[0].name
    ran = read_notebook(course.autograded / "solution" / assignment / name)
    raised = [f"cell {i}: {o.ename}: {o.evalue[:200]}" for i, c in enumerate(ran.cells) if c.cell_type == "code"
              for o in c.outputs if o.output_type == "error"]
    assert raised == []


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
        assert o.graded and not o.problems, (student, o.problems)


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_table_says_what_waits_for_manual_grading(graded, assignment: str) -> None:
    _, plan = graded[assignment]
    text = score_text(plan.outcomes["solution"])
    expected = f"{plan.full:g}/{plan.full:g} autograded"
    assert text == expected + (f", {plan.manual:g} manual points to grade" if plan.manual else "")


@needs_pilot
def test_roundtrip_attackers_and_the_honest_around_them_score_what_they_deserve(graded) -> None:
    _, plan = graded[TOY]
    assert {s: plan.outcomes[s].score for s in plan.expected} == plan.expected
    assert plan.expected["0-honest-first"] == plan.expected["zz-honest-last"] == plan.full == 5.0


@needs_pilot
def test_roundtrip_only_the_broken_file_is_a_problem(graded) -> None:
    """Crashes, hangs and attacks are graded (what ran before keeps its points); only not-a-notebook is not."""
    _, plan = graded[PILOT]
    broken = plan.outcomes["not-a-notebook"]
    assert not broken.graded and "is not a valid notebook" in broken.problems[0]
    assert f"submitted/not-a-notebook/{PILOT}/" in broken.problems[0]
    assert {s: o.problems for s, o in plan.outcomes.items() if o.problems} == {"not-a-notebook": broken.problems}
    assert all(o.graded for s, o in plan.outcomes.items() if s != "not-a-notebook")


@needs_pilot
def test_roundtrip_stopped_grading_says_why(graded) -> None:
    """A cell that hangs or kills its kernel ends the run there, with the real reason and the real time limit."""
    _, plan = graded[PILOT]
    assert not [s for s, o in plan.outcomes.items() if "stopped" in " ".join(o.notes)]  # edited cells stop nothing
    _, toy = graded[TOY]  # the attackers and the kernels that die or hang
    crashing, last = [a for a, tests in toy.tests_of.items() if tests][1], [a for a, t in toy.tests_of.items() if t][-1]
    why = {s: " ".join(toy.outcomes[s].notes) for s in toy.outcomes}
    assert f"stopped at {crashing}: the kernel died while it ran (it exited with status 1)" in why["crash"]
    assert f"stopped at {crashing}: it ran longer than the cell time limit of {CELL_TIMEOUT_S} s" in why["endless-loop"]
    assert f"stopped at {last}: it ran longer than the cell time limit of {CELL_TIMEOUT_S} s" in why["attack-builtins"]
    assert f"stopped at {last}: the kernel died while it ran (it started more than" in why["attack-fork-bomb"]
    assert f"stopped at {last}: the kernel died while it ran" in why["attack-litter-kill"]
    for student in ("0-honest-first", "attack-plant", "attack-detached", "attack-flood", "attack-network"):
        assert "stopped" not in why[student], (student, why[student])


@needs_pilot
def test_roundtrip_attacks_reach_nothing_outside_their_sandbox(graded) -> None:
    course, plan = graded[TOY]
    planted, processes = plan.left
    assert planted == [] and processes == []  # right after the run: no plant, no litter, no process left
    assert (course.root / "nbgrader_config.py").read_bytes() == (ROOT / "nbgrader_config.py").read_bytes()
    for assignment in (PILOT, TOY):  # the gradebook's copies of the test cells untouched
        assert gradebook_cells(course, assignment, repair=False) == []
    assert plan.report is not None and relevant(plan.report.notes) == []  # nothing to restore, nothing to report
    # the hidden tests never reached the attacker (it printed whatever it could read of source/)
    (page,) = (course.autograded / "attack-gradebook" / TOY).glob("*.ipynb")
    printed = "".join(o.get("text", "") for c in read_notebook(page).cells if c.cell_type == "code" for o in c.outputs)
    assert "BEGIN HIDDEN TESTS" not in printed
    for assignment in (PILOT, TOY):
        assert not [ln for ln in hidden_lines(course, assignment) if ln in _plain(printed)]
    # 256 MB of output: each cell keeps 2 MiB, the notebook stays small
    (flooded,) = (course.autograded / "attack-flood" / TOY).glob("*.ipynb")
    assert flooded.stat().st_size < 4 * 2**20
    # the run's private folders (TMPDIR, kernel sockets, scratch folders) are gone
    assert not list(Path(tempfile.gettempdir()).glob(f"lecturelib-autograde-{os.getpid()}-*"))


@needs_pilot
def test_roundtrip_regrading_gives_same_scores_and_leaves_submissions(graded) -> None:
    """The pilot's attackers that try to leave something behind (files, processes, gradebook rows) and the honest
    students graded before and after them, graded a second time: the same scores, no submission changed, nothing
    left. (Not the attacks that only hang, flood or reach out: they leave nothing the others would not.)"""
    course, plan = graded[TOY]
    again_students = sorted(s for s in plan.outcomes if s.startswith(("attack-", "0-honest", "zz-honest"))
                            and s not in ("attack-builtins", "attack-flood", "attack-network"))
    digest = lambda: {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in course.submitted.rglob("*") if p.is_file()}
    before = digest()
    again = autograde(course, [TOY], workers=2, students=again_students, cell_timeout_s=CELL_TIMEOUT_S, force=True)
    assert len(again_students) == 7
    assert {o.student: o.score for o in again.outcomes} == {s: plan.outcomes[s].score for s in again_students}
    assert digest() == before
    assert relevant(again.notes) == [] and planted_files() == [] and attack_processes() == []


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_roundtrip_feedback_never_shows_hidden_tests(graded, assignment: str) -> None:
    """Every page of the pilot's class (hostile outputs included); elsewhere the untouched release's page, where
    every check fails (the pages' filter is the same code for every notebook: what differs is the hidden tests)."""
    course, plan = graded[assignment]
    students = None if assignment == PILOT else ["untouched", *plan.teaches]
    grade_the_written_answers(course)  # feedback waits for the written answers (the reflections) to be graded
    problems = feedback(course, [assignment], students)  # no leak of hidden tests or graders' references; a page each
    ungraded = sorted(s for s, o in plan.outcomes.items() if not o.graded)  # but what could not be graded
    assert [p.split(" not written: ")[0] for p in problems] == [f"feedback/{s}/{assignment}/{assignment}.html"
                                                                for s in ungraded if students is None], problems
    pages = list(course.feedback.glob(f"*/{assignment}/*.html"))
    assert len(pages) == len(students or plan.outcomes) - len(ungraded if students is None else [])
    assert pages and hidden_lines(course, assignment)
    for page in pages:
        text = page.read_text(encoding="utf-8")
        assert "BEGIN HIDDEN TESTS" not in text
        assert not [line for line in hidden_lines(course, assignment) if line in _plain(text)]
    # a failed build's page says which property failed, in the words its test gave (`why`), and no hidden input
    for student, wrongs in plan.teaches.items():
        shown = _plain((course.feedback / student / assignment / f"{assignment}.html").read_text(encoding="utf-8"))
        missing = [w.label for w in wrongs if w.teaches and _plain(w.teaches) not in shown]
        assert missing == [], f"{student}'s page does not say why: {missing}"
    # graders see each written answer's reference and rubric in the autograded notebook; a student's page never does
    graded_nb = course.autograded / "untouched" / assignment / f"{assignment}.ipynb"
    assert any(c.metadata.get(MARK) for c in read_notebook(graded_nb).cells)
    shown = _plain((course.feedback / "untouched" / assignment / f"{assignment}.html").read_text(encoding="utf-8"))
    assert not [c for c in reference_chunks(course.source_notebooks(assignment)) if c in shown]


@needs_pilot
def test_roundtrip_audit_flags_cheats_not_honest_work(graded) -> None:
    course, _ = graded[PILOT]
    findings = audit(course, [*ASSIGNMENTS, TOY])
    flagged = {(f.student, f.assignment) for f in findings}
    assert {("cheat", TOY), ("crash", TOY), ("tamper", TOY)} <= flagged
    honest = {"solution", "untouched", "wrong-and-skipped", "deleted-cells", "chatty",
              "pasted-cells", "no-metadata", "answers-moved", "meddled-metadata", "0-honest-first", "zz-honest-last"}
    assert not {s for s, _ in flagged} & honest
    whats = " ".join(f.what for f in findings if f.student == "cheat")
    for expected in ("defines __eq__", "patches operator", "patches math", "patches IPython", "setattr()"):
        assert expected in whats
