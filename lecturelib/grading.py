"""Grading helpers: what notebook test cells call, and the trusted judge that scores them.

A test cell states facts as ``expect_count(matmul_flops(2, 3, 4), 48)``: an expression and a literal, and may say
which property of the student's build a failure means: ``expect_bool(..., True, why="the running sum was not
rescaled when the maximum changed")``. ``why`` is a literal too, written in the student's terms and never quoting a
hidden input; the verdict shows it, for hidden checks as well, and so does the feedback page.

* In a notebook (Validate, nbval, a student running the cell) the ``expect_*`` functions compare right
  there, after turning the answer into a plain value (``operator.index`` for counts, ``float`` for
  reals), never by the answer's own ``__eq__``.
* When autograding, student code has run in the kernel before the tests, so nothing in the kernel can be
  trusted: it may have patched this module, ``operator``, ``math``, builtins or IPython itself. So
  ``prepare_test_cell`` rewrites each ``expect_*`` call before the cell is sent to the kernel: the
  expected literal is removed (it never reaches the kernel) and the call becomes ``_report(...)``,
  which only prints the answer as a plain JSON value. ``judge`` then reads those values back in the
  grading process and compares them with the literals there. A kernel that cheats can at most print
  wrong values, or none, and a missing or duplicated value fails its check.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import io
import json
import math
import operator
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

# Relative and absolute tolerance of each tolerance class; test cells name a class, never a number.
TOLERANCES: dict[str, tuple[float, float]] = {
    "exact": (0.0, 0.0),  # integers that happen to be floats
    "float": (1e-9, 1e-12),  # one formula evaluated in another order
    "single": (1e-6, 0.0),  # a formula evaluated in float32 (24-bit significand, ~6e-8 per operation)
    "rounded": (1e-3, 0.0),  # answers quoted to 3-4 significant figures
}

KINDS = ("count", "real", "bool", "counts")
RECORD_MARK = "[lecturelib-check] "  # starts each line that _report prints
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


class CheckFailed(AssertionError):
    """A checked fact does not hold."""


class NotPlainValue(TypeError):
    """An answer of the wrong kind (a float where a count is due, ...): safe to show, even for hidden checks."""


# ---------------------------------------------------------------------------------------------
# Turning an answer into a plain value (used in the kernel, both modes)


def as_count(value: object) -> int:
    """A count as a plain int: anything with __index__ (int, NumPy, 0-d torch integer), no bools."""
    if isinstance(value, bool):
        raise NotPlainValue("expected a count (an integer), got a bool")
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise NotPlainValue(f"expected a count (an integer), got {type(value).__name__}") from None


def as_real(value: object) -> float:
    """A real as a plain float (int, float, NumPy scalar, 0-d torch tensor)."""
    if isinstance(value, bool):
        raise NotPlainValue("expected a real number, got a bool")
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise NotPlainValue(f"expected a real number, got {type(value).__name__}") from None


def as_bool(value: object) -> bool:
    """A truth value as a plain bool (bool, NumPy bool, 0-d torch bool)."""
    if type(value) is bool:
        return value
    if str(getattr(value, "dtype", "")) in {"bool", "torch.bool"} and getattr(value, "ndim", 1) == 0:
        return bool(value)  # numpy.bool_, a 0-d torch.bool tensor
    raise NotPlainValue(f"expected True or False, got {type(value).__name__}")


def as_counts(value: object) -> list[int]:
    """A sequence of counts (a tuple, list or torch.Size of integers) as a list of plain ints."""
    if isinstance(value, (str, bytes, dict)) or not hasattr(value, "__len__"):
        raise NotPlainValue(f"expected a sequence of counts, got {type(value).__name__}")
    return [as_count(v) for v in value]  # type: ignore[attr-defined]


PLAIN: dict[str, Callable[[object], Any]] = {
    "count": as_count,
    "real": as_real,
    "bool": as_bool,
    "counts": as_counts,
}


def matches(kind: str, got: object, expected: object, tol: str = "float") -> bool:
    """Whether a plain value `got` (as read back from JSON) equals the expected literal."""
    if kind == "count":
        return type(got) is int and got == expected
    if kind == "real":
        if isinstance(got, bool) or not isinstance(got, (int, float)) or not math.isfinite(got):
            return False
        rel, abs_ = TOLERANCES[tol]
        return math.isclose(float(got), float(expected), rel_tol=rel, abs_tol=abs_)  # type: ignore[arg-type]
    if kind == "bool":
        return type(got) is bool and got is expected
    if kind == "counts":
        exp = list(expected)  # type: ignore[call-overload]
        return type(got) is list and len(got) == len(exp) and all(type(g) is int and g == e for g, e in zip(got, exp))
    raise ValueError(f"unknown check kind {kind!r}")


@contextlib.contextmanager
def _quiet() -> Any:
    """Keep warnings, stderr and prints of the checked expression out of the cell's output."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            yield


# ---------------------------------------------------------------------------------------------
# What test cells call (notebook mode): compare in the kernel and raise CheckFailed


