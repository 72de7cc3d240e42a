"""How a notebook is being run: by a student (full-size measurements) or by the course's graders and checks (quick)."""

from __future__ import annotations

import os

QUICK_ENV = "LECTURELIB_QUICK"  # set to 1 by `course autograde`, `course check` and the browser tests


def quick() -> bool:
    """True while the autograder or a course check runs the notebook: measurements shrink; no grade depends on them."""
    return os.environ.get(QUICK_ENV, "") == "1"
