"""Who an LMS download is from: the LMS's own id of each upload, mapped onto the class roster in the gradebook.

The gradebook's student ids are the roster's (`nbgrader db student import roster.csv`, columns
`id,first_name,last_name,email,lms_user_id`): Formgrader shows their names, and `course grades` writes their
`lms_user_id` as Canvas's ID. An LMS names every upload after the student who made it, with an id of its own
that the student cannot choose:

* Canvas's *Download Submissions* (`lastnamefirstname_[LATE_]USERID_SUBMISSIONID_FILE`): USERID is the Canvas
  user id, the same in every assignment: the roster's `lms_user_id`.
* Moodle's *Download all submissions* (`Full Name_PARTICIPANT_assignsubmission_file_/FILE`): PARTICIPANT is a
  number Moodle draws for each student in each assignment separately (its `assign_user_mapping`), so no roster
  can hold it. The assignment's grading worksheet (*Grading action → Download grading worksheet*), saved as
  `downloaded/NN_topic/worksheet.csv`, gives each participant's email address (its `Identifier` column reads
  `Participant 1234`), and the roster the student with that `email`.

An id the roster does not have is refused, naming the id and how to add the student: a submission is never filed
under an id that Formgrader and the Canvas export would not know.

Submission times: neither download carries them (Canvas's `LATE_` says late, not when).
`downloaded/NN_topic/timestamps.csv` (`student,timestamp`: the roster id, and the time as the LMS shows it, e.g.
`ann,2026-12-01 18:05:00 UTC`) gives them; `collect` writes each into the submission's `timestamp.txt`, where
nbgrader reads it (Formgrader's timestamp, the late penalty, `course grades`' "late by").
"""

from __future__ import annotations

import csv
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

WORKSHEET = "worksheet.csv"  # Moodle's grading worksheet of the assignment, in downloaded/NN_topic/
TIMES = "timestamps.csv"  # the submission times, in downloaded/NN_topic/
ADD = ".venv/bin/nbgrader db student add"


@dataclass
class Roster:
    """The students of the gradebook, found by their roster id, LMS user id or email."""

    ids: set[str] = field(default_factory=set)
    by_lms_user_id: dict[str, list[str]] = field(default_factory=dict)
    by_email: dict[str, list[str]] = field(default_factory=dict)


def read_roster(gradebook: Path) -> Roster:
    """The roster nbgrader keeps in gradebook.db (empty if there is none), read without writing anything."""
    roster = Roster()
    if not gradebook.is_file() or gradebook.stat().st_size == 0:
        return roster
    db = sqlite3.connect(f"{gradebook.resolve().as_uri()}?mode=ro", uri=True, timeout=120)
    try:
        tables = {row[0] for row in db.execute("select name from sqlite_master where type = 'table'")}
        rows = db.execute("select id, email, lms_user_id from student").fetchall() if "student" in tables else []
    finally:
        db.close()
    for sid, email, lms_user_id in rows:
        roster.ids.add(sid)
        if lms_user_id and str(lms_user_id).strip():
            roster.by_lms_user_id.setdefault(str(lms_user_id).strip(), []).append(sid)
        if email and email.strip():
            roster.by_email.setdefault(email.strip().lower(), []).append(sid)
    return roster


def read_worksheet(path: Path) -> tuple[dict[str, str], str]:
    """Moodle's grading worksheet: participant number -> email address; or why it cannot be read."""
    if not path.is_file():
        return {}, ""
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        return {}, f"{path.name}: not a readable CSV ({type(e).__name__})"
    if not rows:
        return {}, f"{path.name}: empty"
    header = [h.strip().lower() for h in rows[0]]
    email = next((i for i, h in enumerate(header) if "email" in h or "e-mail" in h), None)
    if "identifier" not in header or email is None:
        return {}, (f"{path.name}: not Moodle's grading worksheet (it needs the columns Identifier and Email address; "
                    "show Email address among Moodle's identity fields)")
    ident = header.index("identifier")
    participants = {}
    for row in rows[1:]:
        number = re.search(r"(\d+)\s*$", row[ident]) if len(row) > max(ident, email) else None
        if number:
            participants[number.group(1)] = row[email].strip()
    return participants, ""


