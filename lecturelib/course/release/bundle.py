"""`bundle OUT`: the students' course, built from the instructor's private one, with no hidden test and no solution.

What goes in is listed, not what stays out: the release (notebooks/), lecturelib without `course` (the grading
machinery), the student's Jupyter settings (jupyter/student, without what Jupyter writes there), the student's
Makefile, README and .gitignore (student/), requirements.txt without the instructor's test tools, and a
pyproject.toml that installs lecturelib. Then the bundle is read back: a hidden test's line or a solution's line
in any file of it (a solution line only in lecturelib, whose reference implementations students may read: see
`references`) fails the build, and the bundle is removed.

The bundle is stamped with the commit it was built from (OUT/.course-bundle); uncommitted changes in what it is
built from (source/ included: the release is built from it) stamp it COMMIT-dirty, and `bundle` says so: such a
bundle matches no commit, so publish only a clean one.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from lecturelib.course.layout import HIDDEN_MARKS, SOLUTION_MARKS, Course, iter_source_notebooks, read_notebook

MARKER = ".course-bundle"  # in OUT: a bundle lives here (so a later bundle may replace it)
# tests of the course, and the hub an instructor runs (students' laptops need none of them)
INSTRUCTOR_ONLY_PACKAGES = ("pytest", "pytest-xdist", "nbval", "playwright", "hypothesis", "mypy", "jupyterhub",
                            "configurable-http-proxy", "dask", "distributed")  # and the grading cluster
STUDENT_JUPYTER = ("jupyter_server_config.json", "jupyter_server_config.py", "labconfig/page_config.json",
                   "nbgrader_config.py")
MIN_LINE_CHARS = 16  # shorter lines ("return x", "n = 2") occur in any code
KEEP = (".git",)  # a bundle folder that is a git repository keeps its history
# What a bundle is made from: a change to any of these that git has not committed makes it COMMIT-dirty
BUILT_FROM = ("source", "notebooks", "lecturelib", "student", "jupyter/student", "requirements.txt", "pyproject.toml")


class BundleError(RuntimeError):
    """OUT cannot hold the bundle, or the bundle would show what students must not see."""


def _fold(text: str) -> str:
    return " ".join(text.split())


def _region_lines(source: str, marks: tuple[str, str]) -> list[str]:
    lines, inside = [], False
    for line in source.split("\n"):
        if marks[0] in line:
            inside = True
        elif marks[1] in line:
            inside = False
        elif inside:
            lines.append(line)
    return lines


def secret_lines(course: Course) -> dict[str, dict[str, str]]:
    """'hidden' and 'solution': line -> assignment, for the lines (whitespace folded) of the masters' hidden tests
    and solution regions that no notebook of the release shows (a line one notebook shows is public)."""
    found: dict[str, dict[str, str]] = {"hidden": {}, "solution": {}}
    public = _fold("\n".join(c.source for path in sorted(course.release.rglob("*.ipynb"))  # what any release shows
                              if ".ipynb_checkpoints" not in path.parts for c in read_notebook(path).cells))
    for assignment, master in iter_source_notebooks(course):
        for cell in read_notebook(master).cells:
            for kind, marks in (("hidden", HIDDEN_MARKS), ("solution", SOLUTION_MARKS)):
                for line in map(_fold, _region_lines(cell.source, marks)):
                    if len(line) >= MIN_LINE_CHARS and line not in public:
                        found[kind].setdefault(line, assignment)
    return found


@dataclass
class Finding:
    path: str  # relative to the bundle
    kind: str  # "marker", "hidden" or "solution"
    line: str
    assignment: str = ""  # whose hidden test or solution it is


def scan(out: Path, secrets: dict[str, dict[str, str]]) -> list[Finding]:
    """Every hidden test line, solution line or nbgrader marker found in the bundle's text files."""
    findings = []
    for path in sorted(p for p in out.rglob("*") if p.is_file() and not set(p.relative_to(out).parts) & set(KEEP)):
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        rel = path.relative_to(out).as_posix()
        if path.suffix == ".ipynb":  # what a notebook shows: its cells' sources, not JSON's escapes
            try:
                text = "\n".join(c.source for c in read_notebook(path).cells)
            except Exception:  # noqa: BLE001 - not a notebook after all: scan its text
                pass
        folded = _fold(text)
        if not rel.startswith("lecturelib/"):  # lecturelib.grading names the markers (it parses test cells)
            findings += [Finding(rel, "marker", m) for m in (*HIDDEN_MARKS, *SOLUTION_MARKS) if m in text]
        findings += [Finding(rel, kind, line, secrets[kind][line]) for kind in ("hidden", "solution")
                     for line in sorted(secrets[kind]) if line in folded]
    return findings


