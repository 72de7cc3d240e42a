"""lecturelib.workspace: the student's own copy of the release is made once and never overwritten."""

from __future__ import annotations

import json
import platform
import shutil
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
    mine.write_text(mine.read_text().replace("YOUR CODE HERE", "my answer"))
    answered = mine.read_bytes()
    untouched = sorted(work.rglob("*.ipynb"))[0]
    (release / PILOT).write_text((release / PILOT).read_text().replace("Why a matmul", "Why a matmul (updated)"))
    first = release / untouched.relative_to(work)
    first.write_text(first.read_text().replace("import", "import  "))
    (release / "09_new").mkdir()
    (release / "09_new" / "09_new.ipynb").write_text((release / PILOT).read_text())
    said = sync(release, work)
    assert mine.read_bytes() == answered  # the student's answer stays
    assert f"kept your work/{PILOT}: the course updated notebooks/{PILOT} since your copy was made; compare the two " \
           "and copy what you need (your file is never overwritten)" in said
    assert f"updated work/{untouched.relative_to(work).as_posix()}: the course changed it and you had not" in said
    assert "copied notebooks/09_new/09_new.ipynb to work/09_new/09_new.ipynb" in said
    assert untouched.read_text().count("import  ") >= 1
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
