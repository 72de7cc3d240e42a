"""`course bundle`: the students' course holds no hidden test and no solution, and works on its own."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lecturelib.course.__main__ import main
from lecturelib.course.release.build import execute
from lecturelib.course.release.bundle import MARKER, scan, secret_lines
from lecturelib.course.layout import Course, read_notebook
from lecturelib.course.release.reference import reference_chunks

ROOT = Path(__file__).resolve().parents[1]
COURSE = Course(ROOT)
PILOT = "02_matmul_flops"


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "student-course"
    assert main(["bundle", str(out)]) == 0
    return out


def test_bundle_holds_what_students_need_and_nothing_of_the_instructors(bundled: Path) -> None:
    top = sorted(p.name for p in bundled.iterdir())
    assert top == sorted([MARKER, ".gitignore", "Makefile", "README.md", "jupyter", "lecturelib", "notebooks",
                          "pyproject.toml", "requirements.txt"])
    files = {p.relative_to(bundled).as_posix() for p in bundled.rglob("*") if p.is_file()}
    assert {f"notebooks/{a}/{a}.ipynb" for a in COURSE.assignments()} <= files
    assert not [f for f in files if f.startswith(("lecturelib/course", "source", "solutions", "tests"))]
    assert not [f for f in files if f.endswith(("gradebook.db", "nbgrader_config.py")) and "jupyter/student" not in f]
    assert sorted(f for f in files if f.startswith("jupyter/")) == [
        "jupyter/student/jupyter_server_config.json", "jupyter/student/jupyter_server_config.py",
        "jupyter/student/labconfig/page_config.json", "jupyter/student/nbgrader_config.py"]
    for package in ("playwright==", "jupyterhub==", "distributed=="):  # the tests, the hub, the cluster: not students'
        assert package not in (bundled / "requirements.txt").read_text()
    assert "nbgrader==" in (bundled / "requirements.txt").read_text()  # Validate
    assert "[tool.pytest" not in (bundled / "pyproject.toml").read_text()


def test_bundle_shows_no_hidden_test_and_no_solution(bundled: Path) -> None:
    """Every file read back, independently of the check `bundle` runs itself: no nbgrader marker, no line of a
    hidden test anywhere, no line of a solution outside lecturelib (whose reference implementations students may
    read: the README says so, and the audit flags answers that use them), no graders' reference."""
    secrets = secret_lines(COURSE)
    assert len(secrets["hidden"]) > 50 and len(secrets["solution"]) > 100  # every master's, not none
    findings = scan(bundled, secrets)
    assert [f for f in findings if f.kind in ("marker", "hidden")] == []
    assert [f for f in findings if f.kind == "solution" and not f.path.startswith("lecturelib/")] == []
    shown = " ".join(" ".join(c.source.split()) for p in bundled.rglob("*.ipynb") for c in read_notebook(p).cells)
    assert not [c for c in reference_chunks([p for _, p in _masters()]) if c in shown]
    raw = "\n".join(p.read_text(errors="replace") for p in bundled.rglob("*") if p.is_file())
    assert "BEGIN HIDDEN TESTS" not in raw.replace('"### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"', "")


def _masters() -> list[tuple[str, Path]]:
    return [(a, p) for a in COURSE.assignments() for p in COURSE.source_notebooks(a)]