def references(findings: list[Finding]) -> dict[str, list[str]]:
    """lecturelib module -> the assignments whose solution lines it shows (its reference implementations)."""
    shown: dict[str, set[str]] = {}
    for f in findings:
        if f.kind == "solution" and f.path.startswith("lecturelib/"):
            shown.setdefault(f.path, set()).add(f.assignment)
    return {path: sorted(assignments) for path, assignments in sorted(shown.items())}


def _prepare(out: Path) -> None:
    if out.exists() and any(out.iterdir()):
        if not (out / MARKER).is_file():
            raise BundleError(f"{out} is not empty and holds no bundle ({MARKER}): choose an empty or new folder")
        for child in out.iterdir():
            if child.name not in KEEP:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
    out.mkdir(parents=True, exist_ok=True)


def _requirements(text: str) -> str:
    keep = [line for line in text.splitlines()
            if re.split(r"[=<>~!\s\[]", line.strip(), maxsplit=1)[0].lower() not in INSTRUCTOR_ONLY_PACKAGES]
    return "\n".join(keep) + "\n"


def _pyproject(text: str) -> str:
    """The course's pyproject.toml without its test and type-check settings (the bundle has no tests/)."""
    out, dropping = [], False
    for line in text.splitlines():
        if re.fullmatch(r"\[[\w.\-\"]+\]\s*", line):  # a table header
            dropping = line.startswith(("[tool.pytest", "[tool.mypy"))
        if not dropping:
            out.append(line)
    return "\n".join(out).rstrip("\n") + "\n"


def _git(course: Course, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=course.root, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def uncommitted(course: Course) -> list[str]:
    """Paths of what the bundle is built from (BUILT_FROM, but lecturelib/course) that differ from the last commit, or
    that git does not track and does not ignore."""
    status = _git(course, "status", "--porcelain", "--untracked-files=all", "--no-renames", "--", *BUILT_FROM,
                  ":(exclude)lecturelib/course")  # the grading machinery, which the bundle leaves out
    return sorted({line[3:].strip('"') for line in (status or "").splitlines() if len(line) > 3})


def stamp(course: Course) -> tuple[str, list[str]]:
    """(the commit the bundle is built from, COMMIT-dirty with uncommitted changes; '' outside git, what changed)."""
    commit = (_git(course, "rev-parse", "--short", "HEAD") or "").strip()
    changed = uncommitted(course) if commit else []
    return commit + ("-dirty" if changed else ""), changed


def bundle(course: Course, out: Path, notes: list[str] | None = None) -> dict[str, list[str]]:
    """Write the students' course into `out` (new, empty, or an earlier bundle: replaced, its .git kept); return the
    lecturelib modules that show reference implementations (module -> assignments). Raises BundleError. What the
    instructor must know (a COMMIT-dirty stamp) is appended to `notes`."""
    out = out.resolve()
    if out == course.root or course.root.is_relative_to(out):
        raise BundleError(f"{out} holds the course itself: choose a folder of its own")
    _prepare(out)
    try:
        shutil.copytree(course.release, out / "notebooks",
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__", ".*"))
        import lecturelib

        shutil.copytree(Path(lecturelib.__file__).parent, out / "lecturelib",
                        ignore=shutil.ignore_patterns("course", "__pycache__", "*.pyc", ".*"))
        for name in STUDENT_JUPYTER:
            (out / "jupyter" / "student" / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(course.root / "jupyter" / "student" / name, out / "jupyter" / "student" / name)
        student = course.root / "student"
        shutil.copy2(student / "Makefile", out / "Makefile")
        shutil.copy2(student / "README.md", out / "README.md")
        shutil.copy2(student / "gitignore", out / ".gitignore")
        (out / "requirements.txt").write_text(_requirements((course.root / "requirements.txt").read_text()))
        (out / "pyproject.toml").write_text(_pyproject((course.root / "pyproject.toml").read_text()))
        built_from, changed = stamp(course)
        (out / MARKER).write_text(json.dumps({"built": time.strftime("%Y-%m-%d %H:%M:%S"), "from": built_from,
                                              "assignments": course.assignments()}, indent=1) + "\n")
        if changed and notes is not None:
            notes.append(f"stamped {built_from}: {len(changed)} uncommitted change{'s' if len(changed) != 1 else ''} "
                         f"({', '.join(changed[:3])}{', ...' if len(changed) > 3 else ''}); this bundle matches no "
                         f"commit: commit, then bundle again before you publish it")
        findings = scan(out, secret_lines(course))
        leaks = [f for f in findings if not (f.kind == "solution" and f.path.startswith("lecturelib/"))]
        if leaks:
            raise BundleError("the bundle would show students what they must not see: " + "; ".join(
                f"{f.path}: {f.kind} {f.line[:70]!r}" for f in leaks[:5]) + (" ..." if len(leaks) > 5 else ""))
    except BaseException:
        for child in out.iterdir() if out.is_dir() else []:
            if child.name not in KEEP:
                shutil.rmtree(child) if child.is_dir() and not child.is_symlink() else child.unlink()
        raise
    return references(findings)
