"""How much of the course's autograded work is building: `python tests/exercise_counts.py` prints every graded exercise.

An exercise is an autograded answer cell of a master notebook (nbgrader `solution`, not a manually graded cell) with
the points of the test cells that follow it, up to the next answer cell; exercises whose tests carry no points (the
predictions) are not counted. Its size is the code lines of its solution regions (`### BEGIN SOLUTION` to
`### END SOLUTION`, every region of the cell; blank and comment lines not counted). A **mechanism** is a solution of at least
`MECHANISM_LINES` code lines with a loop or a class in it (state carried from step to step: blocks read, messages
sent, tokens fed); the rest are closed forms. The course's goals (issue "Points only for building"):
at most 25 % of the exercises have a solution of 3 lines or fewer, and at least half of the autograded points are on
mechanisms. `tests/test_exercise_counts.py` holds the course to them.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MECHANISM_LINES = 6  # fewer code lines than this is a formula however it is written
SHORT_LINES = 3  # "a solution of ≤ 3 lines"
MAX_SHORT_SHARE = 0.25  # of the exercises
MIN_MECHANISM_SHARE = 0.50  # of the autograded points
_SOLUTION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)


@dataclass(frozen=True)
class Exercise:
    """One autograded answer cell and the points of its test cells."""

    notebook: str  # "03_softmax_attention"
    grade_id: str  # "ex3_7"
    lines: int  # code lines of the solution regions
    points: float  # points of the test cells after it
    has_loop: bool  # a for/while loop, a comprehension or a class in a solution region
    names: tuple[str, ...] = ()  # the functions and classes the answer cell defines (what the tests call)

    @property
    def mechanism(self) -> bool:
        """Built step by step (at least MECHANISM_LINES lines with a loop or a class), not a closed form."""
        return self.lines >= MECHANISM_LINES and self.has_loop


def _has_loop(code: str) -> bool:
    try:
        tree = ast.parse(textwrap.dedent(code))
    except SyntaxError:  # a region that is part of a block (inside a def's body at two levels): try it wrapped
        tree = ast.parse("def _():\n" + textwrap.indent(textwrap.dedent(code), "    "))
    return any(isinstance(n, ast.For | ast.While | ast.comprehension | ast.ClassDef) for n in ast.walk(tree))


def _defined(source: str) -> tuple[str, ...]:
    """Top-level functions and classes an answer cell defines (the solution markers are comments: it parses as is)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef) and not n.name.startswith("_"))


def exercises(root: Path = ROOT) -> list[Exercise]:
    """Every autograded exercise of the master notebooks in source/, in course order."""
    found: list[Exercise] = []
    for path in sorted((root / "source").glob("*/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        current: dict[str, object] | None = None
        pending: list[dict[str, object]] = []
        for cell in cells:
            meta = cell.get("metadata", {}).get("nbgrader", {})
            if cell["cell_type"] != "code":
                continue
            source = "".join(cell["source"])
            if meta.get("solution") and not meta.get("grade"):
                bodies = _SOLUTION.findall(source)  # every region of the cell: one per function it asks for
                code = [ln for body in bodies for ln in body.splitlines() if ln.strip() and not ln.strip().startswith("#")]
                current = {"grade_id": meta.get("grade_id", "?"), "lines": len(code), "points": 0.0,
                           "has_loop": any(_has_loop(body) for body in bodies if body.strip()),
                           "names": _defined(source)}
                pending.append(current)
            elif meta.get("grade") and not meta.get("solution") and current is not None:
                current["points"] = float(current["points"]) + float(meta.get("points", 0))  # type: ignore[arg-type]
        found += [Exercise(path.parent.name, str(e["grade_id"]), int(e["lines"]), float(e["points"]),  # type: ignore[arg-type]
                           bool(e["has_loop"]), tuple(e["names"])) for e in pending  # type: ignore[arg-type]
                  if float(e["points"]) > 0]  # type: ignore[arg-type]
    return found


@dataclass(frozen=True)
class Counts:
    """The course's totals against its goals."""

    exercises: int
    short: int  # solutions of SHORT_LINES lines or fewer
    points: float
    mechanism_points: float

    @property
    def short_share(self) -> float:
        return self.short / self.exercises

    @property
    def mechanism_share(self) -> float:
        return self.mechanism_points / self.points


def counts(found: list[Exercise]) -> Counts:
    """Totals over `found`."""
    return Counts(len(found), sum(e.lines <= SHORT_LINES for e in found), sum(e.points for e in found),
                  sum(e.points for e in found if e.mechanism))


def report(found: list[Exercise]) -> str:
    """A table, notebook by notebook, and the totals against the goals."""
    lines = [f"{'exercise':<28} {'lines':>5} {'points':>6}  kind"]
    for e in found:
        kind = "mechanism" if e.mechanism else ("short" if e.lines <= SHORT_LINES else "closed form")
        lines.append(f"{e.notebook[:18] + ' ' + e.grade_id:<28} {e.lines:>5} {e.points:>6g}  {kind}")
    c = counts(found)
    lines.append(f"\n{c.exercises} graded exercises; {c.short} with a solution of ≤ {SHORT_LINES} lines "
                 f"({c.short_share:.0%}; goal ≤ {MAX_SHORT_SHARE:.0%}); {c.mechanism_points:g} of {c.points:g} "
                 f"autograded points on mechanisms ({c.mechanism_share:.0%}; goal ≥ {MIN_MECHANISM_SHARE:.0%})")
    return "\n".join(lines)


def written_points(root: Path = ROOT) -> dict[str, float]:
    """Points of the manually graded cells (the written reflections), by notebook."""
    found: dict[str, float] = {}
    for path in sorted((root / "source").glob("*/*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found[path.parent.name] = sum(float(c["metadata"]["nbgrader"].get("points", 0)) for c in cells
                                      if c.get("metadata", {}).get("nbgrader", {}).get("grade")
                                      and c["metadata"]["nbgrader"].get("solution"))
    return found


def markdown(found: list[Exercise], written: dict[str, float]) -> str:
    """README's exercise list: a row per notebook, each exercise with what it asks for, its points and kind."""
    rows = ["| notebook | autograded exercises (points; **bold**: a mechanism, built step by step) | written |",
            "| --- | --- | --- |"]
    for notebook in sorted({e.notebook for e in found} | set(written)):
        parts = []
        for e in (e for e in found if e.notebook == notebook):
            what = ", ".join(f"`{n}`" for n in e.names) or "a cell"
            label = f"{e.grade_id.removeprefix('ex').replace('_', '.')} {what} ({e.points:g})"
            parts.append(f"**{label}**" if e.mechanism else label)
        rows.append(f"| {notebook} | {'; '.join(parts)} | {written.get(notebook, 0):g} |")
    c = counts(found)
    rows.append(f"\n{c.exercises} autograded exercises: {c.short} with a solution of ≤ {SHORT_LINES} lines "
                f"({c.short_share:.0%}), {c.mechanism_points:g} of {c.points:g} points on mechanisms "
                f"({c.mechanism_share:.0%}) (`python tests/exercise_counts.py`).")
    return "\n".join(rows)


if __name__ == "__main__":
    if sys.argv[1:] == ["--markdown"]:
        print(markdown(exercises(), written_points()))
        sys.exit(0)
    print(report(exercises()))
    c = counts(exercises())
    sys.exit(0 if c.short_share <= MAX_SHORT_SHARE and c.mechanism_share >= MIN_MECHANISM_SHARE else 1)
