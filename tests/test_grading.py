"""lecturelib.grading: plain-value conversion, in-notebook checks, and the trusted rewrite + judge."""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lecturelib.grading import (
    RECORD_MARK,
    TOLERANCES,
    CheckFailed,
    InvalidTestCell,
    as_count,
    expect_bool,
    expect_count,
    expect_counts,
    expect_real,
    judge,
    matches,
    parse_test_cell,
    prepare_test_cell,
)


class AlwaysEqual(int):
    """An answer that claims to equal anything and even converts to the right number sometimes."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


class Liar:
    def __eq__(self, other: object) -> bool:
        return True


def run_prepared(source: str, namespace: dict) -> str:
    """Execute a prepared test cell as the kernel would; return what it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(source, namespace)
    return out.getvalue()


@pytest.mark.parametrize("value", [7, np.int64(7), np.int32(7), torch.tensor(7), torch.tensor(7, dtype=torch.int16)])
def test_expect_count_accepts_integer_types(value: object) -> None:
    expect_count(value, 7)


@pytest.mark.parametrize("value", [Liar(), 7.0, "7", True, torch.tensor(7.0), [7]])
def test_expect_count_rejects_non_integers(value: object) -> None:
    with pytest.raises(CheckFailed):
        expect_count(value, 7)


def test_expect_count_uses_the_plain_value_not_eq() -> None:
    # AlwaysEqual(3) == 7 is True, but its plain value is 3
    with pytest.raises(CheckFailed, match="expected 7, got 3"):
        expect_count(AlwaysEqual(3), 7)


def test_expect_real_tolerance_classes() -> None:
    expect_real(0.1 + 0.2, 0.3)  # float: rel 1e-9
    expect_real(np.float32(1.5), 1.5)
    expect_real(torch.tensor(2.0), 2.0)
    expect_real(3.1416, 3.14159265, "rounded")  # rel 1e-3
    with pytest.raises(CheckFailed):
        expect_real(3.1416, 3.14159265)
    with pytest.raises(CheckFailed):
        expect_real(float("nan"), 1.0)
    with pytest.raises(ValueError):
        expect_real(1.0, 1.0, "generous")
    assert set(TOLERANCES) == {"exact", "float", "single", "rounded"}


def test_expect_bool_and_counts() -> None:
    expect_bool(np.bool_(True), True)
    expect_bool(torch.tensor(False), False)
    with pytest.raises(CheckFailed):
        expect_bool(1, True)  # an int is not a truth value
    expect_counts(torch.Size([2, 3]), (2, 3))
    expect_counts((np.int64(4), 5), (4, 5))
    with pytest.raises(CheckFailed):
        expect_counts((2, 3, 1), (2, 3))


def test_expect_quiet_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    expect_count(torch.tensor(3), 3)
    assert capsys.readouterr().err == ""


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_as_count_roundtrips_integers(n: int) -> None:
    assert as_count(n) == n and type(as_count(n)) is int


@given(st.integers(), st.integers())
def test_matches_count_is_plain_equality(a: int, b: int) -> None:
    assert matches("count", a, b) is (a == b)
    assert matches("count", float(a), a) is False  # a float is never a count


CELL = """from lecturelib.grading import expect_count, expect_real
expect_count(double(2), 4)  # 2*2 = 4
### BEGIN HIDDEN TESTS
expect_count(double(21), 42)  # 2*21 = 42
expect_real(half(3), 1.5)
### END HIDDEN TESTS
"""


def test_prepare_test_cell_removes_expected_literals() -> None:
    rewritten, checks = prepare_test_cell(CELL, "ex1_test")
    assert [c.expected for c in checks] == [4, 42, 1.5]
    assert [c.hidden for c in checks] == [False, True, True]
    assert "42" not in rewritten and "1.5" not in rewritten  # never sent to the kernel
    assert "double(21)" in rewritten


def test_judge_passes_correct_answers_only() -> None:
    rewritten, checks = prepare_test_cell(CELL, "ex1_test")
    good = run_prepared(rewritten, {"double": lambda x: 2 * x, "half": lambda x: x / 2})
    assert judge("ex1_test", checks, good).passed
    bad = run_prepared(rewritten, {"double": lambda x: x * x, "half": lambda x: x / 2})
    verdict = judge("ex1_test", checks, bad)
    assert not verdict.passed
    assert verdict.messages == ("a hidden check failed",)  # double(2) == 2*2 == 2**2; 21**2 != 42


def test_judge_rejects_liars_and_errors() -> None:
    rewritten, checks = prepare_test_cell(CELL, "ex1_test")
    out = run_prepared(rewritten, {"double": lambda x: Liar(), "half": lambda x: 1 / 0})
    verdict = judge("ex1_test", checks, out)
    assert not verdict.passed and len(verdict.messages) == 3


