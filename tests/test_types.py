"""lecturelib type-checks: the public API's annotations are kept true by mypy."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_types_lecturelib_passes_mypy() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", "lecturelib"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
