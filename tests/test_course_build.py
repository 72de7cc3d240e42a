"""lecturelib.course: build, check and audit (the round trip through autograding is test_course_roundtrip.py)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from nbformat.notebooknode import NotebookNode

from lecturelib.course.__main__ import main
from lecturelib.course.isolation.audit import asked_functions, audit_source
from lecturelib.course.release.build import build, check
from lecturelib.course.layout import Course, fill_answers, make_solution, read_notebook, write_notebook

ROOT = Path(__file__).resolve().parents[1]


def cell(kind: str, source: str, gid: str, *, grade: bool = False, solution: bool = False, points: int = 0) -> NotebookNode:
    meta = {"grade": grade, "solution": solution, "locked": not solution, "grade_id": gid, "schema_version": 3}
    if grade:
        meta["points"] = points
    make = nbformat.v4.new_code_cell if kind == "code" else nbformat.v4.new_markdown_cell
    return make(source, metadata={"nbgrader": meta})


def toy(test_source: str = "expect_count(double(21), 42)  # 2*21") -> NotebookNode:
    """A one-exercise master: write double(x), with a visible and a hidden test."""
    return nbformat.v4.new_notebook(
        cells=[
            cell("markdown", "# Toy", "intro"),
            cell("code", "from lecturelib.grading import expect_count", "setup"),
            cell("code", "def double(x):\n    ### BEGIN SOLUTION\n    return 2 * x\n    ### END SOLUTION", "ex1_1",
                 solution=True),
            cell("code", "expect_count(double(2), 4)  # 2*2\n### BEGIN HIDDEN TESTS\n" + test_source +
                 "\n### END HIDDEN TESTS", "ex1_1_test", grade=True, points=2),
        ],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
    )


def toy_course(tmp_path: Path, nb: NotebookNode) -> Course:
    shutil.copy2(ROOT / "nbgrader_config.py", tmp_path)
    shutil.copytree(ROOT / "jupyter" / "share", tmp_path / "jupyter" / "share")  # feedback's local MathJax
    write_notebook(nb, tmp_path / "source" / "01_toy" / "01_toy.ipynb")
    return Course(tmp_path)


def test_make_solution_drops_markers_hidden_tests_and_metadata() -> None:
    sol = make_solution(toy())
    text = "\n".join(c.source for c in sol.cells)
    assert "return 2 * x" in text and "expect_count(double(2), 4)" in text
    assert "### " not in text and "double(21)" not in text
    assert all("nbgrader" not in c.metadata for c in sol.cells)


def test_fill_answers_copies_solutions_without_markers() -> None:
    release = toy()
    release.cells[2].source = "def double(x):\n    # YOUR CODE HERE\n    raise NotImplementedError()"
    filled = fill_answers(release, toy())
    assert filled.cells[2].source == "def double(x):\n    return 2 * x"


def test_course_in_repo_is_built_and_sound() -> None:
    """`build` leaves git clean, stored outputs, grade ids and test cells are sound.

    What `check` would also execute is covered elsewhere in the suite, once: every check passing on the solution
    and failing on the untouched release by the autograding round trip, the solutions running by nbval, and no
    test cell writing to stderr by the browser tests' Validate (nbgrader scores such a cell 0).
    """
    assert check(Course(ROOT), run=False) == []


def test_check_passes_a_sound_course_and_reports_drift(tmp_path: Path) -> None:
    course = toy_course(tmp_path, toy())
    assert build(course) == []
    assert check(course) == []
    released = course.release / "01_toy" / "01_toy.ipynb"
    released.write_text(released.read_text().replace("Toy", "Edited by hand"))
    (course.solutions / "stale.ipynb").write_text("{}")
    problems = check(course, run=False)
    assert any(p.startswith("notebooks/01_toy/01_toy.ipynb: differs") for p in problems)
    assert any(p.startswith("solutions/stale.ipynb: stale") for p in problems)


def test_build_keeps_collapsed_code_and_work_in_the_release_it_replaces(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """A student who saved answers in notebooks/, then followed `check`'s advice to build: nothing is lost silently.
    In a git repository what git has is not kept again; without git every file the build changes is kept. (And a
    cell collapsed in the master, `source_hidden`, stays collapsed in the release and the solution.)"""
    master = toy()
    master.cells[1].metadata["jupyter"] = {"source_hidden": True}  # plumbing collapsed, as a widget's code may be
    (tmp_path / "course").mkdir()  # a course in a folder of a larger repository
    course = toy_course(tmp_path / "course", master)
    assert build(course) == []
    released = course.release / "01_toy" / "01_toy.ipynb"
    assert read_notebook(released).metadata.language_info["nbconvert_exporter"] == "python"  # complete: opens unmodified
    for built in (released, course.solutions / "01_toy.ipynb"):
        assert read_notebook(built).cells[1].metadata["jupyter"] == {"source_hidden": True}
    git = lambda *args: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=tmp_path,  # noqa: E731
                                       check=True, capture_output=True)
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "course")
    answered = released.read_text().replace("raise NotImplementedError()", "return 2 * x")
    released.write_text(answered)
    (course.release / "01_toy" / "notes.txt").write_text("mine")
    monkeypatch.chdir(course.root)
    assert main(["build"]) == 0
    out = capsys.readouterr().out.splitlines()
    (kept,) = (course.root / "logs" / "build").glob("kept-*")
    assert out[:2] == [f"notebooks/01_toy/{name} had work that git does not have; the build replaced it: kept in "
                       f"{kept.relative_to(course.root)}/notebooks/01_toy/{name}" for name in ("01_toy.ipynb", "notes.txt")]
    assert (kept / "notebooks" / "01_toy" / "01_toy.ipynb").read_text() == answered
    assert "return 2 * x" not in released.read_text()
    shutil.rmtree(tmp_path / ".git")
    assert main(["build"]) == 0  # no git: the release as built is no work of anyone's
    assert capsys.readouterr().out.splitlines() == ["built notebooks/ (the release) and solutions/ from source/"]


WRONG_TESTS = [  # (a hidden test that grades wrongly, what check says about it)
    ("expect_count(42, 42)", "check 2 passes on the untouched release"),
    ("expect_count(double(21), 43)", "fails on the solution"),
    ("import sys; sys.stderr.write('x')\nexpect_count(double(21), 42)", "writes to stderr"),
]


def test_check_reports_tests_that_grade_wrongly(tmp_path: Path) -> None:
    """One toy notebook, a sound test cell and three that grade wrongly (one course: one build, two kernels)."""
    nb = toy()
    for i, (hidden, _) in enumerate(WRONG_TESTS, start=2):
        nb.cells.append(cell("code", f"expect_count(double(2), 4)  # 2*2\n### BEGIN HIDDEN TESTS\n{hidden}\n"
                             "### END HIDDEN TESTS", f"ex1_{i}_test", grade=True, points=1))
    course = toy_course(tmp_path, nb)
    build(course)
    problems = check(course)
    for i, (_, expected) in enumerate(WRONG_TESTS, start=2):
        assert any(f"ex1_{i}_test" in p and expected in p for p in problems), (i, expected, problems)
    assert not [p for p in problems if "ex1_1_test" in p]  # the sound test cell is not reported




def test_check_reports_outputs_grade_ids_and_arithmetic_before_running(tmp_path: Path) -> None:
    nb = toy("expect_count(double(21), 6 * 7)")  # arithmetic in the expected value: found without running
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="hi")]
    nb.cells[0].metadata["nbgrader"]["grade_id"] = "setup"  # now two cells are "setup"
    course = toy_course(tmp_path, nb)
    build(course)
    problems = check(course)
    assert any("1 stored outputs" in p for p in problems)
    assert any("grade_id 'setup' is used by 2 cells" in p for p in problems)
    assert [p for p in problems if "ex1_1_test" in p] == [
        "source/01_toy/01_toy.ipynb: ex1_1_test: line 3: the expected value must be a literal (arithmetic in a comment)"]


def test_course_cli_rejects_unknown_assignment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    toy_course(tmp_path, toy())
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit, match="unknown assignment 'nope'"):
        main(["audit", "nope"])
    assert main(["autograde"]) == 0  # nothing submitted yet
    assert "no submissions" in capsys.readouterr().out


@pytest.mark.parametrize(
    "source, finding",
    [
        ("import torch\ntorch.mm = lambda a, b: 0", "patches torch"),
        ("import lecturelib.grading as g\ng.expect_count = print", "patches lecturelib.grading"),
        ("import builtins\nbuiltins.float = int", "patches builtins"),
        ("import sys\nsys.modules['math'] = None", "patches sys.modules"),
        ("setattr(__import__('math'), 'pi', 3)", "setattr()"),
        ("get_ipython().showtraceback = print", "patches IPython"),
        ("class A:\n    def __eq__(self, o):\n        return True", "defines __eq__"),
        ("from lecturelib.flops import matmul_flops as f", "imports lecturelib's reference matmul_flops"),
        ("import lecturelib\nx = lecturelib.flops.matmul_flops(1, 2, 3)", "calls lecturelib's reference"),
        ("import os\nos._exit(0)", "ends the kernel (os._exit)"),
        ("raise SystemExit if exit() else 0", "ends the kernel (exit)"),
        ("open('../../gradebook.db').read()", "opens a path outside its folder"),
        ("import shutil\nshutil.rmtree('x')", "touches files or processes (shutil.rmtree)"),
        ("eval('1 + 1')", "runs code the audit cannot read (eval)"),
        ("import sqlite3", "imports sqlite3"),
        ("import lecturelib.grading as g\nvars(g)['_report'] = print", "patches lecturelib.grading"),
        ("open(name, 'a').write('x')", "writes a file"),
        ("def f(p):\n    open('notes.txt', 'w').write(p)", "writes a file"),  # not a path the caller named
        ("import os\ndef f(p):\n    open(os.getcwd() + p, 'wb')", "writes a file"),
        ("import os\nos.readlink(f'/proc/{os.getppid()}/cwd')", "looks at other processes"),
        ("p = 'x/gradebook.db'", "names a place of grading (gradebook)"),
        # a rename is an atomic write only onto a path the caller gave, from a path made of that same path
        ("import os\nos.replace('x.tmp', 'x')", "touches files or processes (os.replace)"),
        ("import os\ndef f(p):\n    os.replace(p, 'x')", "touches files or processes (os.replace)"),
        ("import os\ndef f(p, q):\n    os.replace(q, p)", "touches files or processes (os.replace)"),
        ("import os\ndef f(p):\n    os.rename(os.getcwd() + '/x', p)", "touches files or processes (os.rename)"),
        ("import os\ndef f(p):\n    p = os.getcwd()\n    os.replace(p + '.tmp', p)", "touches files or processes"),
        ("import os, glob\ndef f(p):\n    for t in glob.glob('*'):\n        os.replace(t, p)", "touches files or"),
        ("import os\ndef f(p):\n    os.replace(os.path.join(p, '..', 'x'), p)", "touches files or processes"),
        ("import os\ndef f(p):\n    os.remove(p + '.tmp')", "touches files or processes (os.remove)"),
    ],
)
def test_audit_source_flags_tampering(source: str, finding: str) -> None:
    found = [what for _, what in audit_source(source, {"matmul_flops"})]
    assert any(finding in what for what in found), found


@pytest.mark.parametrize("source", [
    "import os, torch\ndef save(state, path):\n    tmp = path + '.tmp'\n    torch.save(state, tmp)\n    os.replace(tmp, path)",
    "from os import replace\nfrom pathlib import Path\ndef save(path):\n    replace(Path(path).with_suffix('.tmp'), path)",
    "import os\ndef save(path):\n    os.rename(f'{path}.part', path)",
    "import os, torch\ndef save(state, path):\n    tmp = path + '.tmp'\n    with open(tmp, 'wb') as f:\n"
    "        torch.save(state, f)\n        os.fsync(f.fileno())\n    os.replace(tmp, path)",
])
def test_audit_source_passes_an_atomic_write_of_the_callers_file(source: str) -> None:
    assert audit_source(source, {"matmul_flops"}) == []


def test_audit_source_passes_honest_answers() -> None:
    """Each notebook's reference answers, audited as `course audit` does: against that notebook's own exercises (a
    notebook may use lecturelib's reference of another notebook's exercise, as 09 uses matmul_flops)."""
    for master in sorted((ROOT / "source").rglob("*.ipynb")):
        answers = [c.source for c in fill_answers(read_notebook(master), read_notebook(master)).cells
                   if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution")]
        asked = asked_functions(master)
        for source in answers:
            assert audit_source(source, asked) == [], source
