"""lecturelib.course's layout: each part imports only what its `__init__` docstring says it may (read with ast)."""

from __future__ import annotations

import ast
import functools
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LIB = ROOT / "lecturelib"
COURSE = LIB / "course"
PARTS = ("release", "term", "grading", "isolation")
# run in every graded kernel's supervisor (isolation's docstring): the standard library and each other only
SUPERVISOR = ("sandbox", "cgroup", "seccomp")

Import = tuple[str, str | None, int]  # (module, the name imported from it or None, line)


def module_name(path: Path) -> str:
    """The dotted name of a file under ROOT (a package's __init__ is the package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(source: str, name: str, is_package: bool, top_level_only: bool = False) -> list[Import]:
    """Every import of a module's source, relative ones resolved; with top_level_only, those its loading runs (not in
    functions, classes or `if TYPE_CHECKING:`)."""
    # an import is a statement: only statements and the blocks of statements in them are read
    nodes: list[ast.AST] = []
    todo: list[ast.AST] = list(ast.parse(source).body)
    while todo:
        node = todo.pop()
        if top_level_only and isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            todo += node.orelse
        elif not (top_level_only and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)):
            nodes.append(node)
            blocks = ast.stmt | ast.excepthandler | ast.match_case
            todo += [c for c in ast.iter_child_nodes(node) if isinstance(c, blocks)]
    package = name if is_package else name.rpartition(".")[0]
    found: list[Import] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [(alias.name, None, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from . import x / from ..layout import y
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            found += [(base, alias.name, node.lineno) for alias in node.names]
    return found


def part_of(module: str) -> str | None:
    """Which part of the course a dotted module name is in: a part's name, "base" (lecturelib.course and its
    layout), "cli" (lecturelib.course.__main__), "lecturelib" (outside the course), or None (not lecturelib)."""
    pieces = module.split(".")
    if pieces[0] != "lecturelib":
        return None
    if pieces[:2] != ["lecturelib", "course"]:
        return "lecturelib"
    if len(pieces) == 2 or pieces[2] == "layout":
        return "base"
    return "cli" if pieces[2] == "__main__" else pieces[2]


@functools.cache
def docstring(part: str) -> str:
    """A part's `__init__` docstring."""
    doc = ast.get_docstring(ast.parse((COURSE / part / "__init__.py").read_text()))
    assert doc, f"lecturelib/course/{part}/__init__.py has no docstring"
    return doc


@functools.cache
def may_import(part: str) -> set[str]:
    """The other parts a part's docstring says it may import: those named in its "May import:" paragraph before the
    first sentence that says what it may not ("Never ...", "Nothing ...")."""
    paragraph = docstring(part).split("May import:", 1)[1].split("\n\n", 1)[0]
    allowed = re.split(r"\b(?:Never|Nothing)\b", paragraph, maxsplit=1)[0]
    return {p for p in re.findall(r"`(\w+)`", allowed) if p in PARTS and p != part}


@functools.cache
def term_names() -> set[str]:
    """The names of `term` that grading may import: the bullets of grading's docstring, each "* `name` ...: why"."""
    bullets = [line for line in docstring("grading").splitlines() if line.startswith("* `")]
    return {name for line in bullets for name in re.findall(r"`(\w+)`", line.split(":", 1)[0])}


def violations(path: Path, source: str) -> list[str]:
    """What one module of lecturelib imports against the layout's rules, one message each (empty when none)."""
    name = module_name(path)
    here = part_of(name)
    is_package = path.name == "__init__.py"
    found = imports(source, name, is_package)
    where = path.relative_to(ROOT)
    wrong: list[str] = []
    for module, imported, line in found:
        target = part_of(module)
        if module == "lecturelib.course" and imported in PARTS:  # from lecturelib.course import grading
            target, module, imported = imported, f"lecturelib.course.{imported}", None
        if target in (None, "lecturelib") and here != "lecturelib":
            continue
        said = f"{where}:{line}: {module}" + (f" import {imported}" if imported else "")
        if here == "lecturelib":  # the students' bundle has no lecturelib.course
            if target not in (None, "lecturelib"):
                wrong.append(f"{said}: lecturelib outside the course imports nothing of lecturelib.course")
        elif here == "base":
            if target != "base":
                wrong.append(f"{said}: the base imports nothing of the parts")
        elif here == "cli" or target in ("base", here):
            continue
        elif target == "cli":
            wrong.append(f"{said}: nothing imports the CLI")
        elif target not in may_import(here):
            wrong.append(f"{said}: {here} may not import {target} (its __init__'s docstring)")
        elif module != f"lecturelib.course.{target}":
            wrong.append(f"{said}: another part is imported through its package (lecturelib.course.{target})")
        elif target == "term" and here == "grading" and imported not in term_names():
            wrong.append(f"{said}: grading reaches term only through {sorted(term_names())}")
    if here == "isolation" and path.stem in SUPERVISOR:
        for module, imported, line in imports(source, name, is_package, top_level_only=True):
            top = module.split(".")[0]
            sibling = module == "lecturelib.course.isolation" and imported in SUPERVISOR
            if top not in sys.stdlib_module_names and not sibling:
                wrong.append(f"{where}:{line}: {module}: {path.stem} loads only the standard library")
    if here in PARTS and is_package:  # a part loads nothing until a name is used (kernel_stream, the supervisor)
        for module, imported, line in imports(source, name, is_package, top_level_only=True):
            if module not in ("__future__", "typing") and (module, imported) != ("lecturelib.course", "lazy_exports"):
                wrong.append(f"{where}:{line}: {module}: a part's __init__ imports nothing when it is loaded")
    return wrong


