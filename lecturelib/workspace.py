"""The student's own copy of the course: `make lab` opens work/, a copy of the release (notebooks/) that the
course never overwrites.

The first `make lab` copies every file of notebooks/ into work/. Each later one copies in what is new (a notebook
the course added) and leaves the rest alone: a notebook you changed is yours. When the course updates a notebook
you have not touched, the new version replaces it; when you have changed it, yours stays and one line says where
the new release is, to compare and copy from (once per update). A notebook you deleted from work/ comes back as
released. work/.release.json remembers what was copied, to tell your changes from the course's.

`python -m lecturelib.workspace [RELEASE] [WORK]` (default notebooks work) does this and prints what it did.
Copies of notebooks get this interpreter's Python version in their `language_info`, as the kernel of this
environment reports it: an untouched notebook then opens unmodified in JupyterLab.

`python -m lecturelib.workspace --test [--nb NN_topic ...]` (the student's `make test`) then does what the Validate
button does for each of the release's notebooks in WORK (or those named): runs it with its visible tests and says,
in one line a notebook, whether they pass; a failing test cell gets one more line, its error's last line; a table,
notebook by notebook, ends it. A name that is no notebook of the release is refused, with the names.
"""

from __future__ import annotations

import argparse
import difflib
import hashlib
import json
import logging
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nbgrader.validator import Validator

