"""The Jupyter setups `make lab` (student) and `make instructor` start: what each shows, and how Validate grades."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
from nbconvert import HTMLExporter

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
STUDENT = {"JUPYTER_CONFIG_DIR": str(ROOT / "jupyter" / "student")}
NBGRADER_PLUGINS = ("formgrader", "create-assignment", "course-list", "assignment-list", "menu", "validate-assignment")


def _run(args: list[str], env: dict[str, str], cwd: Path = ROOT) -> str:
    """Output (stdout and stderr) of a Jupyter command run as `make` runs it: venv first on PATH, no activation."""
    full = {**os.environ, **env, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(args, cwd=cwd, env=full, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def _server_extensions(listing: str) -> dict[str, bool]:
    """Extension -> enabled, from `jupyter server extension list`: the first config dir that names it wins."""
    state: dict[str, bool] = {}
    for line in re.sub(r"\x1b\[[0-9;]*m", "", listing).splitlines():
        words = line.split()
        if len(words) == 2 and words[1] in ("enabled", "disabled"):
            state.setdefault(words[0], words[1] == "enabled")
    return state


def test_student_lab_hides_instructor_plugins_and_keeps_validate() -> None:
    config = json.loads((ROOT / "jupyter/student/labconfig/page_config.json").read_text())["disabledExtensions"]
    hidden = {f"@jupyter/nbgrader:{n}" for n in NBGRADER_PLUGINS[:5]} | {"@jupyterlab/apputils-extension:announcements"}
    assert hidden == {k for k, v in config.items() if v}  # no news pop-up either: it asks the internet
    listing = _run([str(BIN / "jupyter"), "labextension", "list"], STUDENT)
    assert "@jupyter/nbgrader" in listing and "enabled" in listing
    disabled = {line.split(":")[-1].strip() for line in listing.splitlines() if "@jupyter/nbgrader:" in line}
    assert disabled == set(NBGRADER_PLUGINS[:5])  # listed under "Disabled extensions"; validate is not among them


def test_instructor_lab_has_no_news_popup() -> None:
    """`make instructor` adds jupyter/instructor to the Jupyter configuration: JupyterLab's news pop-up is off."""
    assert "JUPYTER_CONFIG_PATH=$(CURDIR)/jupyter/instructor" in (ROOT / "Makefile").read_text()
    listing = _run([str(BIN / "jupyter"), "labextension", "list"],
                   {"JUPYTER_CONFIG_PATH": str(ROOT / "jupyter" / "instructor"), "JUPYTER_PATH": str(ROOT / "jupyter" / "share")})
    disabled = listing.split("Disabled extensions:", 1)[1].split()
    assert "@jupyterlab/apputils-extension:announcements" in disabled
    assert not [name for name in disabled if name.startswith("@jupyter/nbgrader")]  # every instructor tool stays


def test_student_server_runs_validate_only() -> None:
    state = _server_extensions(_run([str(BIN / "jupyter"), "server", "extension", "list"], STUDENT))
    nbgrader = {k.rsplit(".", 1)[1]: v for k, v in state.items() if k.startswith("nbgrader.server_extensions.")}
    # course_list stays on for its /nbgrader_version route, which the Validate button calls first (its Lab
    # panel is hidden); formgrader and the exchange's assignment list are off
    assert nbgrader == {"formgrader": False, "assignment_list": False, "course_list": True, "validate_assignment": True}


def test_instructor_server_runs_formgrader_and_local_mathjax() -> None:
    state = _server_extensions(_run([str(BIN / "jupyter"), "server", "extension", "list"], {}))
    assert state["nbgrader.server_extensions.formgrader"] and state["jupyter_server_mathjax"]


def test_validate_in_the_student_lab_uses_the_autograders_cell_timeout() -> None:
    """Validate loads its config as nbgrader's ValidateAssignmentHandler does, from the server's folder: the student's
    own nbgrader_config.py (self-contained: the student bundle has no course configuration) sets the autograder's
    cell time limit, the course's nbgrader_config.py's."""
    code = (
        "import os; from jupyter_core.paths import jupyter_config_path; from nbgrader.apps import NbGrader\n"
        "paths = jupyter_config_path(); paths.insert(0, os.getcwd())\n"
        "app = NbGrader(); app.config_file_paths.append(paths); app.load_config_file()\n"
        "print(app.config.Execute.timeout)"
    )
    course = re.search(r"^c\.Execute\.timeout = (\d+)$", (ROOT / "nbgrader_config.py").read_text(), re.M)
    assert course is not None
    for cwd in (ROOT, ROOT / "notebooks"):  # `make lab`; a folder with no course config, as the bundle's root
        out = _run([sys.executable, "-c", code], STUDENT, cwd=cwd)
        assert out.strip().splitlines()[-1] == course.group(1), (cwd, out)


def test_instructor_pages_load_mathjax_from_the_server() -> None:
    code = (
        "import nbformat; from nbconvert import HTMLExporter\n"
        "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell('$$x^2$$')])\n"
        "print(HTMLExporter(template_name='classic').from_notebook_node(nb)[0])"
    )
    html = _run([sys.executable, "-c", code], {"JUPYTER_PATH": str(ROOT / "jupyter" / "share")})
    assert "/static/jupyter_server_mathjax/MathJax.js" in html
    default = HTMLExporter(template_name="classic").from_notebook_node(
        nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("$$x$$")]))[0]
    assert "jupyter_server_mathjax" not in default  # only where JUPYTER_PATH points to the course's template
