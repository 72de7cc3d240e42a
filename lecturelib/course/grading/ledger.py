"""What each submission was last graded from: logs/autograde/graded.json, written by the coordinator alone.

An entry holds a digest of everything the submission's grade depends on (`autograde.grading_key`) and of the
autograded folder its grading left. A submission whose digest and autograded folder are unchanged is not graded
again (`unchanged`) unless --force; one whose grading had problems is dropped (`forget`) and graded again next time.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from lecturelib.course.grading.guard import digest

LEDGER = "graded.json"  # in logs/autograde/: what each submission was last graded from

Pair = tuple[str, str]  # (student, assignment)


class Ledger:
    """The graded.json of one course: read when a run starts (`load`), written after each submission it verified."""

    def __init__(self, logs: Path, autograded: Path) -> None:
        self.path, self.autograded = logs / LEDGER, autograded
        self.entries: dict[str, dict[str, str]] = {}  # "STUDENT/ASSIGNMENT" -> what it was last graded from
        self._keys: dict[Pair, str] = {}  # the grading key of each submission this run grades

    def load(self) -> None:
        """Read graded.json (an unreadable one counts as empty: everything is graded again)."""
        read: dict[str, object] = {}
        if self.path.is_file():
            try:
                read = dict(json.loads(self.path.read_text()))
            except (OSError, ValueError):
                pass
        self.entries = {k: v for k, v in read.items() if isinstance(v, dict)}

    def started(self, pair: Pair, grading_key: str) -> None:
        """This run grades `pair` from `grading_key`."""
        self._keys[pair] = grading_key

    def graded(self, pair: Pair) -> None:
        """`pair`'s grading finished and was verified: what it was graded from goes in when it left an autograded
        folder (else it is forgotten)."""
        if self._keys.get(pair) and (autograded := self._autograded_digest(pair)):
            self.entries["/".join(pair)] = {"key": self._keys[pair], "autograded": autograded,
                                            "graded": time.strftime("%Y-%m-%d %H:%M:%S")}
            self._write()
        else:
            self.forget(pair)

    def unchanged(self, pair: Pair, grading_key: str) -> bool:
        """Whether this submission was graded from `grading_key` and its autograded folder is as that grading left it."""
        entry = self.entries.get("/".join(pair), {})
        return entry.get("key") == grading_key and entry.get("autograded") == self._autograded_digest(pair) != ""

    def forget(self, pair: Pair) -> None:
        """Drop a submission from the ledger: the next run grades it whatever changed (e.g. its grading had problems)."""
        if self.entries.pop("/".join(pair), None) is not None:
            self._write()

    def _autograded_digest(self, pair: Pair) -> str:
        """sha256 of the files of autograded/STUDENT/ASSIGNMENT ('' when there is none)."""
        files = digest(self.autograded / pair[0] / pair[1])
        return hashlib.sha256(json.dumps(sorted(files.items())).encode()).hexdigest() if files else ""

    def _write(self) -> None:
        tmp = self.path.with_name(f"{LEDGER}.tmp")
        tmp.write_text(json.dumps(self.entries, indent=1, sort_keys=True) + "\n")
        tmp.replace(self.path)
