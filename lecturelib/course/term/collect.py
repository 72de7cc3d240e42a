"""What a submission may hold, wherever it comes from: the exchange, an LMS download, or submitted/ itself.

A submission is the assignment's notebook(s), its data files (source/NN_topic's other files), nbgrader's
timestamp.txt and submission_secret.txt, and what collect noted about it (collect-notes.txt, the course's own), each
a regular file no larger than MAX_FILE_BYTES. Anything else is refused with a message that names it and says why: a
symbolic link (copied, it would be whatever it points to: a master in source/, the gradebook), a device file or a
named pipe (endless or blocking reads), a folder, a stray file. The rest of the submission is still collected and
graded.

* `screen` runs before `autograde` reads submitted/: refused entries are moved to logs/autograde/refused/, a
  student folder or assignment folder that is itself a link, or whose name is no valid student id, is not graded.
* `SafeExchangeCollect` is `nbgrader collect` (and Formgrader's Collect button) for this course: files are
  copied from the exchange through descriptors opened without following links, and a folder in the exchange
  owned by another student's account is refused. The student's own process writes timestamp.txt (and names the
  folder with a time), so neither decides lateness alone: the exchange's change time of the submission's files
  (st_ctime, which no student can set back) does when the claim is earlier (`settle_time`), and a claim that is
  no time is replaced by it; collect-notes.txt says so, and `autograde` and `grades` show it.
* A notebook whose graded cells are another assignment's (`Releases.owner`) is refused by both collects, naming
  that assignment: graded as this one it would score 0 and "restore" every cell.
* `collect_downloads` is `python -m lecturelib.course collect NN_topic [--lms course|canvas|moodle]`, in place
  of `nbgrader zip_collect` (which the course's configuration refuses: it lets any zip member name any student,
  extracts zips inside zips and aborts the whole class on one duplicate): each upload speaks only for the student
  the LMS named it after (Canvas's user id, Moodle's participant number, mapped onto the roster's ids by
  lecturelib.course.term.roster; a name the student typed inside the file name never decides), archives are checked
  (names, sizes, ratios, no nesting) before anything is extracted, and a bad upload costs only itself.
"""

from __future__ import annotations

import datetime
import fnmatch
import json
import os
import re
import shutil
import stat
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.exchange.default.collect import ExchangeCollect
from nbgrader.plugins.zipcollect import ExtractorPlugin
from nbgrader.utils import parse_utc

from lecturelib.course.term import roster
from lecturelib.course.layout import Course
from lecturelib.course.term.roster import STUDENT_ID, valid_student  # noqa: F401 - STUDENT_ID: re-exported

MAX_FILE_BYTES = 64 * 2**20  # one notebook or data file
MAX_UPLOAD_BYTES = 128 * 2**20  # everything one upload (a zip) expands to
MAX_MEMBERS = 64  # entries in one student's zip
MAX_RATIO = 200  # expanded / compressed size of one zip member larger than RATIO_FLOOR
RATIO_FLOOR = 2**20
ARCHIVES = (".zip", ".tar", ".gz", ".tgz", ".bz2", ".xz", ".7z", ".rar", ".whl", ".jar")
IGNORED = (".ipynb_checkpoints", "__pycache__", "*.pyc", ".DS_Store", "__MACOSX", "Thumbs.db")  # editors' litter
TIMESTAMP = "timestamp.txt"  # written by nbgrader collect: the submission time, for late penalties
SECRET = "submission_secret.txt"  # written by nbgrader submit: names the feedback page release_feedback puts out for it
NOTES = "collect-notes.txt"  # what collect found about a submission, a line each (written by collect, never a student's)
CLOCK_SLACK_S = 60  # a claimed time this much earlier than the exchange's is a clock's drift, not a claim
# How each LMS names the files of a bulk download (see lecturelib.course.term.roster for whom the ids name).
LMS_NAMES = {
    # STUDENT--FILE, e.g. alice--02_matmul_flops.ipynb: files named by hand (or by the instructor's script); the
    # name is all that says who the student is
    "course": re.compile(r"(?P<student>[A-Za-z0-9][A-Za-z0-9._@+]*(?:-[A-Za-z0-9._@+]+)*)--(?P<file>.+)"),
    # Canvas's "Download Submissions": lastnamefirstname_[LATE_]USERID_FILEID_FILE, e.g.
    # smithjane_12345_6789012_02_matmul_flops.ipynb. Canvas keeps `_DIGITS_` out of the name part (it uses the first
    # one to find the user id) but not `_`, so the name is everything before the first `_[late_]DIGITS_DIGITS_`.
    "canvas": re.compile(r"(?P<name>[^/]+?)_(?:(?P<late>LATE|late)_)?(?P<id>\d+)_\d+_(?P<file>[^/]+)"),
    # Moodle's "Download all submissions": a folder per student and plugin, Full Name_PARTICIPANT_assignsubmission_file_/
    # FILE (or, with "Download submissions in folders" off, the folder's name before each file). Moodle turns `_` in
    # the name into a space.
    "moodle": re.compile(r"(?P<name>[^_/]+)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)_/?(?P<file>[^/].*)"),
}
MOODLE_FOLDER = re.compile(r"(?P<name>[^_/]+)_(?P<id>\d+)_assignsubmission_(?P<plugin>[a-z0-9]+)_")