STATE = ".release.json"
SKIP = (".ipynb_checkpoints", "__pycache__")


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def for_this_python(data: bytes, name: str) -> bytes:
    """A release file as it is copied: a notebook gets this interpreter's version in language_info."""
    if not name.endswith(".ipynb"):
        return data
    try:
        nb = json.loads(data)
        info = nb["metadata"]["language_info"]
    except (ValueError, KeyError, TypeError):
        return data
    if not isinstance(info, dict) or info.get("name") != "python" or info.get("version") == platform.python_version():
        return data
    info["version"] = platform.python_version()
    return (json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def release_files(release: Path) -> list[Path]:
    """Every file of the release, relative to it (not Jupyter's checkpoints or hidden files)."""
    return sorted(p.relative_to(release) for p in release.rglob("*")
                  if p.is_file() and not any(part in SKIP or part.startswith(".") for part in p.relative_to(release).parts))


def sync(release: Path, work: Path) -> list[str]:
    """Bring `work` up to date with `release` without overwriting anything the student changed; what it did."""
    work.mkdir(parents=True, exist_ok=True)
    state_path = work / STATE
    try:
        state: dict[str, dict[str, str | None]] = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        state = {}
    said = []
    for rel in release_files(release):
        key, source, target = rel.as_posix(), release / rel, work / rel
        data = source.read_bytes()
        new = _digest(data)
        copy = for_this_python(data, rel.name)
        known = state.get(key)
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(copy)
            state[key] = {"release": new, "copy": _digest(copy), "told": None}
            said.append(f"copied {release.name}/{key} to {work.name}/{key}" + (" (again: it was deleted)" if known else ""))
            continue
        mine = _digest(target.read_bytes())
        if known is None:  # a file that was there before the first sync: the student's
            state[key] = {"release": new, "copy": mine if mine == _digest(copy) else None, "told": None}
        elif known["release"] == new or known.get("told") == new:
            continue  # nothing new from the course, or the student was told already
        elif mine == known["copy"]:  # untouched since it was copied: take the course's update
            target.write_bytes(copy)
            state[key] = {"release": new, "copy": _digest(copy), "told": None}
            said.append(f"updated {work.name}/{key}: the course changed it and you had not")
        else:
            known["told"] = new
            said.append(f"kept your {work.name}/{key}: the course updated {release.name}/{key} since your copy was "
                        f"made; compare the two and copy what you need (your file is never overwritten)")
    state_path.write_text(json.dumps(state, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return said


def topics(release: Path) -> list[str]:
    """The release's notebooks by topic: NN_topic for notebooks/NN_topic/NN_topic.ipynb."""
    return sorted(rel.parent.name for rel in release_files(release)
                  if rel.suffix == ".ipynb" and len(rel.parts) == 2 and rel.stem == rel.parent.name)


def unknown_topic(name: str, known: list[str]) -> str:
    """The one line that refuses a notebook name the release does not have, with the names it has."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return (f"no notebook {name!r} in this course" + (f" (did you mean {close[0]}?)" if close else "")
            + f"; its notebooks: {', '.join(known)}")


@dataclass
class Checked:
    """What validating one notebook found: its failing graded cells (name, error's last line), or why it did not run."""

    topic: str
    graded: int = 0  # graded cells: autograded tests and written answers
    failed: list[tuple[str, str]] = field(default_factory=list)
    problem: str = ""  # test cells edited or a cell's type changed, the notebook unreadable, ...
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.failed and not self.problem

    def summary(self) -> str:
        """'passes' or what fails, in a few words (the table's cell)."""
        if self.problem:
            return self.problem
        if not self.failed:
            return f"passes ({self.graded} graded cell{'s' if self.graded != 1 else ''})"
        names = [name for name, _ in self.failed]
        return (f"{len(names)} of {self.graded} graded cells fail: {', '.join(names[:4])}"
                + (f" and {len(names) - 4} more" if len(names) > 4 else ""))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _last_line(error: str) -> str:
    lines = [ln.strip() for ln in _ANSI.sub("", error).splitlines() if ln.strip()]
    return (lines[-1].removesuffix(":") if lines else "it failed")[:160]  # "NotImplementedError:" has no message


def validate(path: Path, validator: Validator) -> Checked:
    """Validate one notebook of work/ with nbgrader's `validator` (as the Validate button does)."""
    start = time.perf_counter()
    topic = path.parent.name
    try:
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        meta = [c.get("metadata", {}).get("nbgrader", {}) for c in cells]
        names = {"".join(c["source"]).strip(): m.get("grade_id", f"cell {i}") for i, (c, m) in enumerate(zip(cells, meta))}
        graded = sum(1 for m in meta if m.get("grade"))
        results = validator.validate(str(path))
    except Exception as e:  # noqa: BLE001 - a notebook that cannot be read or run is that notebook's failure
        return Checked(topic, problem=f"could not be validated: {type(e).__name__}: {str(e)[:120]}",
                       seconds=time.perf_counter() - start)
    checked = Checked(topic, graded, seconds=time.perf_counter() - start)
    if results.get("type_changed"):
        checked.problem = (f"{len(results['type_changed'])} cell(s) changed type: copy them back from notebooks/"
                           f"{topic}/ (they would score 0)")
    elif results.get("changed"):
        checked.problem = (f"{len(results['changed'])} test cell(s) edited: grading puts them back as released, so "
                           f"your edits count for nothing")
    checked.failed = [(names.get(f["source"], "a cell"), _last_line(f.get("raw_error", ""))) for f in results.get("failed", [])]
    return checked


def check_notebooks(release: Path, work: Path, only: list[str]) -> int:
    """`make test`: validate the notebooks in `work` (those of `only`, by topic), one line each, then a table."""
    known = topics(release)
    for name in only:
        if name not in known:
            print(unknown_topic(name, known), file=sys.stderr)
            return 2
    from importlib.metadata import version

    from nbgrader.apps import ValidateApp
    from nbgrader.validator import Validator

    import lecturelib

    print(f"torch {version('torch')}, lecturelib from {Path(lecturelib.__file__).parent}")
    app = ValidateApp()
    app.initialize([])  # the Jupyter configuration's nbgrader_config.py (jupyter/student: the cell time limit)
    app.log.setLevel(logging.WARNING)  # not "Validating ..." for each notebook
    app.config.Execute.extra_arguments = ["--IPKernelApp.log_level=ERROR"]  # nor the kernel's TCP warning
    validator = Validator(parent=app)
    checked = []
    for topic in only or known:
        print(f"{topic} ...", end=" ", flush=True)
        result = validate(work / topic / f"{topic}.ipynb", validator)
        print(f"{'passes' if result.passed else 'FAILS'} ({result.seconds:.0f} s)")
        for line in [result.problem] if result.problem else [f"{name}: {error}" for name, error in result.failed]:
            print(f"    {line}")
        checked.append(result)
    width = max(len(c.topic) for c in checked)
    print("\n" + "\n".join(f"{c.topic.ljust(width)}  {'pass' if c.passed else 'FAIL'}  {c.summary()}" for c in checked))
    passed = sum(c.passed for c in checked)
    print(f"{passed} of {len(checked)} notebooks pass their visible tests")
    return 0 if passed == len(checked) else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lecturelib.workspace", description=__doc__.split("\n")[0])
    parser.add_argument("release", nargs="?", default="notebooks", help="the course's release (default notebooks)")
    parser.add_argument("work", nargs="?", default="work", help="your copy (default work)")
    parser.add_argument("--test", action="store_true", help="then validate the notebooks in WORK (make test)")
    parser.add_argument("--nb", action="append", default=[], metavar="NN_topic", help="only this notebook (repeatable)")
    args = parser.parse_args(argv)
    release, work = Path(args.release), Path(args.work)
    if not release.is_dir():
        print(f"no {release}/ to copy from", file=sys.stderr)
        return 2
    if args.test and any(name not in topics(release) for name in args.nb):
        return check_notebooks(release, work, args.nb)  # refuses, before anything is copied
    for line in sync(release, work):
        print(line)
    if args.test:
        return check_notebooks(release, work, args.nb)
    print(f"your notebooks are in {work}/ (yours: the course never overwrites them); the release stays in {release}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
