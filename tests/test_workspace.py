"""lecturelib.workspace: the student's own copy of the release is made once and never overwritten."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lecturelib.workspace import main, sync

ROOT = Path(__file__).resolve().parents[1]
PILOT = "02_matmul_flops/02_matmul_flops.ipynb"


@pytest.fixture
def release(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    return tmp_path / "notebooks"


def version(path: Path) -> str:
    return str(json.loads(path.read_text())["metadata"]["language_info"]["version"])


UPDATE = "A cell the course added in an update."


def updated(notebook: Path) -> None:
    """The course's update of a released notebook: a cell added at the end (whatever the notebook says)."""
    nb = json.loads(notebook.read_text())
    nb["cells"].append({"cell_type": "markdown", "id": "added-in-an-update", "metadata": {}, "source": UPDATE})
    notebook.write_text(json.dumps(nb, indent=1))


def test_first_sync_copies_the_release_for_this_python(release: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    said = sync(release, work)
    assert len(said) == len(list(release.rglob("*.ipynb"))) and said[0].startswith("copied notebooks/")
    copy = json.loads((work / PILOT).read_text())
    assert copy["metadata"]["language_info"]["version"] == platform.python_version()  # opens unmodified
    original = json.loads((release / PILOT).read_text())
    original["metadata"]["language_info"]["version"] = platform.python_version()
    assert copy == original  # nothing else changed
    assert sync(release, work) == []  # nothing new


def test_updates_never_overwrite_a_students_work(release: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    sync(release, work)
    mine = work / PILOT
    nb = json.loads(mine.read_text())
    nb["cells"].append({"cell_type": "code", "id": "mine", "metadata": {}, "source": "my_answer = 42",
                        "outputs": [], "execution_count": None})  # the student's work
    mine.write_text(json.dumps(nb, indent=1))
    answered = mine.read_bytes()
    untouched = next(p for p in sorted(work.rglob("*.ipynb")) if p != mine)
    for changed in (release / PILOT, release / untouched.relative_to(work)):  # the course updates both notebooks
        updated(changed)
    added = release / "99_added_later" / "99_added_later.ipynb"  # a notebook the course adds: no release has it
    assert not added.parent.exists()
    added.parent.mkdir()
    added.write_text((release / PILOT).read_text())
    said = sync(release, work)
    assert mine.read_bytes() == answered  # the student's answer stays
    assert f"kept your work/{PILOT}: the course updated notebooks/{PILOT} since your copy was made; compare the two " \
           "and copy what you need (your file is never overwritten)" in said
    assert f"updated work/{untouched.relative_to(work).as_posix()}: the course changed it and you had not" in said
    assert "copied notebooks/99_added_later/99_added_later.ipynb to work/99_added_later/99_added_later.ipynb" in said
    assert UPDATE in untouched.read_text()
    assert sync(release, work) == []  # told once
    mine.unlink()
    assert sync(release, work) == [f"copied notebooks/{PILOT} to work/{PILOT} (again: it was deleted)"]


def test_command_says_where_the_notebooks_are(release: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert main([]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == (
        "your notebooks are in work/ (yours: the course never overwrites them); the release stays in notebooks/")
    assert (tmp_path / "work" / PILOT).is_file()
    assert main(["nowhere", "work"]) == 2


def fake_venv(folder: Path, python: str) -> Path:
    """A venv whose python is a shell script: `python` is its body ("$@" are its arguments)."""
    (folder / "bin").mkdir(parents=True)
    script = folder / "bin" / "python"
    script.write_text(f"#!/bin/sh\n{python}\n")
    script.chmod(0o755)
    return folder


def make(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`make ARGS` in `folder`, with the interpreter named (finding one costs seconds where python3.X are shims)."""
    return subprocess.run(["make", "--no-print-directory", f"PYTHON={sys.executable}", *args], cwd=folder,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("makefile", ["student/Makefile", "Makefile"])
def test_setup_reinstalls_only_when_the_requirements_change(tmp_path: Path, makefile: str) -> None:
    """`make lab` after a new download copied over the folder (the same requirements, newer files): no pip; after a
    real change to requirements.txt or pyproject.toml: pip again. (The instructor's Makefile alike: a git checkout.)"""
    shutil.copy2(ROOT / makefile, tmp_path / "Makefile")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0  # the pin\n")
    (tmp_path / "pyproject.toml").write_text("[project]\nname = \"course\"\n")
    log = tmp_path / "pip.log"
    fake_venv(tmp_path / "venv", f'echo "$@" >> {log}')
    installs = lambda: log.read_text().count("lecturelib/install.py") if log.exists() else 0  # noqa: E731
    assert make(tmp_path, "setup", "VENV=venv").returncode == 0 and installs() == 2  # requirements, then lecturelib
    assert "Nothing to be done" in make(tmp_path, "setup", "VENV=venv").stdout and installs() == 2
    later = time.time() + 60
    for name in ("requirements.txt", "pyproject.toml"):  # a new download unpacked over the folder: same files, newer
        (tmp_path / name).write_text((tmp_path / name).read_text())
        os.utime(tmp_path / name, (later, later))
    planned = make(tmp_path, "-n", "lab", "VENV=venv").stdout
    assert "pip" not in planned and "install.py" not in planned
    assert make(tmp_path, "setup", "VENV=venv").returncode == 0 and installs() == 2
    (tmp_path / "requirements.txt").write_text("torch==2.13.0  # the pin\nnumpy==2.3.5\n")  # a real change
    assert make(tmp_path, "setup", "VENV=venv").returncode == 0 and installs() == 4


def student_course(tmp_path: Path, topics: dict[str, str]) -> Path:
    """The student's folder (the bundle's Makefile and Jupyter settings, this venv behind a script) with one toy
    notebook a topic, released with `answer` as the student's work already in work/."""
    from lecturelib.course.layout import write_notebook
    from test_course_build import toy

    folder = tmp_path / "course"
    shutil.copytree(ROOT / "jupyter" / "student", folder / "jupyter" / "student",
                    ignore=shutil.ignore_patterns("lab", "migrated"))
    shutil.copy2(ROOT / "student" / "Makefile", folder / "Makefile")
    for name in ("requirements.txt", "pyproject.toml"):
        shutil.copy2(ROOT / name, folder)
    venv = fake_venv(folder / ".venv", f'exec {sys.executable} "$@"')
    (venv / ".installed").write_text((folder / "requirements.txt").read_text() + (folder / "pyproject.toml").read_text())
    for topic, answer in topics.items():
        nb = toy()
        nb.cells[2].source = "def double(x):\n    raise NotImplementedError()"  # the release: no solution
        nb.cells[3].source = "expect_count(double(2), 4)  # 2*2"  # and no hidden test
        write_notebook(nb, folder / "notebooks" / topic / f"{topic}.ipynb")
        nb.cells[2].source = answer
        write_notebook(nb, folder / "work" / topic / f"{topic}.ipynb")
    return folder


def test_make_test_refuses_a_notebook_the_course_lacks(tmp_path: Path) -> None:
    folder = student_course(tmp_path, {"01_toy": "", "02_matmul_flops": ""})
    done = make(folder, "test", "NB=02_matmul")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[0] == ("no notebook '02_matmul' in this course (did you mean 02_matmul_flops?); "
                                           "its notebooks: 01_toy, 02_matmul_flops")


def test_make_test_says_notebook_by_notebook_what_fails(tmp_path: Path) -> None:
    """Two notebooks, one answered and one not: a line each while they run (the failing cell and its error under
    the one that fails), then a table, notebook by notebook, and the count; exit status non-zero."""
    folder = student_course(tmp_path, {"01_toy": "def double(x):\n    return 2 * x",
                                       "02_toy": "def double(x):\n    raise NotImplementedError()"})
    done = make(folder, "test")
    assert done.returncode == 2, done.stderr  # make's status when the command fails
    lines = done.stdout.splitlines()
    assert lines[0].startswith("torch ") and re.fullmatch(r"01_toy \.\.\. passes \(\d+ s\)", lines[1]), lines
    assert re.fullmatch(r"02_toy \.\.\. FAILS \(\d+ s\)", lines[2]) and lines[3] == "    ex1_1_test: NotImplementedError"
    assert lines[4:] == ["",
                         "01_toy  pass  passes (1 graded cell)",
                         "02_toy  FAIL  1 of 1 graded cells fail: ex1_1_test",
                         "1 of 2 notebooks pass their visible tests"]
