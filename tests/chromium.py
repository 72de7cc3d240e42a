"""Whether this machine can run the browser tests: the system Chromium and Playwright (conftest and test_browser)."""

from __future__ import annotations

import os
import shutil


def find_chromium() -> str | None:
    """The system Chromium: $CHROMIUM, else the first of chromium, chromium-browser, google-chrome on PATH."""
    found = os.environ.get("CHROMIUM") or next(
        (p for p in (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")) if p), None)
    return found if found and os.access(found, os.X_OK) else None


def browser_tests_run() -> bool:
    """True where tests/test_browser.py runs (a Chromium and Playwright), so that it also runs every solution."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return find_chromium() is not None