def lecturelib_modules() -> list[Path]:
    return sorted(p for p in LIB.rglob("*.py") if "__pycache__" not in p.parts)


def exports(part: str) -> dict[str, str]:
    """A part's exported names -> the module of the part that defines each (its `__init__`'s EXPORTS)."""
    tree = ast.parse((COURSE / part / "__init__.py").read_text())
    table = next(ast.literal_eval(n.value) for n in tree.body
                 if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "EXPORTS")
    return {name: module for module, names in table.items() for name in names}


def import_graph() -> dict[str, set[str]]:
    """lecturelib's modules -> the lecturelib modules each imports (anywhere in it; a part's name, the module that
    defines it, from the part's EXPORTS)."""
    modules = {module_name(p): p for p in lecturelib_modules()}
    defined_in = {f"lecturelib.course.{part}": exports(part) for part in PARTS}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for module, imported, _ in imports(path.read_text(), name, path.name == "__init__.py"):
            if f"{module}.{imported}" in modules:  # from lecturelib.course.isolation import sandbox: the module
                targets.add(f"{module}.{imported}")
            elif imported in defined_in.get(module, {}):  # from lecturelib.course.term import screen: collect
                targets.add(f"{module}.{defined_in[module][imported]}")
            elif module in modules:
                targets.add(module)
        graph[name] = targets - {name}
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str]:
    """One cycle of a graph (its nodes, the first again at the end), or [] when there is none (depth first)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_course_layout_docstrings_give_the_rules_of_the_course_init() -> None:
    # lecturelib/course/__init__.py: "isolation only the base; release the base and isolation; term the base and
    # release; grading the base, isolation, release, and of the term only the names its __init__ lists"
    assert {part: may_import(part) for part in PARTS} == {
        "isolation": set(), "release": {"isolation"}, "term": {"release"}, "grading": {"isolation", "release", "term"},
    }
    assert term_names() == {"screen", "valid_student", "read_time", "TIMESTAMP"}


def test_course_layout_every_module_keeps_the_import_rules() -> None:
    found = [v for path in lecturelib_modules() for v in violations(path, path.read_text())]
    assert found == []


def test_course_layout_lecturelib_imports_close_no_cycle() -> None:
    graph = import_graph()
    assert graph["lecturelib.course.grading.autograde"] >= {  # the graph sees through a part's lazy exports
        "lecturelib.course.term.collect", "lecturelib.course.term.roster", "lecturelib.course.isolation.sandbox"}
    assert cycle(graph) == []
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]


@pytest.mark.parametrize(("path", "source", "expected"), [
    ("course/grading/x.py", "from lecturelib.course.term import screen, TIMESTAMP", 0),
    ("course/grading/x.py", "from lecturelib.course.term import roster", 1),  # not a listed name
    ("course/grading/x.py", "from lecturelib.course.term.collect import screen", 1),  # past the package
    ("course/grading/x.py", "from lecturelib.course.release.reference import MARK", 1),
    ("course/grading/x.py", "def f():\n    import lecturelib.course.term.roster", 1),  # inside a function too
    ("course/isolation/audit.py", "from lecturelib.course.grading import Run", 1),
    ("course/isolation/audit.py", "from lecturelib.course import grading", 1),
    ("course/isolation/sandbox.py", "import numpy\nfrom lecturelib.course.isolation import cgroup", 1),
    ("course/isolation/sandbox.py", "def bench():\n    import jupyter_client", 0),  # not when it is loaded
    ("course/term/feedback.py", "from lecturelib.course.release import chunks", 0),
    ("course/term/feedback.py", "from ...course.isolation import clean_html", 1),  # relative, resolved
    ("course/release/build.py", "from lecturelib.course.term import screen", 1),
    ("course/layout.py", "from lecturelib.course.isolation import sandbox", 1),
    ("course/term/__init__.py", "from lecturelib.course.term.roster import valid_student", 1),
    ("course/__main__.py", "from lecturelib.course.grading.task import grade", 0),
    ("plots.py", "from lecturelib.course.layout import Course", 1),
])
def test_course_layout_rules_flag_what_they_forbid(path: str, source: str, expected: int) -> None:
    assert len(violations(LIB / path, source)) == expected


@pytest.mark.parametrize("part", PARTS)
def test_course_layout_exports_are_defined_and_no_module(part: str) -> None:
    tree = ast.parse((COURSE / part / "__init__.py").read_text())
    by_module: dict[str, list[str]] = {}
    for name, module in exports(part).items():
        by_module.setdefault(module, []).append(name)
    modules = {p.stem for p in (COURSE / part).glob("*.py")} - {"__init__"}
    assert set(by_module) <= modules
    for module, names in by_module.items():
        body = ast.parse((COURSE / part / f"{module}.py").read_text()).body
        defined = {n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)}
        defined |= {t.id for n in body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
        defined |= {n.target.id for n in body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
        defined |= {(a.asname or a.name) for n in body if isinstance(n, ast.ImportFrom) for a in n.names}
        assert set(names) <= defined, (module, set(names) - defined)
        assert not set(names) & modules, (module, set(names) & modules)
    typing = {(module.rpartition(".")[2], imported) for module, imported, _ in imports(
        ast.unparse(next(n for n in tree.body if isinstance(n, ast.If))), f"lecturelib.course.{part}", True)}
    assert typing == {(module, name) for name, module in exports(part).items()}