def kind(st: os.stat_result) -> str:
    """What a file is, in words (from lstat)."""
    mode = st.st_mode
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a named pipe"),
                       (stat.S_ISCHR, "a device file"), (stat.S_ISBLK, "a device file"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a regular file"


def expected_files(course: Course, assignment: str) -> tuple[set[str], set[str]]:
    """(notebooks, data files) a submission of `assignment` may hold: the release's notebooks, source/'s other files."""
    notebooks = {p.name for p in (course.release / assignment).glob("*.ipynb")}
    notebooks |= {p.name for p in course.source_notebooks(assignment)}
    folder = course.source / assignment
    data = {p.name for p in folder.iterdir() if not p.name.endswith(".ipynb") and p.is_file() and not p.is_symlink()} \
        if folder.is_dir() else set()
    return notebooks, data


def _ignored(name: str) -> bool:
    return any(fnmatch.fnmatch(name, pattern) for pattern in IGNORED)


def read_notes(folder: Path) -> list[str]:
    """What collect noted about the submission in `folder` (collect-notes.txt), a line each."""
    path = folder / NOTES
    if path.is_symlink() or not path.is_file():
        return []
    return [line for line in path.read_text(encoding="utf-8", errors="replace")[:4096].splitlines() if line.strip()]


# ---------------------------------------------------------------------------------------------------------
# submitted/, before autograde reads it


@dataclass
class Screening:
    """What `screen` found in one submission folder."""

    gradable: bool = True
    problems: list[str] = field(default_factory=list)  # refused: links, devices, oversized files, a bad folder
    notes: list[str] = field(default_factory=list)  # stray files, moved aside


def screen(course: Course, pairs: list[tuple[str, str]]) -> dict[tuple[str, str], Screening]:
    """Check every (student, assignment) folder of submitted/ before anything reads it, and move out what a
    submission may not hold (to logs/autograde/refused/STUDENT/ASSIGNMENT/, where the instructor can look)."""
    found: dict[tuple[str, str], Screening] = {}
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for student, assignment in pairs:
        s = found[(student, assignment)] = Screening()
        student_dir, folder = course.submitted / student, course.submitted / student / assignment
        aside = course.root / "logs" / "autograde" / "refused" / stamp / "_" / student / assignment
        if not valid_student(student):
            s.gradable = False
            where = (_move_aside(student_dir, aside.parent.parent / "invalid-student-id") if os.path.lexists(student_dir)
                     else None)
            s.problems.append(f"not graded: the folder name submitted/{student!r} is not a valid student id "
                              f"(letters, digits and . _ @ + -)" + (f"; moved to {where.relative_to(course.root)}"
                                                                   if where else ""))
            continue
        for path in (student_dir, folder):
            if s.gradable and (path.is_symlink() or not path.is_dir()):
                s.gradable = False
                s.problems.append(f"not graded: {path.relative_to(course.root)} is {kind(path.lstat())}, not a folder "
                                  f"(moved to {_move_aside(path, aside.parent.parent / path.name).relative_to(course.root)})")
        if not s.gradable:
            continue
        notebooks, data = expected_files(course, assignment)
        aside = course.root / "logs" / "autograde" / "refused" / stamp / student / assignment
        for name in sorted(os.listdir(folder)):
            st = os.lstat(folder / name)
            what = kind(st)
            if name in notebooks | data | {TIMESTAMP, SECRET, NOTES} and what == "a regular file" \
                    and st.st_size <= MAX_FILE_BYTES:
                continue
            aside.mkdir(parents=True, exist_ok=True)
            os.rename(folder / name, aside / name)  # the entry itself, never what a link points to
            where = aside.relative_to(course.root)
            if what not in ("a regular file", "a folder"):
                s.problems.append(f"refused {name}: {what} (only the assignment's own files are graded; moved to {where})")
            elif name in notebooks | data:
                s.problems.append(f"refused {name}: {what} of {st.st_size} bytes (at most {MAX_FILE_BYTES} are read; "
                                  f"moved to {where})")
            elif not _ignored(name):
                s.notes.append(f"not graded: {name}, {what} that is not part of the assignment (moved to {where})")
        s.notes += read_notes(folder)
    return found


def _move_aside(path: Path, dest: Path) -> Path:
    """Rename `path` itself (a link stays a link) to `dest`, made unique."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    while dest.exists() or dest.is_symlink():
        dest = dest.with_name(dest.name + "_")
    os.rename(path, dest)
    return dest


# ---------------------------------------------------------------------------------------------------------
# nbgrader collect (the exchange)


def copy_submission(src: str, dest: str, allowed: set[str]) -> list[str]:
    """Copy the allowed regular files of folder `src` into `dest` (made here), reading each through a descriptor
    opened without following links; what is refused, and why."""
    try:
        src_fd = os.open(src, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as e:
        return [f"refused {os.path.basename(src)}: not a folder ({e.strerror})"]
    refused = []
    try:
        os.makedirs(dest, exist_ok=True)
        for name in sorted(os.listdir(src_fd)):
            st = os.stat(name, dir_fd=src_fd, follow_symlinks=False)
            what = kind(st)
            if name not in allowed or what != "a regular file":
                if not _ignored(name):
                    refused.append(f"refused {name}: {what}" + ("" if name in allowed else ", not a file of the assignment"))
                continue
            fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=src_fd)
            with os.fdopen(fd, "rb") as source:
                if not stat.S_ISREG(os.fstat(fd).st_mode):  # replaced between the look and the open
                    refused.append(f"refused {name}: it changed while it was collected")
                    continue
                out = os.open(os.path.join(dest, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
                with os.fdopen(out, "wb") as target:
                    copied = _copy_bounded(source, target, MAX_FILE_BYTES)
                if copied is None:
                    os.unlink(os.path.join(dest, name))
                    refused.append(f"refused {name}: larger than {MAX_FILE_BYTES} bytes")
    finally:
        os.close(src_fd)
    return refused


def _copy_bounded(source, target, limit: int) -> int | None:  # noqa: ANN001 - binary files
    """Copy at most `limit` bytes; None (and a partial copy) when there was more."""
    total = 0
    while True:
        chunk = source.read(1 << 20)
        if not chunk:
            return total
        total += len(chunk)
        if total > limit:
            return None
        target.write(chunk)


# ---------------------------------------------------------------------------------------------------------
# Submission times: what the student claims, and when the exchange received it


def read_time(text: str) -> datetime.datetime | None:
    """A submission time as nbgrader reads it (`2026-12-01 16:00:00.000000 UTC`), in naive UTC; None when `text`
    is no time (or names a time zone by a file path, which nbgrader would open)."""
    text = text.strip()
    zone = text.split(" ")[2] if len(text.split(" ")) == 3 else ""
    if not text or len(text) > 64 or not text.isprintable() or zone.startswith(("/", ".")) or ".." in zone:
        return None
    try:
        when = parse_utc(text)
    except (ValueError, OverflowError, TypeError, LookupError):
        return None
    return when if 1970 <= when.year <= 2200 else None


def time_text(when: datetime.datetime) -> str:
    """A naive UTC time as nbgrader writes timestamp.txt."""
    return f"{when:%Y-%m-%d %H:%M:%S.%f} UTC"


def _short(when: datetime.datetime) -> str:
    return f"{when:%Y-%m-%d %H:%M:%S} UTC"


def received_time(folder: str) -> datetime.datetime:
    """When the exchange last received anything of a submission folder, in naive UTC: the latest change time of the
    folder and its entries. st_ctime is the kernel's: writing, renaming or linking a file sets it to now, and so
    does `utime` (which sets only the times a student may choose), so no student can set it back."""
    times = [os.lstat(folder).st_ctime]
    with os.scandir(folder) as entries:
        times += [e.stat(follow_symlinks=False).st_ctime for e in entries]
    return datetime.datetime.fromtimestamp(max(times), datetime.timezone.utc).replace(tzinfo=None)


def counted_time(claimed: datetime.datetime | None, received: datetime.datetime) -> datetime.datetime:
    """The submission time that counts: the claim, unless it is no time or earlier than the receipt by more than a
    clock's drift (then the receipt)."""
    if claimed is None or claimed < received - datetime.timedelta(seconds=CLOCK_SLACK_S):
        return received
    return claimed


def settle_time(dest: Path, received: datetime.datetime) -> list[str]:
    """Make the timestamp.txt of a collected submission (folder `dest`) the time that counts (`counted_time`); write
    what was changed, and why, into its collect-notes.txt; return those notes."""
    stamp = dest / TIMESTAMP
    raw = ""
    if stamp.is_file() and not stamp.is_symlink():
        with open(stamp, "rb") as f:
            raw = f.read(256).decode("utf-8", errors="replace")
    claimed = read_time(raw)
    when = counted_time(claimed, received)
    where = (f"the exchange received it at {_short(received)} (the last change of its files there, which no student "
             "can set back)")
    if not raw.strip():
        notes = [f"{TIMESTAMP} {'is empty' if stamp.is_file() else 'is missing'}: {where}: that time counts"]
    elif claimed is None:
        notes = [f"{TIMESTAMP} read {raw.strip()[:60]!r}, which is no time: ignored; {where}: that time counts"]
    elif when != claimed:
        notes = [f"{TIMESTAMP} claimed {_short(claimed)}, but {where}: the later time counts"]
    else:
        return []
    if stamp.is_symlink():
        stamp.unlink()
    stamp.write_text(time_text(when) + "\n")
    (dest / NOTES).write_text("".join(f"{n}\n" for n in notes), encoding="utf-8")
    return notes


class SafeExchangeCollect(ExchangeCollect):
    """nbgrader's collect, copying only the assignment's own regular files, never through a link, and refusing a
    submission folder that another student's account owns, or whose name is no valid student id (it would become a
    folder of submitted/ and a name in Formgrader's pages), or a notebook of another assignment; the submission time
    is the student's claim only when the exchange's own time agrees (`settle_time`) (c.ExchangeFactory.collect in
    nbgrader_config.py)."""

    def _path_to_record(self, path: str) -> dict:
        """nbgrader's record of an inbound folder (`STUDENT+ASSIGNMENT+TIME+RANDOM`), never failing on a name: its
        time is the one that counts (the student names the folder; the exchange's change time bounds it)."""
        filename = os.path.basename(path)
        parts = filename.rsplit("+", 3)
        try:
            received = received_time(path)
        except OSError:
            received = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        claimed = read_time(parts[2]) if len(parts) >= 3 else None
        username = parts[0] if len(parts) >= 3 else ""  # no valid student id: refused in init_src
        return {"username": username, "filename": filename, "timestamp": counted_time(claimed, received)}

    def init_src(self) -> None:
        super().init_src()
        records: list[dict] = list(getattr(self, "src_records"))  # noqa: B009 - set by nbgrader's init_src
        for record in records:
            if not valid_student(record["username"]):
                self.log.error("refused the submission %r: its name is no valid student id", record["filename"])
        self.src_records = [r for r in records if valid_student(r["username"])]

    def do_copy(self, src: str, dest: str, log=None) -> None:  # noqa: ANN001 - nbgrader's signature
        student = os.path.basename(os.path.dirname(dest))
        owner = os.lstat(src).st_uid
        if not self._owner_may_submit(owner, student):
            self.log.error("refused the submission %s: it belongs to another user (uid %s), not to %s",
                           os.path.basename(src), owner, student)
            return
        root = Path(self.coursedir.root)
        course = Course(root if (root / "nbgrader_config.py").exists() else Path.cwd())
        assignment = self.coursedir.assignment_id
        notebooks, data = expected_files(course, assignment)
        try:
            received = received_time(src)
        except OSError:
            received = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
        for problem in copy_submission(src, dest, notebooks | data | {TIMESTAMP, SECRET}):
            self.log.warning("%s: %s", student, problem)
        releases = Releases(course)
        for name in sorted(notebooks):
            path = Path(dest, name)
            if path.is_file():
                other = releases.owner(assignment, path.read_bytes())
                if other:
                    path.unlink()
                    self.log.error("%s: refused %s: %s", student, name, releases.why(assignment, other))
        if os.path.isdir(dest) and not any(Path(dest, n).is_file() for n in notebooks):
            shutil.rmtree(dest)  # nothing to grade: no submission rather than a 0 nobody asked for
            try:
                os.rmdir(os.path.dirname(dest))  # the student's folder nbgrader made for it, when it holds nothing else
            except OSError:
                pass
            self.log.error("%s: not collected: no notebook of %s in the submission", student, assignment)
        elif os.path.isdir(dest):
            for note in settle_time(Path(dest), received):
                self.log.warning("%s: %s", student, note)

    @staticmethod
    def _owner_may_submit(owner: int, student: str) -> bool:
        """The student's own account may submit as the student; so may the instructor (one machine, no accounts)."""
        if owner == os.getuid():
            return True
        try:
            import pwd

            return pwd.getpwnam(student).pw_uid == owner
        except (ImportError, KeyError):
            return False


# ---------------------------------------------------------------------------------------------------------
# Whose notebook an upload is


class Releases:
    """The grade ids of every assignment's release, to recognise a notebook of another assignment: only ids that one
    release alone has count (`intro`, `parameters`, `reflection_md` stand in every notebook)."""

    def __init__(self, course: Course) -> None:
        self.ids: dict[str, set[str]] = {}
        for path in sorted(course.release.glob("*/*.ipynb")) if course.release.is_dir() else []:
            self.ids.setdefault(path.parent.name, set()).update(_grade_ids(path.read_bytes()))
        counts: dict[str, int] = {}
        for ids in self.ids.values():
            for gid in ids:
                counts[gid] = counts.get(gid, 0) + 1
        self.own = {a: {g for g in ids if counts[g] == 1} for a, ids in self.ids.items()}

    def owner(self, assignment: str, notebook: bytes) -> str:
        """The assignment a notebook uploaded for `assignment` belongs to when that is another one ('' otherwise:
        it has a graded cell of `assignment`'s own, or none of anyone's)."""
        ids = _grade_ids(notebook)
        if ids & self.own.get(assignment, set()):
            return ""
        shared = {a: len(ids & own) for a, own in self.own.items() if a != assignment and ids & own}
        return max(sorted(shared), key=lambda a: shared[a]) if shared else ""

    def why(self, assignment: str, owner: str) -> str:
        return (f"it is the notebook of {owner} (its graded cells are {owner}'s), not of {assignment}: the student "
                f"must upload {assignment}'s notebook")


def _grade_ids(notebook: bytes) -> set[str]:
    """The nbgrader grade ids of a notebook's cells (none when it is no notebook)."""
    try:
        cells = json.loads(notebook).get("cells", [])
        return {str(c["metadata"]["nbgrader"]["grade_id"]) for c in cells if isinstance(c, dict)
                and isinstance(c.get("metadata"), dict) and isinstance(c["metadata"].get("nbgrader"), dict)
                and "grade_id" in c["metadata"]["nbgrader"]}
    except (ValueError, AttributeError, TypeError, RecursionError):
        return set()


class RefuseZipCollect(ExtractorPlugin):
    """`nbgrader zip_collect` for this course: refused, with what to run instead (c.ZipCollectApp.extractor_plugin)."""

    def extract(self, archive_path: str, extracted_path: str) -> None:
        raise RuntimeError("this course collects LMS downloads with `python -m lecturelib.course collect NN_topic` "
                           "(nbgrader zip_collect lets a zip member name any student and opens zips inside zips)")


# ---------------------------------------------------------------------------------------------------------
# LMS downloads: python -m lecturelib.course collect


@dataclass(frozen=True)
class Named:
    """Who an LMS's name says made an upload, and the student's own file name."""

    key: str  # the LMS's id of the student: STUDENT of STUDENT--FILE, Canvas's user id, Moodle's participant number
    file: str  # the name the student gave the file (its last part)
    who: str  # the student as the LMS wrote the name, for messages ("smithjane", "Jane Smith")
    late: bool = False  # Canvas's LATE_
    plugin: str = "file"  # Moodle's submission plugin (only `file` holds uploads)


def lms_name(name: str, lms: str) -> Named | None:
    """Who an LMS named an upload after, from its name in the download (Moodle: its path, from the per-student
    folder), or None when the name does not say."""
    m = LMS_NAMES[lms].fullmatch(name)
    if m is None:
        return None
    if lms == "course":
        return Named(m["student"], m["file"], m["student"]) if valid_student(m["student"]) else None
    if lms == "canvas":
        return Named(m["id"], m["file"], m["name"], late=m["late"] is not None)
    return Named(m["id"], m["file"].split("/")[-1], m["name"].strip(), plugin=m["plugin"])


def _typed(name: str) -> tuple[str | None, str]:
    """(the student a STUDENT--FILE name names, FILE), or (None, name)."""
    m = LMS_NAMES["course"].fullmatch(name)
    return (m["student"], m["file"]) if m else (None, name)


def _normal(name: str) -> str:
    """A file name as the student meant it: an LMS's "-1" (a resubmission) or " (1)" (a browser) dropped."""
    stem, ext = os.path.splitext(name)
    return re.sub(r"(-\d+| ?\(\d+\))$", "", stem) + ext


@dataclass
class Upload:
    """One file of the download, as one student's upload: what it gives (file name -> bytes) or why it was refused."""

    source: str  # where it is: "archive/alice--x.zip", or "archive/submissions.zip: alice--x.zip"
    student: str
    files: dict[str, bytes] = field(default_factory=dict)
    problem: str = ""
    late: bool = False
    notes: list[str] = field(default_factory=list)


def _claims(up: Upload, name: str, typed: str | None, strict: bool) -> bool:
    """Whether a file name that names a student (`typed`--FILE) may stand in `up`: never for another student when
    the name is all that says who the upload is from (`strict`: files named by hand); else the LMS has said, and the
    name only earns a note."""
    if typed is None or typed.lower() == up.student.lower():  # ids match without case
        return True
    if strict:
        return False
    up.notes.append(f"{up.source}: its file name {name!r} names {typed!r}; collected as {up.student}'s, the student the "
                    "LMS says uploaded it (an upload speaks only for its own student)")
    return True


def _member_problem(info: zipfile.ZipInfo, allowed: set[str]) -> str:
    """Why one member of a student's zip is refused ('' if it may be a file of the assignment)."""
    name = info.filename
    parts = name.replace("\\", "/").split("/")
    if "\\" in name or name.startswith("/") or re.match(r"[A-Za-z]:", name) or ".." in parts or "\0" in name:
        return f"{name!r}: a path outside the archive"
    if stat.S_ISLNK(info.external_attr >> 16):
        return f"{name!r}: a symbolic link"
    if parts[-1].lower().endswith(ARCHIVES):
        return f"{name!r}: an archive inside an archive (not opened)"
    if _normal(_typed(parts[-1])[1]) not in allowed:
        return f"{name!r}: not a file of the assignment"
    return ""


def _read_zip(data_path: Path, up: Upload, allowed: set[str], strict: bool) -> tuple[dict[str, bytes], str]:
    """The files a student's zip gives, checked before anything is extracted: names, count, sizes, ratios."""
    try:
        with zipfile.ZipFile(data_path) as z:
            infos = [i for i in z.infolist() if not i.is_dir()
                     and not any(_ignored(p) for p in i.filename.replace("\\", "/").split("/"))]
            if len(infos) > MAX_MEMBERS:
                return {}, f"{len(infos)} files (at most {MAX_MEMBERS})"
            problems = [p for p in (_member_problem(i, allowed) for i in infos) if p]
            bases = [i.filename.replace("\\", "/").split("/")[-1] for i in infos]
            problems += [f"{i.filename!r}: names another student ({_typed(b)[0]}); an upload speaks only for its own "
                         "student" for i, b in zip(infos, bases) if not _claims(up, b, _typed(b)[0], strict)]
            if problems:
                return {}, problems[0] + (f" (and {len(problems) - 1} more)" if len(problems) > 1 else "")
            total = sum(i.file_size for i in infos)
            if total > MAX_UPLOAD_BYTES or any(i.file_size > MAX_FILE_BYTES for i in infos):
                return {}, f"it expands to {total} bytes (at most {MAX_FILE_BYTES} a file, {MAX_UPLOAD_BYTES} in all)"
            for i in infos:
                if i.file_size > RATIO_FLOOR and i.file_size > MAX_RATIO * max(1, i.compress_size):
                    return {}, f"{i.filename!r} expands {i.file_size // max(1, i.compress_size)} times (a zip bomb?)"
            names = [_normal(_typed(b)[1]) for b in bases]
            if len(set(names)) != len(names):
                return {}, "it holds two files of the same name"
            files = {}
            for info, name in zip(infos, names):
                with z.open(info) as member:  # zipfile stops at the declared size and checks the CRC
                    data = member.read(info.file_size + 1)
                if len(data) > info.file_size:
                    return {}, f"{info.filename!r} holds more than its declared size"
                files[name] = data
            return files, ""
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, RuntimeError, NotImplementedError) as e:
        return {}, f"not a readable zip ({type(e).__name__}: {str(e)[:100]})"


