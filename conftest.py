"""Where the solutions run: the root of the tests (testpaths: tests/ and solutions/, whose notebooks nbval runs)."""

import os

from tests.chromium import browser_tests_run

# Every solution runs once at full size in CI: in JupyterLab, as a student runs it (test_browser: no cell may raise,
# every figure renders, a widget moves one), where Chromium and Playwright are here; else under nbval (--nbval-lax:
# no cell may raise). Running both would execute each solution once more at full size for no check nbval adds.
# A solution named on the command line (`pytest solutions/02_matmul_flops.ipynb`) always runs under nbval.
BROWSER_RUNS_SOLUTIONS = browser_tests_run() and os.environ.get("LECTURELIB_NBVAL") != "1"


def pytest_ignore_collect(collection_path, config):  # type: ignore[no-untyped-def]
    if BROWSER_RUNS_SOLUTIONS and collection_path.suffix == ".ipynb" and collection_path.parent.name == "solutions":
        return True
    return None
