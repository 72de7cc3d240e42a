"""Audit submissions for code that tampers with grading: a report for the instructor, not a penalty."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass
from html import unescape
from pathlib import Path

from lecturelib.course.layout import Course, SOLUTION_MARKS, nbgrader_meta, read_notebook
from lecturelib.course.isolation.sanitize import IMAGE_TYPES, active_svg, risky_markup

# Calls that end the kernel, reach outside the submission's folder, or run code the audit cannot read.
EXITS = {"os._exit", "sys.exit", "exit", "quit", "os.kill", "os.abort", "os.killpg", "signal.raise_signal"}
FILES = {
    "os.remove", "os.unlink", "os.rmdir", "os.rename", "os.replace", "os.chdir", "os.chmod", "os.system",
    "os.makedirs", "os.popen", "shutil.rmtree", "shutil.move", "shutil.copy", "shutil.copyfile",
    "shutil.copytree", "subprocess.run", "subprocess.Popen", "subprocess.call", "subprocess.check_output",
}
DYNAMIC = {"eval", "exec", "compile", "__import__", "importlib.import_module", "importlib.reload"}
PATCHABLE = {"builtins", "__builtins__", "lecturelib", "torch", "numpy", "math", "operator", "sys", "IPython"}
MODULES = {"sqlite3", "ctypes", "subprocess", "socket", "multiprocessing", "signal"}  # no exercise needs them
WORDS = ("/proc", "gradebook", "nbgrader_config", ".ipynb", "autograded", "submitted/")  # places of grading
# Script for a browser: what Formgrader or a feedback page would run if it were shown as is (it is not: see sanitize)
SCRIPT = re.compile(r"<\s*(script|iframe|object|embed|svg|math)\b|\bon[a-z]+\s*=|javascript\s*:|widget-(state|view)\+json",
                    re.IGNORECASE)
BROWSER = {"Javascript", "IPython.display.Javascript", "display_javascript", "IPython.display.display_javascript",
           "publish_display_data", "IPython.display.publish_display_data", "IPython.core.display.Javascript"}
PASSIVE_OUTPUT = {"text/plain", "text/html", "text/markdown", "text/latex", "image/svg+xml", "application/json", *IMAGE_TYPES}
DUNDERS = {"__eq__", "__ne__", "__index__", "__float__", "__int__", "__bool__", "__hash__", "__instancecheck__"}


@dataclass(frozen=True)
class Finding:
    """One suspicious line in one submitted cell."""

    student: str
    assignment: str
    notebook: str
    cell: str  # grade_id, or "cell N" for a cell the student added
    line: int
    what: str


def _dotted(node: ast.AST) -> str:
    """'a.b.c' for a Name/Attribute chain, '' otherwise."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return ""