def _upload(path: Path, source: str, student: str, named: Named, notebooks: set[str], data: set[str],
            strict: bool) -> Upload:
    """One student's upload: a notebook, a data file, or a zip of them."""
    up = Upload(source, student, late=named.late)
    allowed = notebooks | data
    filename = named.file
    st = path.lstat()
    if not stat.S_ISREG(st.st_mode):
        up.problem = f"it is {kind(st)}"
    elif filename.lower().endswith(".zip"):
        up.files, up.problem = _read_zip(path, up, allowed, strict)
    elif st.st_size > MAX_FILE_BYTES:
        up.problem = f"{st.st_size} bytes (at most {MAX_FILE_BYTES})"
    elif filename.lower().endswith(ARCHIVES):
        up.problem = "an archive that is not a zip"
    else:
        typed, rest = _typed(filename)
        name = _normal(rest)
        if name not in allowed and name.endswith(".ipynb") and len(notebooks) == 1:
            name = next(iter(notebooks))  # the assignment's one notebook, renamed by the student
        if not _claims(up, filename, typed, strict):
            up.problem = f"its name names another student ({typed})"
        elif name not in allowed:
            up.problem = "not a file of the assignment"
        else:
            up.files = {name: path.read_bytes()}
    return up


class _Found:
    """The uploads of one download, each with the roster student it speaks for (or why it speaks for none)."""

    def __init__(self, course: Course, assignment: str, lms: str, problems: list[str], notes: list[str]) -> None:
        self.lms, self.problems, self.notes, self.assignment = lms, problems, notes, assignment
        self.notebooks, self.data = expected_files(course, assignment)
        self.roster = roster.read_roster(course.gradebook)
        self.identify = roster.identify(lms, self.roster, course.root / "downloaded" / assignment) \
            if lms != "course" else None
        self.releases = Releases(course)
        self.uploads: list[Upload] = []

    def student(self, named: Named, source: str) -> str | None:
        """The student id an upload is filed under, or None (and a problem, or a note) when it is not collected."""
        if named.plugin != "file":
            self.notes.append(f"{source}: not collected: Moodle's {named.plugin} (only uploaded files are graded)")
            return None
        if self.identify is None:
            return self._by_hand(named.key, source)
        student, why = self.identify(named.key, named.who)
        if why:
            self.problems.append(f"{source}: refused: {why}")
            return None
        if not valid_student(student):
            self.problems.append(f"{source}: refused: the roster's id {student!r} is no valid student id (letters, "
                                 "digits and . _ @ + -)")
            return None
        return student

    def _by_hand(self, key: str, source: str) -> str | None:
        """The roster's id for STUDENT of STUDENT--FILE: ids match without case (`Bchen` is `bchen`)."""
        if key in self.roster.ids or not self.roster.ids:
            return key
        same = roster.same_id(key, self.roster)
        if len(same) == 1:
            self.notes.append(f"{source}: collected as {same[0]}'s, the roster's id ({key!r} differs only in case)")
            return same[0]
        if same:
            self.problems.append(f"{source}: refused: {key!r} is not in the roster; did you mean {' or '.join(same)}? "
                                 "(rename the file, then collect again)")
            return None
        return key  # not in the roster: collected, with a note (roster.not_in_roster)

    def append(self, up: Upload) -> None:
        """Keep one upload, refusing a notebook of another assignment (its graded cells are that release's)."""
        for name, content in up.files.items():
            owner = self.releases.owner(self.assignment, content) if name.endswith(".ipynb") else ""
            if owner:
                up.problem, up.files = f"{name}: {self.releases.why(self.assignment, owner)}", {}
                break
        self.uploads.append(up)

    def add(self, path: Path, source: str, named: Named) -> None:
        student = self.student(named, source)
        if student is not None:
            self.append(_upload(path, source, student, named, self.notebooks, self.data, strict=self.lms == "course"))