def _expect(kind: str, value: object, expected: object, tol: str = "float", why: str = "") -> None:
    prefix = f"{why}: " if why else ""
    with _quiet():
        try:
            got = PLAIN[kind](value)
        except NotPlainValue as e:
            raise CheckFailed(prefix + str(e)) from None
    if not matches(kind, got, expected, tol):
        raise CheckFailed(f"{prefix}expected {expected!r}, got {got!r}")


def expect_count(value: object, expected: int, why: str = "") -> None:
    """Check that `value` is the integer `expected` (NumPy and torch integers accepted); `why`: what a failure means."""
    _expect("count", value, expected, why=why)


def expect_real(value: object, expected: float, tol: str = "float", why: str = "") -> None:
    """Check that `value` is the real `expected` within the tolerance class `tol` (see TOLERANCES)."""
    if tol not in TOLERANCES:
        raise ValueError(f"unknown tolerance {tol!r}; known: {', '.join(TOLERANCES)}")
    _expect("real", value, expected, tol, why)


def expect_bool(value: object, expected: bool, why: str = "") -> None:
    """Check that `value` is the truth value `expected`; `why`: what a failure means, in the student's terms."""
    _expect("bool", value, expected, why=why)


def expect_counts(value: object, expected: Sequence[int], why: str = "") -> None:
    """Check that `value` is the sequence of integers `expected` (tuple, list or torch.Size)."""
    _expect("counts", value, tuple(expected), why=why)


# ---------------------------------------------------------------------------------------------
# Autograde mode: the kernel only reports plain values; the grading process judges them


def _report(cell: str, index: int, kind: str, thunk: Callable[[], object]) -> None:
    """Print one check's answer as a plain JSON value (or the error it raised); judge() reads it."""
    record: dict[str, object] = {"cell": cell, "i": index}
    try:
        with _quiet():
            record["value"] = PLAIN[kind](thunk())
    except NotPlainValue as e:
        record["error"], record["plain"] = str(e)[:300], True
    except Exception as e:  # noqa: BLE001 - any error in student code fails this check only
        record["error"] = f"{type(e).__name__}: {e}"[:300]
    # on a line of its own, whatever the student's code printed last (its prints went to _quiet anyway)
    print("\n" + RECORD_MARK + json.dumps(record), flush=True)


@dataclass(frozen=True)
class Check:
    """One expect_* call of a test cell: what it checks and the expected literal."""

    index: int  # position among the cell's checks
    kind: str  # one of KINDS
    expected: object  # the literal, read with ast.literal_eval
    tol: str  # tolerance class (reals only)
    hidden: bool  # inside a BEGIN/END HIDDEN TESTS block
    line: str  # the source line, shown in feedback for visible checks only
    why: str = ""  # what a failure means, in the student's terms: shown for hidden checks too


class InvalidTestCell(ValueError):
    """A test cell breaks the rules that trusted grading relies on."""


def _hidden_lines(source: str) -> set[int]:
    hidden, inside = set(), False
    for no, line in enumerate(source.splitlines(), start=1):
        if BEGIN_HIDDEN in line:
            inside = True
        elif END_HIDDEN in line:
            inside = False
        elif inside:
            hidden.add(no)
    return hidden


def _check_kind(node: ast.AST) -> str | None:
    """The kind if `node` is a call of expect_* (by bare name or as an attribute), else None."""
    if isinstance(node, ast.Call):
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        if name.startswith("expect_") and name[len("expect_"):] in KINDS:
            return name[len("expect_"):]
    return None


def parse_test_cell(source: str) -> list[Check]:
    """The checks of a test cell, in order; InvalidTestCell if it breaks the rules."""
    return prepare_test_cell(source, "_")[1]