def _outside_path(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and (
        node.value.startswith(("/", "~")) or ".." in node.value.replace("\\", "/").split("/")
    )


RENAMES = {"os.replace", "os.rename"}
PATH_CALLS = {"str", "os.fspath", "os.path.join", "os.path.dirname", "os.path.basename", "os.path.abspath",
              "pathlib.Path", "Path", "pathlib.PurePath"}  # make a path from a path, touching nothing
PATH_METHODS = {"with_suffix", "with_name", "with_stem", "joinpath", "as_posix"}


def _merge(parts: list[set[str] | None]) -> set[str] | None:
    """The parameters of every part of a path, or None if one part comes from anywhere else."""
    return None if any(p is None for p in parts) else {name for p in parts if p is not None for name in p}


def _atomic_writes(tree: ast.AST, resolve: Callable[[str], str]) -> set[int]:
    """The os.replace/os.rename calls (by id) that finish an atomic write of a file the caller named, and the open()
    calls that write it or its temporary twin (a path made from a parameter of the function): inside a
    function, the target is one of its parameters and the file moved onto it a path made from that same
    parameter (`tmp = path + ".tmp"; torch.save(state, tmp); os.replace(tmp, path)`, as a checkpoint is saved).
    A rename whose paths come from anywhere else (a literal, the working folder, a listing) is no such write."""
    found: set[int] = set()
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        a = fn.args
        params = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        body = [n for stmt in fn.body for n in ast.walk(stmt)]
        assigned: dict[str, list[ast.expr]] = {}  # every value a name of the function is given
        simple = {id(n.target if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) else n.targets[0]): n.value
                  for n in body if isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr))
                  or isinstance(n, ast.Assign) and len(n.targets) == 1}
        for n in body:
            if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
                assigned.setdefault(n.id, []).append(simple.get(id(n)) or ast.Constant(None))  # else: unknown
            elif isinstance(n, ast.arg) and n.arg not in params:  # a nested function's or lambda's
                assigned.setdefault(n.arg, []).append(ast.Constant(None))

        def roots(node: ast.expr | None, seen: frozenset[str] = frozenset()) -> set[str] | None:
            """The parameters a path is made from, or None when anything else goes into it."""
            if node is None:
                return None
            if isinstance(node, ast.Constant):
                ok = isinstance(node.value, str) and not _outside_path(node) and not any(w in node.value for w in WORDS)
                return set() if ok else None
            if isinstance(node, ast.Name):
                if node.id in seen:
                    return None
                values = assigned.get(node.id, [])
                if node.id in params and not values:
                    return {node.id}
                if not values or node.id in params:  # a parameter given a new value, or a name from outside
                    return None
                return _merge([roots(v, seen | {node.id}) for v in values])
            if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Div)):
                return _merge([roots(node.left, seen), roots(node.right, seen)])
            if isinstance(node, ast.JoinedStr):
                return _merge([roots(v.value if isinstance(v, ast.FormattedValue) else v, seen) for v in node.values])
            if isinstance(node, ast.Attribute) and node.attr == "parent":
                return roots(node.value, seen)
            if isinstance(node, ast.Call) and not node.keywords:
                func = node.func
                if isinstance(func, ast.Attribute) and func.attr in PATH_METHODS:
                    return _merge([roots(x, seen) for x in [func.value, *node.args]])
                if resolve(_dotted(func)) in PATH_CALLS:
                    return _merge([roots(x, seen) for x in node.args])
            return None

        for n in body:
            # open() of a path made from the caller's parameter: writing the file the caller named (or its
            # temporary twin, before the rename)
            if isinstance(n, ast.Call) and resolve(_dotted(n.func)) in ("open", "io.open") and n.args and \
                    roots(n.args[0]):
                found.add(id(n))
            if isinstance(n, ast.Call) and resolve(_dotted(n.func)) in RENAMES and len(n.args) == 2 and not n.keywords:
                target = n.args[1]
                source = roots(n.args[0])
                if isinstance(target, ast.Name) and target.id in params and not assigned.get(target.id) and \
                        source is not None and source == {target.id}:
                    found.add(id(n))
    return found