def collect_downloads(course: Course, assignment: str, *, lms: str = "course", force: bool = False,
                      notes: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Collect downloaded/ASSIGNMENT/archive/ into submitted/STUDENT/ASSIGNMENT/; (what was collected, problems).

    Each top-level entry of archive/ is one student's upload, named by the LMS (`lms`: "course" for STUDENT--FILE,
    named by hand; "canvas" for Canvas's bulk download names; "moodle" for Moodle's per-student folders or files), or
    a bulk download zip whose members are such uploads. An upload is a notebook, a data file, or a zip of them (no
    zip inside it). With canvas and moodle, the LMS's id of the student is mapped onto the roster
    (lecturelib.course.term.roster): an id the roster does not have is refused. downloaded/ASSIGNMENT/timestamps.csv
    gives submission times (timestamp.txt). A student already in submitted/ is left alone unless `force`. What is
    worth knowing but refuses nothing goes to `notes`."""
    notes = [] if notes is None else notes
    downloaded = course.root / "downloaded" / assignment
    archive = downloaded / "archive"
    if not archive.is_dir():
        return [], [f"no folder {archive.relative_to(course.root)}: put the LMS's download there"]
    problems: list[str] = []
    found = _Found(course, assignment, lms, problems, notes)
    if found.identify is not None and not found.identify.roster.ids:
        return [], [f"no roster in {course.gradebook.name}: the {lms} download names students by {lms}'s ids, which only "
                    f"the roster maps to the course's students. Import it first ({roster.IMPORT}, columns "
                    f"{','.join(roster.COLUMNS)}), then collect again"]
    if lms == "moodle" and found.identify is not None and (found.identify.worksheet_problem or
                                                           not found.identify.participants):
        return [], [f"no Moodle grading worksheet in downloaded/{assignment}/{roster.WORKSHEET}"
                    + (f" ({found.identify.worksheet_problem})" if found.identify.worksheet_problem else "")
                    + ": Moodle's download names students by participant numbers drawn for this assignment only; save "
                    "the assignment's worksheet there (View all submissions → Grading action → Download grading "
                    "worksheet, with Email address among the identity fields), then collect again"]
    times, bad_times = roster.read_times(downloaded / roster.TIMES)
    problems += [f"downloaded/{assignment}/{p}" for p in bad_times]
    with tempfile.TemporaryDirectory(prefix="lecturelib-collect-") as scratch:
        for path in sorted(archive.iterdir()):
            folder = MOODLE_FOLDER.fullmatch(path.name) if lms == "moodle" and path.is_dir() else None
            if folder is not None and not path.is_symlink():  # a per-student folder: its files are the uploads
                _folder(path, Named(folder["id"], "", folder["name"].strip(), plugin=folder["plugin"]), found)
                continue
            named = lms_name(path.name, lms)
            if named is not None:
                found.add(path, f"archive/{path.name}", named)
            elif path.suffix.lower() == ".zip" and path.is_file() and not path.is_symlink():
                _bulk(path, Path(scratch), found)
            elif not _ignored(path.name):
                problems.append(f"archive/{path.name}: refused: its name does not name a student "
                                f"({'STUDENT--FILE' if lms == 'course' else 'the ' + lms + ' download naming'})")
        collected: list[str] = []
        by_student: dict[str, list[Upload]] = {}
        for up in found.uploads:
            notes += up.notes
            if up.problem:
                problems.append(f"{up.source}: refused ({up.student}): {up.problem}")
            else:
                by_student.setdefault(up.student, []).append(up)
        if lms == "course":
            notes += roster.not_in_roster(by_student, found.roster)
        for student, ups in sorted(by_student.items()):
            files: dict[str, bytes] = {}
            for up in ups:
                for name, content in up.files.items():
                    if name in files and files[name] != content:
                        problems.append(f"{up.source}: refused ({student}): another upload of {student} also gives {name}")
                        continue
                    files[name] = content
            if not any(n.endswith(".ipynb") for n in files):
                problems.append(f"{student}: no notebook in the uploads ({', '.join(u.source for u in ups)})")
            done = _write(course, student, assignment, files, times.get(student), force, problems)
            collected += done
            if done and any(u.late for u in ups) and student not in times:
                notes.append(f"{student}: Canvas marks the upload LATE but gives no time: add `{student},TIME` (from "
                             f"SpeedGrader) to downloaded/{assignment}/{roster.TIMES} and collect again with --force, "
                             "or Formgrader and `course grades` count it on time")
    return collected, problems


def _folder(folder: Path, named: Named, found: _Found) -> None:
    """Moodle's folder of one student: each regular file in it (at any depth) is an upload; links are refused."""
    source = f"archive/{folder.name}/"
    student = found.student(named, source)
    if student is None:
        return
    count = 0
    for parent, subs, names in os.walk(folder):  # os.walk enters no link to a folder: each is refused below
        subs[:] = sorted(s for s in subs if not _ignored(s))
        for name in [s for s in subs if Path(parent, s).is_symlink()] + sorted(n for n in names if not _ignored(n)):
            path = Path(parent, name)
            count += 1
            if count > MAX_MEMBERS:
                found.problems.append(f"{source}: refused ({student}): more than {MAX_MEMBERS} files")
                return
            found.append(_upload(path, f"archive/{path.relative_to(folder.parent)}", student,
                                         Named(named.key, name, named.who), found.notebooks, found.data, strict=False))