def test_bundle_runs_on_its_own(bundled: Path) -> None:
    """The student's `make lab` first makes work/ with the bundle's own lecturelib; a notebook's parameters cell runs
    there with it. (Here the bundle comes first on the path; this venv's editable install of the instructor's
    lecturelib is still behind it, as a student's venv holds the bundle's.)"""
    env = {**os.environ, "PYTHONPATH": str(bundled)}
    made = subprocess.run([sys.executable, "-m", "lecturelib.workspace"], cwd=bundled, env=env, capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    assert (bundled / "work" / PILOT / f"{PILOT}.ipynb").is_file()
    dry = subprocess.run(["make", "-n", "lab", "test"], cwd=bundled, capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "lecturelib.workspace notebooks work" in dry.stdout, dry.stderr
    nb = read_notebook(bundled / "work" / PILOT / f"{PILOT}.ipynb")
    (parameters,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    probe = nb.cells[0].__class__(cell_type="code", metadata={}, outputs=[], execution_count=None, source=(
        "import lecturelib\nprint(lecturelib.__file__, hardware.__file__)"))
    nb.cells = [parameters, probe]
    os.environ["PYTHONPATH"], old = str(bundled), os.environ.get("PYTHONPATH")
    try:
        ran = execute(nb, bundled / "work" / PILOT)
    finally:
        os.environ.pop("PYTHONPATH") if old is None else os.environ.__setitem__("PYTHONPATH", old)
    assert not [o for c in ran.cells for o in c.outputs if o.output_type == "error"]
    printed = "".join(o.get("text", "") for o in ran.cells[1].outputs)
    assert printed.split() == [str(bundled / "lecturelib" / "__init__.py"), str(bundled / "lecturelib" / "hardware.py")]


def test_bundle_replaces_only_a_bundle(bundled: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bundled / ".git").mkdir(exist_ok=True)
    (bundled / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (bundled / "stale.txt").write_text("from an older bundle")
    assert main(["bundle", str(bundled)]) == 0  # an earlier bundle: replaced, its git history kept
    assert (bundled / ".git" / "HEAD").is_file() and not (bundled / "stale.txt").exists()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "thesis.tex").write_text("mine")
    assert main(["bundle", str(other)]) == 2  # not a bundle: never emptied
    assert "is not empty and holds no bundle" in capsys.readouterr().err
    assert (other / "thesis.tex").read_text() == "mine"


def _toy(root: Path) -> Course:
    """A one-notebook course that bundles: its release without hidden tests, the student's files of this course."""
    from lecturelib.course.layout import make_solution, write_notebook
    from test_course_build import toy, toy_course

    root.mkdir(parents=True, exist_ok=True)
    course = toy_course(root, toy())
    write_notebook(make_solution(toy()), course.release / "01_toy" / "01_toy.ipynb")  # a release without hidden tests
    shutil.copytree(ROOT / "jupyter" / "student", course.root / "jupyter" / "student",
                    ignore=shutil.ignore_patterns("lab", "migrated"))
    for name in ("requirements.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, course.root)
    shutil.copytree(ROOT / "student", course.root / "student")
    return course


def test_bundle_refuses_to_show_a_hidden_test(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A student README that quotes a hidden test (pasted by mistake): the bundle's own check refuses, nothing is left."""
    course = _toy(tmp_path)
    readme = course.root / "student" / "README.md"
    readme.write_text(readme.read_text() + "\nFor example `expect_count(double(21), 42)  # 2*21`.\n")
    out = tmp_path / "out"
    monkeypatch.chdir(course.root)
    assert main(["bundle", str(out)]) == 1
    assert capsys.readouterr().err.strip() == ("no bundle written: the bundle would show students what they must not "
                                               "see: README.md: hidden 'expect_count(double(21), 42) # 2*21'")
    assert not list(out.iterdir())


def test_bundle_of_uncommitted_changes_is_stamped_dirty_and_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Built from the last commit: stamped with it. With a master changed since (not committed): COMMIT-dirty, and
    one line says which files and to commit before publishing; a change to the grading machinery alone does not."""
    course = _toy(tmp_path / "course")
    git = lambda *args: subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@example.edu", *args],  # noqa: E731
                                       cwd=course.root, capture_output=True, text=True, check=True).stdout.strip()
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "the course")
    commit = git("rev-parse", "--short", "HEAD")
    monkeypatch.chdir(course.root)
    (course.root / "lecturelib" / "course").mkdir(parents=True)  # the grading machinery: in no bundle
    (course.root / "lecturelib" / "course" / "new.py").write_text("NEW = 1\n")
    out = tmp_path / "out"
    assert main(["bundle", str(out)]) == 0
    assert json.loads((out / MARKER).read_text())["from"] == commit
    assert "matches no commit" not in capsys.readouterr().out
    master = course.source / "01_toy" / "01_toy.ipynb"
    master.write_text(master.read_text().replace("# Toy", "# Toy, revised"))
    assert main(["bundle", str(out)]) == 0
    assert json.loads((out / MARKER).read_text())["from"] == f"{commit}-dirty"
    assert capsys.readouterr().out.splitlines()[-1] == (
        f"stamped {commit}-dirty: 1 uncommitted change (source/01_toy/01_toy.ipynb); this bundle matches no commit: "
        "commit, then bundle again before you publish it")
