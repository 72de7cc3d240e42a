"""What grading must leave alone, checked after each submission and again after the whole run.

With the sandbox no kernel can reach the course's files, the gradebook or other submissions; these checks
are the second line (and the only one with `--no-sandbox`). The grader trusts its own results only: each
submission's autograded scores are recomputed from its graded notebook and the release's points, and every
student's grades, submitted/ and autograded/ are compared with what they were, or with what this run wrote.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import stat
import threading
from pathlib import Path

from nbgrader.utils import compute_checksum

from lecturelib.course.layout import Course, is_test_cell, nbgrader_meta, read_notebook

Pair = tuple[str, str]  # (student, assignment)

GRADE_ROWS = """
select g.id, sa.student_id, a.name, n.name, c.name, g.auto_score, g.manual_score, g.extra_credit
from grade g join submitted_notebook sn on g.notebook_id = sn.id join notebook n on sn.notebook_id = n.id
join submitted_assignment sa on sn.assignment_id = sa.id join assignment a on sa.assignment_id = a.id
join base_cell c on g.cell_id = c.id
"""


def lecturelib_folder() -> Path:
    """Where lecturelib is (inside the course root, or a venv's copy elsewhere)."""
    import lecturelib

    return Path(lecturelib.__file__).parent


def course_files(course: Course) -> list[Path]:
    """What no grading may change: the course's configuration, masters, release and grading code."""
    roots = [course.source, course.release, lecturelib_folder()]
    return [course.root / "nbgrader_config.py"] + [p for r in roots if r.is_dir() for p in sorted(r.rglob("*"))
                                                   if p.is_file() and "__pycache__" not in p.parts]


def _rows(db: Path) -> list[tuple]:
    with sqlite3.connect(db, timeout=120) as con:
        return con.execute(GRADE_ROWS).fetchall()


def regular_files(folder: Path) -> list[Path]:
    """Every regular file under `folder`, never through a link (links, pipes and devices are not files here)."""
    if folder.is_symlink() or not folder.is_dir():
        return []
    found = []
    for top, _, names in os.walk(folder):  # os.walk does not follow links to folders
        for name in names:
            path = Path(top, name)
            if stat.S_ISREG(path.lstat().st_mode):
                found.append(path)
    return sorted(found)


def file_hash(path: Path) -> str:
    """sha256 of a regular file, read in chunks (never the whole file in memory), not through a link."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest() if stat.S_ISREG(os.fstat(fd).st_mode) else ""


def digest(folder: Path) -> dict[str, str]:
    """sha256 of every regular file under `folder`, by relative path ({} if it does not exist)."""
    return {str(p.relative_to(folder)): file_hash(p) for p in regular_files(folder)}


def release_points(course: Course, assignment: str) -> dict[tuple[str, str], float]:
    """(notebook, grade_id) -> points of every autograded test cell, as the release says."""
    return {(path.stem, nbgrader_meta(c)["grade_id"]): float(nbgrader_meta(c)["points"])
            for path in sorted((course.release / assignment).glob("*.ipynb"))
            for c in read_notebook(path).cells if is_test_cell(c)}


def recompute(course: Course, student: str, assignment: str) -> dict[tuple[str, str], float]:
    """Each autograded test cell's score from the graded notebook in autograded/: the release's points when the
    cell shows no error (JudgeChecks's verdict), else 0. A notebook that is missing scores 0 everywhere."""
    scores = {}
    points = release_points(course, assignment)
    cells = {}
    for notebook in {nb for nb, _ in points}:
        path = course.autograded / student / assignment / f"{notebook}.ipynb"
        if path.exists():
            cells.update({(notebook, nbgrader_meta(c).get("grade_id")): c for c in read_notebook(path).cells
                          if is_test_cell(c)})
    for key, max_points in points.items():
        cell = cells.get(key)
        failed = cell is None or any(o.output_type == "error" or (o.output_type == "stream" and o.name == "stderr")
                                     for o in cell.get("outputs", []))
        scores[key] = 0.0 if failed else max_points
    return scores


def gradebook_cells(course: Course, assignment: str, *, repair: bool) -> list[str]:
    """Where the gradebook's copy of the test cells (source, checksum, points) is not what source/ and the release
    say; with `repair`, make it so. Grading never reads these rows; Formgrader shows them."""
    problems = []
    points = release_points(course, assignment)
    masters = {(path.stem, nbgrader_meta(c)["grade_id"]): c for path in course.source_notebooks(assignment)
               for c in read_notebook(path).cells if is_test_cell(c)}
    released = {(path.stem, nbgrader_meta(c)["grade_id"]): c for path in sorted((course.release / assignment).glob("*.ipynb"))
                for c in read_notebook(path).cells if is_test_cell(c)}
    with sqlite3.connect(course.gradebook, timeout=120) as db:
        rows = db.execute(
            "select sc.id, n.name, sc.name, sc.source, sc.checksum, gc.max_score, gc.id from source_cell sc"
            " join notebook n on sc.notebook_id = n.id join assignment a on n.assignment_id = a.id"
            " left join base_cell b on b.notebook_id = n.id and b.name = sc.name and b.type = 'GradeCell'"
            " left join grade_cells gc on gc.id = b.id where a.name = ?", (assignment,)).fetchall()
        for sid, notebook, name, source, checksum, max_score, gid in rows:
            key = (notebook, name)
            if key not in masters or key not in released:
                continue
            cell = released[key].copy()
            cell.source = masters[key].source  # the gradebook holds the test with its hidden part
            want = (masters[key].source, compute_checksum(cell), points[key])
            if (source, checksum, max_score) == want:
                continue
            problems.append(f"gradebook.db's copy of test cell {name} differed from source/"
                            + (" (repaired)" if repair else ""))
            if repair:
                db.execute("update source_cell set source = ?, checksum = ? where id = ?", (want[0], want[1], sid))
                if gid is not None:
                    db.execute("update grade_cells set max_score = ? where id = ?", (want[2], gid))
    return problems


class Guard:
    """After each submission: the course's files and every other grade in the gradebook are as they were.

    Without the sandbox a kernel runs with the grader's own rights and could rewrite nbgrader_config.py,
    lecturelib or the gradebook: changed files and grades are put back and the submission is reported.
    """

    def __init__(self, course: Course) -> None:
        self.db = course.gradebook
        self.files = {p: p.read_bytes() for p in course_files(course)}
        self.grades = {row[0]: (row[1], row[2], *row[5:]) for row in _rows(self.db)}
        self.lock = threading.Lock()

    def verify(self, current: Pair, in_flight: set[Pair]) -> dict[Pair, list[str]]:
        """Put back what changed since the last check, and say so to every submission that was running then.

        With several workers, the change happened while `current` or one of `in_flight` ran: each of them
        is told, with the others named (`audit` then shows which one's code did it).
        """
        found = []
        changed = [p for p, data in self.files.items() if not p.exists() or p.read_bytes() != data]
        for p in changed:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(self.files[p])
        if changed:
            found.append(f"(restored): {', '.join(p.name for p in changed)}")
        restore = []
        for gid, student, assignment, _, _, auto, manual, extra in _rows(self.db):
            # a row created since the last check: autograding never sets manual grades or extra credit
            old = self.grades.get(gid, (student, assignment, auto, None, None))
            running = (student, assignment) == current or (student, assignment) in in_flight
            if (manual, extra) != old[3:] or (not running and auto != old[2]):
                restore.append((auto if running else old[2], old[3], old[4], gid))
        if restore:
            with sqlite3.connect(self.db, timeout=120) as db:
                db.executemany("update grade set auto_score=?, manual_score=?, extra_credit=? where id=?", restore)
            found.append(f"({len(restore)} grades restored): the gradebook")
        self.grades.update({row[0]: (row[1], row[2], *row[5:]) for row in _rows(self.db) if (row[1], row[2]) == current})
        suspects = {current} | in_flight
        return {
            s: ["course files or grades changed while it was graded"
                + (f" alongside {', '.join(sorted(o[0] for o in suspects - {s}))}" if len(suspects) > 1 else "")
                + f" {what}" for what in found]
            for s in suspects
        } if found else {}


class RunCheck:
    """The whole run, checked after its last submission: every student's grades, submitted/ and autograded/.

    * submitted/ is what it was when the run started (its copy is kept in the run's state folder): any file
      changed or gone is restored.
    * autograded/ of a submission graded in this run is what its nbgrader wrote (checked right after it ended);
      of any other, what it was when the run started. A change is reported (grade it again).
    * The gradebook's autograded scores of a submission graded in this run are the scores recomputed from its
      graded notebook; of a submission that could not be graded, 0; of every other, what they were. Any
      other value is set back and reported.
    """

    def __init__(self, course: Course, kept_submitted: Path) -> None:
        self.course, self.kept = course, kept_submitted
        self.autograded = digest(course.autograded)
        self.grades = {row[0]: row for row in _rows(course.gradebook)}
        self.written: dict[Pair, dict[str, str]] = {}  # autograded/ files as each submission's nbgrader left them
        self.expected: dict[Pair, dict[tuple[str, str], float]] = {}  # recomputed autograded scores
        self.lock = threading.Lock()

    def graded(self, pair: Pair, ok: bool) -> None:
        """Right after one submission's nbgrader ended: what it wrote, and the scores it should have saved."""
        folder = self.course.autograded / pair[0] / pair[1]
        with self.lock:
            self.written[pair] = digest(folder)
            self.expected[pair] = recompute(self.course, *pair) if ok else {}

    def finish(self) -> tuple[dict[Pair, list[str]], list[str]]:
        """Verify and repair; return problems by submission, and problems of submissions not graded in this run."""
        by_pair: dict[Pair, list[str]] = {}
        others: list[str] = []

        def tell(pair: Pair, text: str) -> None:
            if pair in self.written:
                by_pair.setdefault(pair, []).append(text)
            else:
                others.append(f"{pair[0]}/{pair[1]}: {text}")

        # submitted/: restore from the copy taken when the run started
        if self.kept.is_dir():
            for kept in regular_files(self.kept):
                rel = kept.relative_to(self.kept)
                live = self.course.submitted / rel
                if live.is_symlink() or not live.is_file() or file_hash(live) != file_hash(kept):
                    live.parent.mkdir(parents=True, exist_ok=True)
                    if live.is_symlink() or live.exists():
                        live.unlink()  # never write through a link
                    shutil.copy2(kept, live)
                    tell((rel.parts[0], rel.parts[1]) if len(rel.parts) > 2 else ("?", str(rel)),
                         f"submitted file {rel.name} was changed during the run (restored)")
        # autograded/
        now = digest(self.course.autograded)
        for pair, files in self.written.items():
            prefix = f"{pair[0]}/{pair[1]}/"
            mine = {k[len(prefix):]: v for k, v in now.items() if k.startswith(prefix)}
            if mine != files:
                tell(pair, "its autograded/ notebook changed after it was graded: grade it again")
        graded_prefixes = tuple(f"{s}/{a}/" for s, a in self.written)
        before = {k: v for k, v in self.autograded.items() if not k.startswith(graded_prefixes)}
        after = {k: v for k, v in now.items() if not k.startswith(graded_prefixes)}
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                parts = key.split("/")
                tell((parts[0], parts[1] if len(parts) > 1 else "?"), f"autograded/{key} changed during the run: grade it again")
        # grades
        fix, zeroed, tests = [], set(), {}
        for gid, student, assignment, notebook, cell, auto, manual, extra in _rows(self.course.gradebook):
            pair = (student, assignment)
            if assignment not in tests:
                tests[assignment] = release_points(self.course, assignment)
            if pair in self.expected and (notebook, cell) in tests[assignment]:
                want = self.expected[pair].get((notebook, cell), 0.0)  # nothing expected: it could not be graded
            elif pair in self.expected:
                continue  # a manually graded cell: autograding leaves it alone
            else:
                old = self.grades.get(gid)
                want = old[5] if old else auto
            if want == auto or (auto is None and not self.expected.get(pair, True)):
                continue
            fix.append((want, gid))
            if pair in self.expected and not self.expected[pair]:
                zeroed.add(pair)
            else:
                tell(pair, f"the gradebook's score of {cell} was {auto}, not {want} (set to {want})")
        for pair in sorted(zeroed):
            tell(pair, "its earlier autograded scores were set to 0: it could not be graded now")
        if fix:
            with sqlite3.connect(self.course.gradebook, timeout=120) as db:
                db.executemany("update grade set auto_score = ? where id = ?", fix)
        return by_pair, others