def test_judge_fails_missing_and_duplicated_reports() -> None:
    _, checks = prepare_test_cell(CELL, "ex1_test")
    one = RECORD_MARK + '{"cell": "ex1_test", "i": 0, "value": 4}\n'
    assert judge("ex1_test", checks, "").messages[0].endswith("did not run")
    assert "reported 2 times" in judge("ex1_test", checks, one + one).messages[0]


def test_judge_ignores_reports_for_other_cells() -> None:
    _, checks = prepare_test_cell("expect_count(f(), 4)\n", "a")
    forged = RECORD_MARK + '{"cell": "b", "i": 0, "value": 4}\n'
    assert not judge("a", checks, forged).passed


@pytest.mark.parametrize(
    "source, message",
    [
        ("x = 1\n", "at least one expect_"),
        ("expect_count(f(), 2 * 3)\n", "must be a literal"),
        ("for i in range(3):\n    expect_count(f(i), 1)\n", "statement of its own"),
        ("expect_real(f(), 1.0, 'loose')\n", "unknown tolerance"),
        ("expect_count(f()\n", "does not parse"),
    ],
)
def test_parse_test_cell_rejects_cells_the_judge_cannot_trust(source: str, message: str) -> None:
    with pytest.raises(InvalidTestCell, match=message):
        parse_test_cell(source)


def test_report_survives_prints_without_a_newline() -> None:
    rewritten, checks = prepare_test_cell(CELL, "ex1_test")

    def chatty_double(x: int) -> int:
        print("working", end="")  # would glue itself to the front of the record line
        return 2 * x

    out = run_prepared(rewritten, {"double": chatty_double, "half": lambda x: x / 2})
    assert judge("ex1_test", checks, out).passed
    assert "working" not in out  # the checked expression's prints are kept out of the cell


def test_judge_explains_wrong_kinds_but_not_student_errors_in_hidden_checks() -> None:
    rewritten, checks = prepare_test_cell(CELL, "ex1_test")

    def double(x: int) -> float:
        if x == 21:
            raise ValueError(f"secret input {x}")
        return 2.0 * x

    verdict = judge("ex1_test", checks, run_prepared(rewritten, {"double": double, "half": lambda x: x / 2}))
    assert verdict.messages == (
        "check 1 `expect_count(double(2), 4)`: expected a count (an integer), got float",
        "a hidden check raised ValueError",  # its message could quote a hidden input
    )


def test_judge_shows_counts_as_tuples() -> None:
    rewritten, checks = prepare_test_cell("expect_counts(shape(), (2, 3))\n", "t")
    verdict = judge("t", checks, run_prepared(rewritten, {"shape": lambda: [2, 4]}))
    assert verdict.messages == ("check 1 `expect_counts(shape(), (2, 3))`: expected (2, 3), got (2, 4)",)


def test_why_says_which_property_failed_for_hidden_checks_too() -> None:
    cell = ('expect_bool(ring_ok(2), True, why="each rank sends only to its right neighbour")\n'
            "### BEGIN HIDDEN TESTS\n"
            'expect_count(blocks(7919), 3, why="a block was read twice")\n'
            "expect_count(blocks(7907), 5)\n"
            "### END HIDDEN TESTS\n")
    rewritten, checks = prepare_test_cell(cell, "t")
    assert [c.why for c in checks] == ["each rank sends only to its right neighbour", "a block was read twice", ""]
    assert "each rank sends" not in rewritten and "7919" in rewritten  # why stays with the grader, like the literal
    verdict = judge("t", checks, run_prepared(rewritten, {"ring_ok": lambda n: False, "blocks": lambda n: 4}))
    assert verdict.messages == (
        "check 1 `expect_bool(ring_ok(2), True, why=\"each rank sends only to its right neighbour\")` (each rank sends "
        "only to its right neighbour): expected True, got False",
        "a hidden check (a block was read twice) failed",  # the property, never the input 7919 or the expected 3
        "a hidden check failed",
    )


def test_why_in_notebook_mode_leads_the_message() -> None:
    with pytest.raises(CheckFailed, match=r"^the scale was not applied: expected 4, got 5$"):
        expect_count(5, 4, why="the scale was not applied")
    with pytest.raises(CheckFailed, match=r"^no rescale: expected 1\.0, got 2\.0$"):
        expect_real(2.0, 1.0, "single", why="no rescale")


@pytest.mark.parametrize("source", ["expect_count(f(), 2, why=reason)\n", "expect_count(f(), 2, why=3)\n",
                                    "expect_count(f(), 2, because='x')\n", "expect_count(f(), 2, 'x', 'y')\n"])
def test_why_must_be_a_string_literal(source: str) -> None:
    with pytest.raises(InvalidTestCell):
        parse_test_cell(source)