def _bulk(path: Path, scratch: Path, found: _Found) -> None:
    """The uploads inside an LMS's bulk download zip, each checked like a top-level file (one level only)."""
    try:
        with zipfile.ZipFile(path) as z:
            for index, info in enumerate(z.infolist()):
                member = info.filename.replace("\\", "/")
                base = member.split("/")[-1]
                if info.is_dir() or _ignored(base) or any(_ignored(p) for p in member.split("/")):
                    continue
                source = f"archive/{path.name}: {info.filename}"
                named = lms_name(member if found.lms == "moodle" else base, found.lms)
                if named is None:
                    found.problems.append(f"{source}: refused: its name does not name a student")
                    continue
                why = ("a path outside the archive" if ".." in member.split("/") or member.startswith("/") else
                       "a symbolic link" if stat.S_ISLNK(info.external_attr >> 16) else
                       f"{info.file_size} bytes (at most {MAX_UPLOAD_BYTES})" if info.file_size > MAX_UPLOAD_BYTES else "")
                if why:
                    found.problems.append(f"{source}: refused ({named.who}): {why}")
                    continue
                student = found.student(named, source)
                if student is None:
                    continue
                target = scratch / str(index)  # the member's name may be no valid file name here
                with z.open(info) as content, open(target, "wb") as out:
                    if _copy_bounded(content, out, MAX_UPLOAD_BYTES) is None:
                        found.problems.append(f"{source}: refused ({student}): larger than declared")
                        continue
                found.append(_upload(target, source, student, named, found.notebooks, found.data,
                                             strict=found.lms == "course"))
    except (zipfile.BadZipFile, OSError, ValueError, RuntimeError, NotImplementedError) as e:
        found.problems.append(f"archive/{path.name}: refused: not a readable zip ({type(e).__name__})")


def _write(course: Course, student: str, assignment: str, files: dict[str, bytes], when: str | None, force: bool,
           problems: list[str]) -> list[str]:
    """Write one student's files (and the submission time, if known) into submitted/STUDENT/ASSIGNMENT/ (made
    afresh, never through a link)."""
    student_dir, folder = course.submitted / student, course.submitted / student / assignment
    for path in (course.submitted, student_dir, folder):
        if path.is_symlink():
            problems.append(f"{student}: not collected: {path.relative_to(course.root)} is a symbolic link")
            return []
    if folder.exists() and not force:
        problems.append(f"{student}: already in submitted/ (collect again with --force to replace it)")
        return []
    staging = Path(tempfile.mkdtemp(prefix=f".{assignment}-", dir=_ensure(student_dir)))
    for name, content in files.items():
        (staging / name).write_bytes(content)
    if when is not None:
        (staging / TIMESTAMP).write_text(when + "\n")
    if folder.exists():
        shutil.rmtree(folder)
    os.rename(staging, folder)
    return [f"{student}: {', '.join(sorted(files))}" + (f" (submitted {when})" if when else "")]


def _ensure(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return folder
