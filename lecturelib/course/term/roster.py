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

The roster comes in with `python -m lecturelib.course roster roster.csv` (`import_roster`): a CSV as any spreadsheet
saves it (a UTF-8 byte-order mark, CRLF, `;` between columns), every row checked before anything is written. Ids and
LMS ids are plain (letters, digits and . _ @ + -); names and emails are text, never markup: nbgrader's manual grading
page prints names into its HTML as they are. Whatever else writes students (plain `nbgrader db student import|add`,
Formgrader's Manage Students), `guard_gradebook` (which nbgrader_config.py installs in every nbgrader process) keeps
the same rules, and `EscapeNames` escapes the names that page shows, whatever the gradebook holds.

Submission times: neither download carries them (Canvas's `LATE_` says late, not when).
`downloaded/NN_topic/timestamps.csv` (`student,timestamp`: the roster id, and the time as the LMS shows it, e.g.
`ann,2026-12-01 18:05:00 UTC`) gives them; `collect` writes each into the submission's `timestamp.txt`, where
nbgrader reads it (Formgrader's timestamp, the late penalty, `course grades`' "late by").
"""

from __future__ import annotations

import csv
import html
import io
import re
import sqlite3
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from markupsafe import Markup
from nbconvert.preprocessors import Preprocessor
from nbformat.notebooknode import NotebookNode
from traitlets import Bool

WORKSHEET = "worksheet.csv"  # Moodle's grading worksheet of the assignment, in downloaded/NN_topic/
TIMES = "timestamps.csv"  # the submission times, in downloaded/NN_topic/
ADD = ".venv/bin/nbgrader db student add"
IMPORT = ".venv/bin/python -m lecturelib.course roster roster.csv"
COLUMNS = ("id", "first_name", "last_name", "email", "lms_user_id")  # nbgrader's Student, as its import reads them
STUDENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")  # no markup, no path, no "--": safe in a page and a path
LMS_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,127}")  # Canvas's user id (digits) or an SIS id: never a formula
# What a name or email may not hold, and its inert look-alike: markup (nbgrader's manual grading page prints names
# into its HTML as they are), quotes (an attribute or a script string would end there), backslashes.
MARKUP = {"<": "\uff1c", ">": "\uff1e", "&": "\uff06", '"': "\uff02", "`": "\uff40", "\\": "\uff3c"}
SAVE_AS = "save it from the spreadsheet as CSV UTF-8 (Excel: File > Save As > CSV UTF-8 (Comma delimited))"


def valid_student(name: str) -> bool:
    """Whether `name` is a plain student id: safe as a folder name, in a page, in a script string, in a URL."""
    return STUDENT_ID.fullmatch(name) is not None and "--" not in name


def text_problem(value: str) -> str:
    """Why a name or email cannot be shown as it is ('' when it can): markup, quotes, control characters."""
    bad = sorted({c for c in value if c in MARKUP or not (c.isprintable() or c.isspace())})
    return f"holds {', '.join(repr(c) for c in bad)} (names are text, never markup)" if bad else ""


def plain_text(value: str) -> str:
    """`value` as inert text: whitespace folded, markup characters replaced by their full-width look-alikes, other
    control characters dropped."""
    folded = " ".join(value.split())
    return "".join(MARKUP.get(c, c) for c in folded if c.isprintable())


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
                    f"or import the roster again with that {column}: {IMPORT}), then collect again")


def identify(lms: str, roster: Roster, downloaded: Path) -> Identify:
    """How the uploads of downloaded/NN_topic/ name their students, for `lms` (canvas or moodle)."""
    participants, problem = read_worksheet(downloaded / WORKSHEET) if lms == "moodle" else ({}, "")
    return Identify(lms, roster, downloaded.name, participants, problem)


def not_in_roster(students: Iterable[str], roster: Roster) -> list[str]:
    """Notes for students named by hand (STUDENT--FILE) whom the roster does not have."""
    if not roster.ids:
        return []
    return [f"{s}: not in the roster: Formgrader will show no name and `course grades` no Canvas ID ({ADD} {s} "
            f"--first-name=... --last-name=... --lms-user-id=..., or import the roster: {IMPORT})" for s in sorted(students)
            if s not in roster.ids]


def same_id(key: str, roster: Roster) -> list[str]:
    """The roster's ids that are `key` but for case (a student who typed `Bchen` for `bchen`)."""
    return sorted(i for i in roster.ids if i.lower() == key.lower())


# ---------------------------------------------------------------------------------------------------------
# The roster CSV: python -m lecturelib.course roster roster.csv


@dataclass(frozen=True)
class Entry:
    """One student of a roster CSV, checked: `line` is where it stands in the file."""

    line: int
    id: str
    first_name: str | None = None
    last_name: str | None = None
    email: str | None = None
    lms_user_id: str | None = None


def read_roster_csv(path: Path) -> tuple[list[Entry], list[str]]:
    """The students of a roster CSV (as a spreadsheet saves it: a byte-order mark, CRLF line ends, `;` between
    columns, headers in any case); and one line per problem, which refuses the file."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as e:
        return [], [f"{path}: cannot be read ({e.strerror})"]
    except UnicodeDecodeError:
        return [], [f"{path.name}: not UTF-8 text: {SAVE_AS}"]
    header_line = text.split("\n", 1)[0]
    delimiter = ";" if header_line.count(";") > header_line.count(",") else ","  # Excel's CSV where "," is decimal
    try:
        rows = [r for r in csv.reader(io.StringIO(text, newline=""), delimiter=delimiter) if any(c.strip() for c in r)]
    except csv.Error as e:
        return [], [f"{path.name}: not a readable CSV ({e}): {SAVE_AS}"]
    if not rows:
        return [], [f"{path.name}: empty: a header `{','.join(COLUMNS)}` and a row a student"]
    header = [h.strip().lower().replace(" ", "_") for h in rows[0]]
    unknown = [h for h in header if h not in COLUMNS]
    if unknown or "id" not in header or len(set(header)) != len(header):
        return [], [f"{path.name}: its header is {','.join(rows[0])!r}; a roster's columns are {','.join(COLUMNS)} "
                    "(id required, each once)" + (f" ({unknown[0]!r} is none of them)" if unknown else "")]
    entries, problems = [], []
    seen: dict[str, dict[str, int]] = {c: {} for c in ("id", "email", "lms_user_id")}
    for number, row in enumerate(rows[1:], 2):
        if len(row) > len(header):
            problems.append(f"{path.name} line {number}: {len(row)} cells for {len(header)} columns (a comma in a name? "
                            "quote the cell)")
            continue
        cells = {h: " ".join(v.split()) for h, v in zip(header, row)}
        why = _entry_problem(cells)
        for column, key in (("id", cells.get("id", "").lower()), ("email", cells.get("email", "").lower()),
                            ("lms_user_id", cells.get("lms_user_id", ""))):
            if key and key in seen[column]:
                why = why or (f"{column} {cells[column]!r} is also on line {seen[column][key]}"
                              + (" (ids match without case)" if column == "id" else ""))
            seen[column].setdefault(key, number)
        if why:
            problems.append(f"{path.name} line {number}: {why}")
        else:
            entries.append(Entry(number, cells["id"], *(cells.get(c) or None for c in COLUMNS[1:])))
    return entries, problems


def _entry_problem(cells: dict[str, str]) -> str:
    """Why one roster row cannot be imported ('' when it can)."""
    sid = cells.get("id", "")
    if not valid_student(sid):
        return (f"id {sid!r} is not a student id: letters, digits and . _ @ + - (no space, no `--`), starting with a "
                "letter or digit" if sid else "no id")
    for column in ("first_name", "last_name", "email"):
        why = text_problem(cells.get(column, ""))
        if why:
            return f"{column} {cells[column]!r} {why}"
    email = cells.get("email", "")
    if email and (" " in email or email.count("@") != 1):
        return f"email {email!r} is not one address"
    lms = cells.get("lms_user_id", "")
    if lms and not LMS_ID.fullmatch(lms):
        return f"lms_user_id {lms!r} is not an id (Canvas's user id is a number)"
    return ""


def import_roster(gradebook: Path, path: Path) -> tuple[list[str], list[str]]:
    """Import a roster CSV into the gradebook (students added or updated, none removed): (what was done, problems).
    Nothing is written unless every row is sound."""
    from nbgrader.api import Gradebook

    from lecturelib.course.layout import new_gradebook

    entries, problems = read_roster_csv(path)
    held = read_roster(gradebook)
    known, listed = held.ids, {e.id for e in entries}
    for e in entries:
        other = [i for i in same_id(e.id, held) if i != e.id]
        if other and e.id not in known:
            problems.append(f"{path.name} line {e.line}: id {e.id!r} differs only in case from {other[0]!r}, already in "
                            f"the gradebook (ids match without case): write {other[0]!r}")
        for column, value, index in (("lms_user_id", e.lms_user_id, held.by_lms_user_id),
                                     ("email", (e.email or "").lower(), held.by_email)):
            holders = [i for i in index.get(value or "", []) if i not in listed]
            if value and holders:  # collect would no longer know whose upload it is
                problems.append(f"{path.name} line {e.line}: {column} {value!r} is {holders[0]}'s in the gradebook")
    if problems:
        return [], problems + [f"nothing imported: correct {path.name}, then import it again"]
    guard_gradebook()
    new_gradebook(gradebook)
    with Gradebook(f"sqlite:///{gradebook}?timeout=120") as gb:
        for e in entries:
            gb.update_or_create_student(e.id, first_name=e.first_name, last_name=e.last_name, email=e.email,
                                        lms_user_id=e.lms_user_id)
    new = sum(e.id not in known for e in entries)
    return [f"imported {len(entries)} student{'s' if len(entries) != 1 else ''} from {path.name} into "
            f"{gradebook.name} ({new} new, {len(entries) - new} updated)"], []


# ---------------------------------------------------------------------------------------------------------
# Every other way a student reaches the gradebook, and the page that prints names


def guard_gradebook() -> None:
    """In this process, make every write of a student into a gradebook keep the roster's rules: an id or LMS id
    that is not plain is refused (ValueError), a name or email holding markup is stored as inert text, and said so.
    nbgrader_config.py calls it, so it holds in every nbgrader command and in Formgrader (Manage Students)."""
    from nbgrader.api import Student
    from sqlalchemy import event

    for when in ("before_insert", "before_update"):
        if not event.contains(Student, when, _guard_student):
            event.listen(Student, when, _guard_student)


def _guard_student(mapper: Any, connection: Any, student: Any) -> None:  # noqa: ARG001 - SQLAlchemy's signature
    if not valid_student(str(student.id)):
        raise ValueError(f"student id {student.id!r} refused: letters, digits and . _ @ + - only (it is shown in "
                         f"Formgrader's pages and used as a folder name); import rosters with `{IMPORT}`")
    if student.lms_user_id and not LMS_ID.fullmatch(str(student.lms_user_id)):
        raise ValueError(f"student {student.id}: lms_user_id {student.lms_user_id!r} refused: not an id (Canvas's user "
                         "id is a number)")
    for column in ("first_name", "last_name", "email"):
        value = getattr(student, column)
        if value and text_problem(value):
            setattr(student, column, plain_text(value))
            print(f"student {student.id}: {column} {value!r} {text_problem(value)}: stored as "
                  f"{getattr(student, column)!r}", file=sys.stderr)


class EscapeNames(Preprocessor):
    """Formgrader's manual grading page (its HTMLExporter, c.HTMLExporter.preprocessors in nbgrader_config.py): the
    student's names as the gradebook holds them now, and the id and names as text. nbgrader's formgrade template
    prints them into the page's HTML as they are."""

    enabled = Bool(True).tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: dict[str, Any]) -> tuple[NotebookNode, dict[str, Any]]:
        # Formgrader reads the names through one gradebook session kept for the server's life: while the student's
        # objects from an earlier page are still alive (a reference cycle waits for the garbage collector), it
        # shows the names they had then, not a roster re-imported since. Read them again, from the gradebook itself.
        db_url = str(self.config.get("CourseDirectory", {}).get("db_url") or "")
        if db_url and isinstance(resources.get("student"), str):
            resources.update(_names_now(db_url, resources["student"]))
        for key in ("student", "first_name", "last_name"):
            value = resources.get(key)
            if isinstance(value, str) and not isinstance(value, Markup):
                resources[key] = Markup(html.escape(value))  # Markup: a template that escapes leaves it as it is
        return nb, resources


def _names_now(db_url: str, student: str) -> dict[str, str | None]:
    """{"first_name": ..., "last_name": ...} of `student` in the gradebook at db_url; {} if it has no such row."""
    from sqlalchemy import create_engine, text

    engine = _ENGINES.get(db_url) or _ENGINES.setdefault(db_url, create_engine(db_url))
    with engine.connect() as connection:
        row = connection.execute(text("select first_name, last_name from student where id = :id"),
                                 {"id": student}).one_or_none()
    return {} if row is None else {"first_name": row.first_name, "last_name": row.last_name}


_ENGINES: dict[str, Any] = {}  # one engine (a connection pool) per gradebook, for the server's life