def prepare_test_cell(source: str, grade_id: str) -> tuple[str, list[Check]]:
    """Rewrite a test cell for the kernel (expected literals removed) and return its checks."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise InvalidTestCell(f"{grade_id}: test cell does not parse: {e}") from None
    hidden, lines = _hidden_lines(source), source.splitlines()
    checks: list[Check] = []
    top_level = {id(s.value) for s in tree.body if isinstance(s, ast.Expr)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _check_kind(node) and id(node) not in top_level:
            raise InvalidTestCell(f"{grade_id}: line {node.lineno}: expect_* must be a statement of its own")
    body: list[ast.stmt] = [
        ast.ImportFrom(module="lecturelib.grading", names=[ast.alias("_report", "__lecturelib_report")], level=0)
    ]
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else None
        kind = _check_kind(call) if call is not None else None
        if call is None or kind is None:
            body.append(stmt)
            continue
        named = {kw.arg: kw.value for kw in call.keywords}
        positional = ("value", "expected", "tol", "why") if kind == "real" else ("value", "expected", "why")
        if len(call.args) > len(positional) or set(named) - set(positional) or set(named) & set(positional[:len(call.args)]):
            raise InvalidTestCell(f"{grade_id}: line {stmt.lineno}: write expect_{kind}(EXPRESSION, LITERAL"
                                  f"{', TOL' if kind == 'real' else ''}, why=TEXT)")
        given = dict(zip(positional, call.args)) | named
        if "value" not in given or "expected" not in given:
            raise InvalidTestCell(f"{grade_id}: line {stmt.lineno}: write expect_{kind}(EXPRESSION, LITERAL)")
        try:
            expected = ast.literal_eval(given["expected"])
        except ValueError:
            raise InvalidTestCell(
                f"{grade_id}: line {stmt.lineno}: the expected value must be a literal (arithmetic in a comment)"
            ) from None
        try:
            tol = ast.literal_eval(given["tol"]) if "tol" in given else "float"
            why = ast.literal_eval(given["why"]) if "why" in given else ""
        except ValueError:
            raise InvalidTestCell(f"{grade_id}: line {stmt.lineno}: tol and why must be literals") from None
        if tol not in TOLERANCES:
            raise InvalidTestCell(f"{grade_id}: line {stmt.lineno}: unknown tolerance {tol!r}")
        if not isinstance(why, str):
            raise InvalidTestCell(f"{grade_id}: line {stmt.lineno}: why must be a string")
        segment = " ".join((ast.get_source_segment(source, stmt) or lines[stmt.lineno - 1]).split())
        checks.append(Check(len(checks), kind, expected, tol, stmt.lineno in hidden, segment[:160], why))
        report = ast.parse(
            f"__lecturelib_report({grade_id!r}, {len(checks) - 1}, {kind!r}, lambda: None)", mode="eval"
        ).body
        report.args[3].body = given["value"]  # type: ignore[attr-defined]
        body.append(ast.Expr(report))
    if not checks:
        raise InvalidTestCell(f"{grade_id}: a graded test cell needs at least one expect_* call")
    module = ast.fix_missing_locations(ast.Module(body=body, type_ignores=[]))
    return ast.unparse(module), checks


@dataclass(frozen=True)
class Verdict:
    """The judgement of one test cell: passed only if every check got exactly one matching value."""

    grade_id: str
    passed: bool
    messages: tuple[str, ...]  # one per failed check; never quotes a hidden check
    failed: tuple[int, ...] = ()  # indices of the failed checks


def read_records(stdout: str) -> list[dict[str, Any]]:
    """The records that _report printed, from a cell's stdout text."""
    records = []
    for line in stdout.split("\n"):
        if line.startswith(RECORD_MARK):
            try:
                rec = json.loads(line[len(RECORD_MARK):])
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                records.append(rec)
    return records


# Type names a hidden check's verdict may show: Python's own and the libraries' the course uses. A class the
# student defined is never named: its name could carry a hidden input (type(f"Arg{n}", (Exception,), {})).
KNOWN_TYPES = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)} | {
    "Tensor", "Parameter", "Size", "dtype", "device", "ndarray", "generic", "NoneType", "function", "method", "module",
    "builtin_function_or_method", "generator", "CheckFailed", "NotPlainValue",
    *(f"{kind}{bits}" for kind in ("int", "uint", "float", "complex") for bits in (8, 16, 32, 64, 128)), "bool_"}


def _known_name(name: str, otherwise: str) -> str:
    return name if name in KNOWN_TYPES else otherwise


def _shown_type(error: str) -> str:
    """A NotPlainValue message for a hidden check: the type it got named only when it is a known one."""
    head, sep, got = error.rpartition(" got ")
    return f"{head}{sep}{_known_name(got, 'a value of its own class')}" if sep else error


def judge(grade_id: str, checks: Sequence[Check], stdout: str) -> Verdict:
    """Compare the values a kernel reported for one test cell with the expected literals."""
    by_index: dict[int, list[dict[str, Any]]] = {}
    for rec in read_records(stdout):
        if rec.get("cell") == grade_id and type(rec.get("i")) is int:
            by_index.setdefault(rec["i"], []).append(rec)
    messages, failed = [], []
    for c in checks:
        name = "a hidden check" if c.hidden else f"check {c.index + 1} `{c.line}`"
        if c.why:  # the property a failure means, as the test's author wrote it for the student
            name = f"{name} ({c.why})"
        recs = by_index.get(c.index, [])
        if len(recs) != 1:
            messages.append(f"{name}: did not run" if not recs else f"{name}: reported {len(recs)} times")
        elif "error" in recs[0]:
            error = str(recs[0]["error"])
            if recs[0].get("plain") is True:  # the grader's own "expected a count, got float": nothing secret
                messages.append(f"{name}: {error}" if not c.hidden else f"{name}: {_shown_type(error)}")
            else:  # the student's exception; for a hidden check only its type (its message may quote inputs)
                messages.append(f"{name}: raised {error}" if not c.hidden else
                                f"{name} raised {_known_name(error.split(':')[0], 'an exception of its own class')}")
        elif not matches(c.kind, recs[0].get("value"), c.expected, c.tol):
            got = recs[0].get("value")
            if c.kind == "counts" and isinstance(got, list):
                got = tuple(got)  # shown as the tuple literal it is compared with
            messages.append(f"{name}: expected {c.expected!r}, got {got!r}" if not c.hidden else f"{name} failed")
        else:
            continue
        failed.append(c.index)
    return Verdict(grade_id, not messages, tuple(messages), tuple(failed))