def audit_source(source: str, asked: set[str]) -> list[tuple[int, str]]:
    """(line, finding) for one cell's code; `asked` are the functions the exercises ask for."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []  # IPython magics or a syntax error: nothing the kernel could run as written
    aliases: dict[str, str] = {}  # local name -> what it names ("torch", "lecturelib.flops.matmul_flops")
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
                if a.name.split(".")[0] in MODULES:
                    found.append((node.lineno, f"imports {a.name}"))
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] in MODULES:
                found.append((node.lineno, f"imports {node.module}"))
            for a in node.names:
                aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                if node.module.split(".")[0] == "lecturelib" and a.name in asked:
                    found.append((node.lineno, f"imports lecturelib's reference {a.name}, the function it must write"))

    def resolve(dotted: str) -> str:
        head, _, rest = dotted.partition(".")
        full = aliases.get(head, head)
        return f"{full}.{rest}" if rest else full

    atomic = _atomic_writes(tree, resolve)
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for t in targets:
                base = t.value if isinstance(t, (ast.Attribute, ast.Subscript)) else None
                if isinstance(base, ast.Call) and _dotted(base.func) in ("vars", "getattr") and base.args:
                    base = base.args[0]  # vars(module)[name] = ...: the module's own namespace
                name = resolve(_dotted(base)) if base is not None else ""
                if isinstance(base, ast.Call) and _dotted(base.func) == "get_ipython":
                    name = "IPython"
                if name.split(".")[0] in PATCHABLE or name in aliases.values() or name == "sys.modules":
                    found.append((line, f"patches {name}"))
        elif isinstance(node, ast.Call):
            name = resolve(_dotted(node.func))
            if name in ("setattr", "delattr") and node.args:
                found.append((line, f"{name}() on {resolve(_dotted(node.args[0])) or 'an object'}"))
            elif name in EXITS or name.endswith(("kernel.do_shutdown", "ask_exit")):
                found.append((line, f"ends the kernel ({name})"))
            elif name in FILES and id(node) not in atomic:
                found.append((line, f"touches files or processes ({name})"))
            elif name in DYNAMIC:
                found.append((line, f"runs code the audit cannot read ({name})"))
            elif name in ("open", "pathlib.Path", "Path", "io.open") and any(_outside_path(a) for a in node.args):
                found.append((line, "opens a path outside its folder"))
            elif name in ("open", "io.open") and id(node) not in atomic and any(
                isinstance(a, ast.Constant) and isinstance(a.value, str) and set(a.value) & set("wax+")
                for a in node.args[1:2] + [k.value for k in node.keywords if k.arg == "mode"]
            ):
                found.append((line, "writes a file"))
            elif name in ("os.readlink", "os.getppid"):
                found.append((line, f"looks at other processes ({name})"))
            elif name in BROWSER or name.split(".")[-1] in ("Javascript", "display_javascript"):
                found.append((line, f"sends script to the browser ({name})"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in DUNDERS:
            found.append((line, f"defines {node.name}"))
        elif isinstance(node, ast.Attribute):
            full = resolve(_dotted(node))
            if full.split(".")[0] == "lecturelib" and full.split(".")[-1] in asked:
                found.append((line, f"calls lecturelib's reference {full}, the function it must write"))
        elif isinstance(node, ast.Name) and node.id in ("__builtins__", "builtins") and isinstance(node.ctx, ast.Load):
            found.append((line, "reaches into builtins"))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            words = [w for w in WORDS if w in node.value]
            if words:
                found.append((line, f"names a place of grading ({words[0]})"))
            script = SCRIPT.search(node.value)
            if script:
                found.append((line, f"holds markup that runs script in a browser ({script.group(0)[:30]})"))
    return sorted(set(found))


def asked_functions(source_nb_path: Path) -> set[str]:
    """Names of the functions defined inside the master's solution regions."""
    names: set[str] = set()
    for cell in read_notebook(source_nb_path).cells:
        if cell.cell_type == "code" and nbgrader_meta(cell).get("solution") and SOLUTION_MARKS[0] in cell.source:
            try:
                tree = ast.parse(cell.source)
            except SyntaxError:
                continue
            names |= {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    return names


def audit(course: Course, assignments: list[str]) -> list[Finding]:
    """Findings in every submitted cell that a student wrote or could edit."""
    findings = []
    for assignment in assignments:
        for master in course.source_notebooks(assignment):
            asked = asked_functions(master)
            cells = read_notebook(master).cells
            locked = {nbgrader_meta(c).get("grade_id") for c in cells
                      if nbgrader_meta(c).get("locked") or nbgrader_meta(c).get("grade")}
            given = {c.source for c in cells if not nbgrader_meta(c).get("solution")}  # the course's own code
            for path in sorted(course.submitted.glob(f"*/{assignment}/{master.name}")):
                student = path.parts[-3]
                try:
                    nb = read_notebook(path)
                except Exception:  # noqa: BLE001 - `autograde` reports unreadable notebooks
                    continue
                for i, cell in enumerate(nb.cells):
                    gid = nbgrader_meta(cell).get("grade_id")
                    for what in markup_findings(cell, given):
                        findings.append(Finding(student, assignment, master.name, gid or f"cell {i}", 0, what))
                    if cell.cell_type != "code" or cell.source in given or (
                        gid in locked and not nbgrader_meta(cell).get("solution")
                    ):
                        continue  # the course's own cells, and locked and test cells (restored before grading)
                    for line, what in audit_source(cell.source, asked):
                        findings.append(Finding(student, assignment, master.name, gid or f"cell {i}", line, what))
    return findings


def markup_findings(cell, given: set[str]) -> list[str]:  # noqa: ANN001 - a notebook cell
    """Markup in a student's Markdown, raw cells or saved outputs that a browser could run (grading makes it inert)."""
    found = []
    if cell.cell_type in ("markdown", "raw") and cell.source not in given:
        risky = risky_markup(cell.source, is_html=cell.cell_type == "raw")
        if risky:
            found.append(f"{cell.cell_type} with markup that could run script in a browser: {', '.join(risky[:4])}")
    for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
        data = output.get("data", {})
        active = sorted(m for m in data if m not in PASSIVE_OUTPUT)
        svg = "".join(data.get("image/svg+xml", ""))
        html = "".join(data.get("text/html", "")) + svg
        # character references decoded first: `href="&#106;avascript:..."` is a javascript: link to a browser
        if active or SCRIPT.search(html) or SCRIPT.search(unescape(html)) or (svg and active_svg(svg)) or (
                html and risky_markup(html, is_html=True)):
            found.append(f"a saved output that could run script in a browser ({', '.join(active) or 'HTML'})")
    return found


def format_findings(findings: list[Finding]) -> str:
    if not findings:
        return "no findings"
    rows = [("student", "assignment", "cell", "line", "finding")] + [
        (f.student, f.assignment, f.cell, str(f.line), f.what) for f in findings
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[4] for r in rows)
