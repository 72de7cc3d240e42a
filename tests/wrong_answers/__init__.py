"""Wrong builds that must lose their points: one file per notebook, `NN_topic.py`, holding `WRONG: list[Wrong]`."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Wrong:
    """An answer cell's source replaced by a plausible mistake; the round trip checks exactly `fails` lose points."""

    cell: str  # grade_id of the answer cell it replaces
    label: str  # the mistake, in words ("an off-by-one tile edge")
    source: str  # the whole wrong answer cell (it must define what the right one defines)
    fails: tuple[str, ...] = ()  # grade_ids of the test cells that must fail; () = every test cell after `cell`
    teaches: str = ""  # the `why` of a check it fails, which its feedback page must show (in the student's terms)


def load(assignment: str) -> list[Wrong]:
    """The wrong builds registered for an assignment (none if it has no file here)."""
    path = HERE / f"{assignment}.py"
    if not path.is_file():
        return []
    spec = importlib.util.spec_from_file_location(f"wrong_answers_{assignment}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    wrong = list(module.WRONG)
    assert all(isinstance(w, Wrong) for w in wrong), f"{path}: WRONG must hold Wrong(...) entries"
    return wrong
