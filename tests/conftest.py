"""Test settings shared by every test file."""

import os
import time
from pathlib import Path

from hypothesis import settings

from chromium import browser_tests_run

# No per-example deadline: CI's two cores also run notebooks and nbgrader, so timings vary by 10x.
# Derandomized: the same examples every run, so a red CI is reproducible and main stays green.
settings.register_profile("course", deadline=None, derandomize=True, print_blob=True)
settings.load_profile("course")


_STARTED = time.time()

def pytest_terminal_summary(terminalreporter, exitstatus, config):  # type: ignore[no-untyped-def]
    """List the screenshots the browser tests took in this run, one line a file, so that CI's log shows them."""
    folder = Path(os.environ.get("BROWSER_SCREENSHOTS", Path(__file__).resolve().parents[1] / "browser-screenshots"))
    shots = sorted(p for p in folder.glob("*.png") if p.stat().st_mtime >= _STARTED) if folder.is_dir() else []
    asked = any(Path(a).name == "solutions" for a in config.args)  # solutions/ collected, then left out by conftest.py
    if asked and browser_tests_run() and os.environ.get("LECTURELIB_NBVAL") != "1":
        terminalreporter.write_line("solutions/: run at full size by the browser tests (Chromium found), not again "
                                    "by nbval (LECTURELIB_NBVAL=1 runs both)")
    if shots:
        terminalreporter.section("browser screenshots")
        for path in shots:
            terminalreporter.write_line(f"screenshot: {path}")


# The longest test files first (CI runs `pytest -n 2 --dist loadfile --no-loadscope-reorder`): each worker starts
# on one of the two longest and the short files fill in around them, so neither waits for the other at the end.
FIRST = ("tests/test_course_roundtrip.py", "tests/test_browser.py", "tests/test_jupyterhub.py",
         "tests/test_course_build.py", "tests/test_course_autograde.py", "tests/test_course_dispatch.py",
         "tests/test_grading_attacks.py", "tests/test_types.py", "tests/test_cli.py", "solutions/")


def pytest_collection_modifyitems(session, config, items):  # type: ignore[no-untyped-def]
    def rank(item) -> int:  # type: ignore[no-untyped-def]
        path = item.nodeid.split("::")[0]
        return next((i for i, prefix in enumerate(FIRST) if path.startswith(prefix)), len(FIRST))

    items.sort(key=rank)  # stable: the order within a file, and of the other files, stays as collected