def read_times(path: Path) -> tuple[dict[str, str], list[str]]:
    """timestamps.csv: roster id -> submission time (as nbgrader reads it); and the lines it could not read."""
    from nbgrader.utils import parse_utc

    if not path.is_file():
        return {}, []
    times: dict[str, str] = {}
    problems = []
    with path.open(newline="", encoding="utf-8-sig") as f:
        for number, row in enumerate(csv.reader(f), 1):
            if not row or (number == 1 and [c.strip().lower() for c in row[:2]] == ["student", "timestamp"]):
                continue
            student, when = (row + ["", ""])[:2]
            try:
                if parse_utc(when.strip()) is None or len(row) != 2:
                    raise ValueError(when)
            except (ValueError, OverflowError):
                problems.append(f"{path.name} line {number}: not `student,timestamp` with a time nbgrader reads "
                                "(e.g. `ann,2026-12-01 18:05:00 UTC`): that student gets no submission time")
                continue
            times[student.strip()] = when.strip()
    return times, problems


@dataclass
class Identify:
    """The roster id of the student an LMS named an upload after (`lms`: canvas or moodle), or why there is none."""

    lms: str
    roster: Roster
    assignment: str
    participants: dict[str, str] = field(default_factory=dict)  # Moodle: participant number -> email
    worksheet_problem: str = ""

    def __call__(self, key: str, who: str) -> tuple[str, str]:
        """(student id, '') or ('', why not) for the LMS's id `key` of the student it calls `who`."""
        if self.lms == "canvas":
            return self._one(self.roster.by_lms_user_id.get(key, []), f"Canvas user {key} ({who})",
                             f"--lms-user-id={key}", "lms_user_id")
        where = f"downloaded/{self.assignment}/{WORKSHEET}"
        if self.worksheet_problem or not self.participants:
            return "", (f"Moodle's participant {key} ({who}) is a number of this assignment only: save the assignment's "
                        f"grading worksheet (Grading action → Download grading worksheet) as {where}, then collect "
                        "again" + (f" ({self.worksheet_problem})" if self.worksheet_problem else ""))
        if key not in self.participants:
            return "", f"Moodle's participant {key} ({who}) is not in {where} (the worksheet of another assignment?)"
        email = self.participants[key]
        if not email:
            return "", f"{where} gives no email address for participant {key} ({who})"
        return self._one(self.roster.by_email.get(email.lower(), []), f"{email} (Moodle's participant {key}, {who})",
                         f"--email={email}", "email")

    @staticmethod
    def _one(found: list[str], what: str, option: str, column: str) -> tuple[str, str]:
        if len(found) == 1:
            return found[0], ""
        if found:
            return "", f"the roster gives {what} to {len(found)} students ({', '.join(sorted(found))}): fix its {column}"
        return "", (f"{what} is not in the roster: add the student ({ADD} ID --first-name=... --last-name=... {option}, "
                    f"or import the roster again with that {column}), then collect again")


def identify(lms: str, roster: Roster, downloaded: Path) -> Identify:
    """How the uploads of downloaded/NN_topic/ name their students, for `lms` (canvas or moodle)."""
    participants, problem = read_worksheet(downloaded / WORKSHEET) if lms == "moodle" else ({}, "")
    return Identify(lms, roster, downloaded.name, participants, problem)


def not_in_roster(students: Iterable[str], roster: Roster) -> list[str]:
    """Notes for students named by hand (STUDENT--FILE) whom the roster does not have."""
    if not roster.ids:
        return []
    return [f"{s}: not in the roster: Formgrader will show no name and `course grades` no Canvas ID ({ADD} {s} "
            "--first-name=... --last-name=... --lms-user-id=..., or import the roster)" for s in sorted(students)
            if s not in roster.ids]
