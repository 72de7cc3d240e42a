"""lecturelib.course.term.collect and roster: LMS downloads become submissions of the roster's students.

Canvas's and Moodle's names decide who an upload is from (their own ids, mapped onto the roster); a name the student
typed inside the file name never does; an id the roster lacks is refused, saying how to add the student. No kernel
runs here: a toy course, a gradebook holding a roster, and the download as each LMS names it. The roster itself:
imported as a spreadsheet saves it, every row checked, names kept as text whichever command writes them, and the
README's commands run exactly as printed from a shell without the venv on PATH.
"""

from __future__ import annotations

import copy
import io
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from lecturelib.course.__main__ import main
from lecturelib.course.term.collect import Releases, collect_downloads, lms_name
from lecturelib.course.layout import Course, alembic_head, nbgrader_meta, scripts_on_path, write_notebook
from lecturelib.course.term.roster import EscapeNames, read_roster, read_roster_csv, read_worksheet
from test_course_build import toy

ROOT = Path(__file__).resolve().parents[1]

ASSIGNMENT = "01_toy"
NOTEBOOK = f"{ASSIGNMENT}.ipynb"
ROSTER = [  # id, first, last, email, lms_user_id (Canvas's user id)
    ("ann", "Ann", "Lee", "ann@example.edu", "101"),
    ("bo", "Bo", "Lank", "Bo.Lank@example.edu", "102"),
    ("victim", "Vic", "Tim", "vic@example.edu", "103"),
]
# Moodle's grading worksheet of this assignment: its participant numbers are drawn per assignment
WORKSHEET = ("Identifier,Full name,Email address,Status,Grade,Maximum grade,Grade can be changed,"
             "Last modified (submission),Last modified (grade),Feedback comments\n"
             "Participant 7001,Ann Lee,ann@example.edu,Submitted for grading,,10.00,Yes,,-,\n"
             "Participant 7002,Bo Lank,bo.lank@example.edu,Submitted for grading,,10.00,Yes,,-,\n"
             "Participant 7003,Vic Tim,vic@example.edu,No submission,,10.00,Yes,-,-,\n"
             "Participant 7004,New Comer,new@example.edu,Submitted for grading,,10.00,Yes,,-,\n")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A course with the toy assignment released, and a gradebook that holds the roster (nbgrader's own schema)."""
    from nbgrader.api import Gradebook

    root = tmp_path_factory.mktemp("collect")
    write_notebook(toy(), root / "source" / ASSIGNMENT / NOTEBOOK)
    write_notebook(toy(), root / "notebooks" / ASSIGNMENT / NOTEBOOK)
    scripts_on_path()  # nbgrader runs `alembic` by name
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gb:
        for sid, first, last, email, lms_user_id in ROSTER:
            gb.add_student(sid, first_name=first, last_name=last, email=email, lms_user_id=lms_user_id)
    return root


@pytest.fixture
def course(template: Path, tmp_path: Path) -> Course:
    shutil.copytree(template, tmp_path / "course")
    return Course(tmp_path / "course")


def archive(course: Course) -> Path:
    folder = course.root / "downloaded" / ASSIGNMENT / "archive"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def zipped(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for name, data in files.items():
            z.writestr(name, data)
    return buffer.getvalue()


def submitted(course: Course) -> dict[str, bytes]:
    """student -> the notebook collected for them."""
    return {p.parts[-3]: p.read_bytes() for p in sorted(course.submitted.glob(f"*/{ASSIGNMENT}/{NOTEBOOK}"))}


def test_the_roster_is_read_as_nbgrader_stores_it(course: Course) -> None:
    roster = read_roster(course.gradebook)
    assert roster.ids == {"ann", "bo", "victim"}
    assert roster.by_lms_user_id == {"101": ["ann"], "102": ["bo"], "103": ["victim"]}
    assert roster.by_email["bo.lank@example.edu"] == ["bo"]  # emails compare without case
    assert read_roster(course.root / "nothing.db").ids == set()


@pytest.mark.parametrize("name, key, file, who, late", [
    ("leeann_101_9001_01_toy.ipynb", "101", "01_toy.ipynb", "leeann", False),
    ("leeann_LATE_101_9001_ann--01_toy.ipynb", "101", "ann--01_toy.ipynb", "leeann", True),
    ("leeann_late_101_9001_01_toy-1.ipynb", "101", "01_toy-1.ipynb", "leeann", True),
    ("o_brienpat_104_9004_01_toy.ipynb", "104", "01_toy.ipynb", "o_brienpat", False),  # Canvas keeps `_` in names
    # the name part stops at the first _DIGITS_DIGITS_ (Canvas keeps `_DIGITS_` out of names): a student's own file
    # name that imitates Canvas's does not move the id
    ("leeann_101_9001_victim_103_9003_01_toy.ipynb", "101", "victim_103_9003_01_toy.ipynb", "leeann", False),
])
def test_canvas_names_give_the_canvas_user_id(name: str, key: str, file: str, who: str, late: bool) -> None:
    named = lms_name(name, "canvas")
    assert named is not None and (named.key, named.file, named.who, named.late) == (key, file, who, late)


@pytest.mark.parametrize("name, key, file, who, plugin", [
    ("Bo Lank_7002_assignsubmission_file_/01_toy.ipynb", "7002", "01_toy.ipynb", "Bo Lank", "file"),
    ("Bo Lank_7002_assignsubmission_file_/work/bo--01_toy.ipynb", "7002", "bo--01_toy.ipynb", "Bo Lank", "file"),
    ("Bo Lank_7002_assignsubmission_file_01_toy.ipynb", "7002", "01_toy.ipynb", "Bo Lank", "file"),  # not in folders
    ("Bo Lank_7002_assignsubmission_onlinetext_/onlinetext.html", "7002", "onlinetext.html", "Bo Lank", "onlinetext"),
])
def test_moodle_names_give_the_participant_number(name: str, key: str, file: str, who: str, plugin: str) -> None:
    named = lms_name(name, "moodle")
    assert named is not None and (named.key, named.file, named.who, named.plugin) == (key, file, who, plugin)


def test_canvas_download_maps_user_ids_to_the_roster(course: Course) -> None:
    """Canvas's submissions.zip and a file taken out of it: each upload is filed under the roster student whose
    lms_user_id is the Canvas user id; a late mark without a time is reported; a Canvas user the roster lacks is
    refused, naming the id and how to add them; the others are collected all the same."""
    nb = (course.release / ASSIGNMENT / NOTEBOOK).read_bytes()
    folder = archive(course)
    (folder / "submissions.zip").write_bytes(zipped({
        "leeann_LATE_101_9001_ann--01_toy.ipynb": nb,
        "lankbo_102_9002_work.zip": zipped({f"work/{NOTEBOOK}": nb}),
        "comernew_555_9005_01_toy.ipynb": nb,
    }))
    (folder / "timvic_103_9003_01_toy (1).ipynb").write_bytes(nb)  # unpacked, renamed by the browser
    notes: list[str] = []
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="canvas", notes=notes)
    assert sorted(submitted(course)) == ["ann", "bo", "victim"], problems
    assert [c.split(":")[0] for c in collected] == ["ann", "bo", "victim"]
    (refused,) = problems
    assert "comernew_555_9005_01_toy.ipynb: refused: Canvas user 555 (comernew) is not in the roster" in refused
    assert "nbgrader db student add ID" in refused and "--lms-user-id=555" in refused
    assert any(n.startswith("ann: Canvas marks the upload LATE but gives no time") for n in notes), notes
    assert not list(course.submitted.glob("*/*/timestamp.txt"))


def test_moodle_download_maps_participants_through_the_worksheet_to_the_roster(course: Course) -> None:
    """Moodle's per-student folders, unpacked or in its zip, and a flat file: the participant number (drawn per
    assignment) is found in the assignment's grading worksheet, and its email in the roster."""
    nb = (course.release / ASSIGNMENT / NOTEBOOK).read_bytes()
    folder = archive(course)
    (folder / "Ann Lee_7001_assignsubmission_file_").mkdir()
    (folder / "Ann Lee_7001_assignsubmission_file_" / "ann--01_toy.ipynb").write_bytes(nb)
    (folder / "Ann Lee_7001_assignsubmission_onlinetext_").mkdir()
    (folder / "Ann Lee_7001_assignsubmission_onlinetext_" / "onlinetext.html").write_text("<p>hi</p>")
    (folder / "Vic Tim_7003_assignsubmission_file_01_toy.ipynb").write_bytes(nb)
    (folder / "course-01_toy-55.zip").write_bytes(zipped({
        "Bo Lank_7002_assignsubmission_file_/01_toy-1.ipynb": nb,
        "New Comer_7004_assignsubmission_file_/01_toy.ipynb": nb,
        "Who Ever_7999_assignsubmission_file_/01_toy.ipynb": nb,
    }))
    (course.root / "downloaded" / ASSIGNMENT / "worksheet.csv").write_text(WORKSHEET)
    notes: list[str] = []
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="moodle", notes=notes)
    assert sorted(submitted(course)) == ["ann", "bo", "victim"], problems
    assert len(problems) == 2, problems
    assert "New Comer_7004_assignsubmission_file_/01_toy.ipynb: refused: new@example.edu (Moodle's participant " \
           "7004, New Comer) is not in the roster" in problems[0] and "--email=new@example.edu" in problems[0]
    assert "Who Ever_7999_assignsubmission_file_/01_toy.ipynb: refused: Moodle's participant 7999 (Who Ever) is " \
           "not in downloaded/01_toy/worksheet.csv" in problems[1]
    assert any("onlinetext" in n and "not collected" in n for n in notes), notes


def test_moodle_without_the_worksheet_says_what_to_download(course: Course) -> None:
    (archive(course) / "Ann Lee_7001_assignsubmission_file_01_toy.ipynb").write_bytes(
        (course.release / ASSIGNMENT / NOTEBOOK).read_bytes())
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="moodle")
    assert collected == [] and len(problems) == 1 and not course.submitted.exists()
    assert problems[0].startswith("no Moodle grading worksheet in downloaded/01_toy/worksheet.csv: Moodle's download "
                                  "names students by participant numbers drawn for this assignment only"), problems
    (course.root / "downloaded" / ASSIGNMENT / "worksheet.csv").write_text("id,name\n1,x\n")
    (problem,) = collect_downloads(course, ASSIGNMENT, lms="moodle")[1]
    assert "(worksheet.csv: not Moodle's grading worksheet" in problem


def test_a_name_typed_by_a_student_never_files_an_upload_under_another_student(course: Course) -> None:
    """Mallory (Canvas user 101 is ann here; Moodle participant 7002 is bo) names her files and zip members after
    the victim: they land in her own folder, with a note; the victim's own submission is the victim's."""
    nb = (course.release / ASSIGNMENT / NOTEBOOK).read_bytes()
    victim = nb + b"\n"  # the victim's own notebook, told apart
    folder = archive(course)
    (folder / "leeann_101_9001_victim--01_toy.ipynb").write_bytes(nb)
    (folder / "timvic_103_9003_01_toy.ipynb").write_bytes(victim)
    notes: list[str] = []
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="canvas", notes=notes)
    assert problems == [] and submitted(course) == {"ann": nb, "victim": victim}
    assert any("names 'victim'; collected as ann's" in n for n in notes), notes
    # a zip member, through Moodle
    shutil.rmtree(course.root / "downloaded")
    folder = archive(course)
    (course.root / "downloaded" / ASSIGNMENT / "worksheet.csv").write_text(WORKSHEET)
    (folder / "Bo Lank_7002_assignsubmission_file_").mkdir()
    (folder / "Bo Lank_7002_assignsubmission_file_" / "x.zip").write_bytes(zipped({f"victim--{NOTEBOOK}": nb}))
    notes = []
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="moodle", notes=notes)
    assert problems == [] and submitted(course) == {"ann": nb, "bo": nb, "victim": victim}
    assert any("names 'victim'; collected as bo's" in n for n in notes), notes
    # files named by hand (STUDENT--FILE): the name is all there is, so naming a second student refuses the upload
    shutil.rmtree(course.root / "downloaded")
    (archive(course) / f"ann--victim--{NOTEBOOK}").write_bytes(nb)
    collected, problems = collect_downloads(course, ASSIGNMENT, force=True)
    assert collected == [] and "names another student (victim)" in problems[0]
    assert submitted(course)["victim"] == victim


def test_canvas_or_moodle_without_a_roster_collects_nothing_and_says_why(course: Course) -> None:
    course.gradebook.unlink()
    (archive(course) / "leeann_101_9001_01_toy.ipynb").write_bytes((course.release / ASSIGNMENT / NOTEBOOK).read_bytes())
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="canvas")
    assert collected == [] and len(problems) == 1 and "no roster in gradebook.db" in problems[0]
    assert ".venv/bin/python -m lecturelib.course roster roster.csv" in problems[0] and not course.gradebook.exists()


def test_submission_times_come_from_timestamps_csv(course: Course) -> None:
    """timestamps.csv (roster id, time) becomes each submission's timestamp.txt, where nbgrader reads it; a line
    nbgrader could not read is reported; files named by hand for a student the roster lacks get a note."""
    nb = (course.release / ASSIGNMENT / NOTEBOOK).read_bytes()
    (course.root / "downloaded" / ASSIGNMENT).mkdir(parents=True)
    (course.root / "downloaded" / ASSIGNMENT / "timestamps.csv").write_text(
        "student,timestamp\nann,2026-12-01 18:05:00 UTC\nbo,yesterday-ish\n")
    for student in ("ann", "bo", "stranger"):
        (archive(course) / f"{student}--{NOTEBOOK}").write_bytes(nb)
    notes: list[str] = []
    collected, problems = collect_downloads(course, ASSIGNMENT, notes=notes)
    assert (course.submitted / "ann" / ASSIGNMENT / "timestamp.txt").read_text() == "2026-12-01 18:05:00 UTC\n"
    assert not (course.submitted / "bo" / ASSIGNMENT / "timestamp.txt").exists()
    assert problems == ["downloaded/01_toy/timestamps.csv line 3: not `student,timestamp` with a time nbgrader reads "
                        "(e.g. `ann,2026-12-01 18:05:00 UTC`): that student gets no submission time"]
    assert "ann: 01_toy.ipynb (submitted 2026-12-01 18:05:00 UTC)" in collected
    assert [n for n in notes if n.startswith("stranger: not in the roster")], notes


def test_links_in_a_moodle_folder_are_refused(course: Course) -> None:
    folder = archive(course) / "Bo Lank_7002_assignsubmission_file_"
    folder.mkdir()
    os.symlink(course.source / ASSIGNMENT / NOTEBOOK, folder / NOTEBOOK)
    os.symlink(course.source / ASSIGNMENT, folder / "src")
    (course.root / "downloaded" / ASSIGNMENT / "worksheet.csv").write_text(WORKSHEET)
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="moodle")
    assert collected == [] and not course.submitted.exists()
    assert sum("refused (bo): it is a symbolic link" in p for p in problems) == 2, problems


def test_collect_cli_prints_what_it_collected_refused_and_noted(course: Course, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    (course.root / "nbgrader_config.py").write_text("")  # the course root, for the command
    monkeypatch.chdir(course.root)
    nb = (course.release / ASSIGNMENT / NOTEBOOK).read_bytes()
    (archive(course) / "leeann_LATE_101_9001_01_toy.ipynb").write_bytes(nb)
    assert main(["collect", ASSIGNMENT, "--lms", "canvas"]) == 0
    out = capsys.readouterr().out
    assert "collected ann: 01_toy.ipynb" in out and "Canvas marks the upload LATE" in out
    assert "collected 1 submission into submitted/" in out
    (archive(course) / "doejohn_999_9009_01_toy.ipynb").write_bytes(nb)
    assert main(["collect", ASSIGNMENT, "--lms", "canvas"]) == 1
    out = capsys.readouterr().out
    assert "Canvas user 999 (doejohn) is not in the roster" in out and "ann: already in submitted/" in out


def test_worksheet_reads_moodles_export(tmp_path: Path) -> None:
    path = tmp_path / "worksheet.csv"
    path.write_bytes(b"\xef\xbb\xbf" + WORKSHEET.encode())  # Moodle writes a byte-order mark
    participants, problem = read_worksheet(path)
    assert problem == "" and participants["7002"] == "bo.lank@example.edu" and len(participants) == 4


def test_nested_zips_and_paths_outside_are_refused_in_canvas_and_moodle_downloads(course: Course,
                                                                                   tmp_path: Path) -> None:
    """A student's zip holding a zip, and members whose path leaves the archive (in the bulk download or in a
    student's zip), are refused before anything is extracted, each costing only its own upload; nothing lands
    outside submitted/."""
    nb = (course.release / ASSIGNMENT / NOTEBOOK).read_bytes()
    folder = archive(course)
    (folder / "submissions.zip").write_bytes(zipped({
        "leeann_101_9001_01_toy.ipynb": nb,  # ann's, collected
        "lankbo_102_9002_work.zip": zipped({"inner.zip": zipped({NOTEBOOK: nb})}),
        "../../timvic_103_9003_01_toy.ipynb": nb,
        "timvic_103_9003_x.zip": zipped({f"../../{NOTEBOOK}": nb}),
    }))
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="canvas")
    assert sorted(submitted(course)) == ["ann"], problems
    text = "\n".join(problems)
    for member, why in (("lankbo_102_9002_work.zip", "(bo): 'inner.zip': an archive inside an archive (not opened)"),
                        ("../../timvic_103_9003_01_toy.ipynb", "(timvic): a path outside the archive"),
                        ("timvic_103_9003_x.zip", "(victim): '../../01_toy.ipynb': a path outside the archive")):
        assert f"archive/submissions.zip: {member}: refused " in text and why in text, (member, why, text)
    shutil.rmtree(course.root / "downloaded")
    folder = archive(course)
    (course.root / "downloaded" / ASSIGNMENT / "worksheet.csv").write_text(WORKSHEET)
    (folder / "course-01_toy-55.zip").write_bytes(zipped({
        "Bo Lank_7002_assignsubmission_file_/../../01_toy.ipynb": nb,
        "Vic Tim_7003_assignsubmission_file_/work.zip": zipped({"work/inner.zip": zipped({NOTEBOOK: nb})}),
    }))
    collected, problems = collect_downloads(course, ASSIGNMENT, lms="moodle", force=True)
    assert collected == [] and len(problems) == 2, problems
    assert "Bo Lank_7002_assignsubmission_file_/../../01_toy.ipynb: refused (Bo Lank): " in problems[0]
    assert "'work/inner.zip': an archive inside an archive" in problems[1]
    assert sorted(submitted(course)) == ["ann"]
    assert not list(course.root.parent.glob(NOTEBOOK)) and not list(tmp_path.glob(NOTEBOOK))


# -- whose notebook, whose id ------------------------------------------------------------------------------------------


def other_assignment():  # type: ignore[no-untyped-def]
    """Another assignment's release: the toy with its exercise renamed (graded cells ex2_*, as notebook ids go)."""
    nb = copy.deepcopy(toy())
    for cell in nb.cells:
        meta = cell.metadata["nbgrader"]
        meta["grade_id"] = meta["grade_id"].replace("ex1_", "ex2_")
    return nb


def test_a_notebook_of_another_assignment_is_refused_naming_it(course: Course) -> None:
    """Issue 33, item 5: notebook 02 uploaded as 01's (renamed by the student) would be graded 0, every cell restored."""
    write_notebook(other_assignment(), course.release / "02_other" / "02_other.ipynb")
    (archive(course) / f"ann--{NOTEBOOK}").write_bytes((course.release / "02_other" / "02_other.ipynb").read_bytes())
    (archive(course) / f"bo--{NOTEBOOK}").write_bytes((course.release / ASSIGNMENT / NOTEBOOK).read_bytes())
    collected, problems = collect_downloads(course, ASSIGNMENT)
    assert collected == ["bo: 01_toy.ipynb"]
    assert problems == [f"archive/ann--{NOTEBOOK}: refused (ann): {NOTEBOOK}: it is the notebook of 02_other (its graded "
                        "cells are 02_other's), not of 01_toy: the student must upload 01_toy's notebook"]
    releases = Releases(course)  # `intro`, `setup` stand in both: only ex1_* and ex2_* tell them apart
    assert releases.own == {"01_toy": {"ex1_1", "ex1_1_test"}, "02_other": {"ex2_1", "ex2_1_test"}}
    assert releases.owner(ASSIGNMENT, b"not json") == ""


def test_an_id_typed_in_another_case_is_the_roster_s(course: Course) -> None:
    """Issue 33, item 6: `Ann--01_toy.ipynb` is ann's (with a note), never a new student; two candidates: asked."""
    nb = (course.release / ASSIGNMENT / NOTEBOOK).read_bytes()
    (archive(course) / f"Ann--{NOTEBOOK}").write_bytes(nb)
    notes: list[str] = []
    collected, problems = collect_downloads(course, ASSIGNMENT, notes=notes)
    assert (collected, problems) == (["ann: 01_toy.ipynb"], [])
    assert notes == [f"archive/Ann--{NOTEBOOK}: collected as ann's, the roster's id ('Ann' differs only in case)"]
    with sqlite3.connect(course.gradebook) as db:  # a gradebook from before the roster's checks: both spellings
        db.execute("insert into student (id) values ('BO')")
    (archive(course) / f"Ann--{NOTEBOOK}").unlink()
    (archive(course) / f"bO--{NOTEBOOK}").write_bytes(nb)
    collected, problems = collect_downloads(course, ASSIGNMENT)
    assert collected == [] and problems == [f"archive/bO--{NOTEBOOK}: refused: 'bO' is not in the roster; did you mean "
                                            "BO or bo? (rename the file, then collect again)"]


# -- the roster ---------------------------------------------------------------------------------------------------------

ROSTER_CSV = "id,first_name,last_name,email,lms_user_id\r\nann,Ann,Lee,ann@example.edu,101\r\nbo,Bo,Lank,,102\r\n"
HOSTILE = "<img src=x onerror=\"window.__lecturelib_xss='roster'\">"  # issue 32, item 4: a last name from the roster


@pytest.mark.parametrize("data", [
    ROSTER_CSV.encode(),  # CRLF, as Excel writes
    b"\xef\xbb\xbf" + ROSTER_CSV.encode(),  # Excel's "CSV UTF-8": a byte-order mark (nbgrader read '\ufeffid')
    b"\xef\xbb\xbf" + ROSTER_CSV.replace(",", ";").replace("first_name", "First Name").encode(),  # a locale's `;`
])
def test_roster_reads_what_a_spreadsheet_saves(tmp_path: Path, data: bytes) -> None:
    """Issue 33, item 9."""
    (tmp_path / "roster.csv").write_bytes(data)
    entries, problems = read_roster_csv(tmp_path / "roster.csv")
    assert problems == []
    assert [(e.line, e.id, e.first_name, e.last_name, e.email, e.lms_user_id) for e in entries] == [
        (2, "ann", "Ann", "Lee", "ann@example.edu", "101"), (3, "bo", "Bo", "Lank", None, "102")]


def test_roster_command_imports_an_excel_roster(course: Course, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    (course.root / "nbgrader_config.py").write_text("")
    (course.root / "roster.csv").write_bytes(b"\xef\xbb\xbf" + ROSTER_CSV.replace("Lank", "Lank-Smith").encode()
                                             + b"cy,Cy,Ng,,104\r\n")
    monkeypatch.chdir(course.root)
    assert main(["roster", "roster.csv"]) == 0
    assert capsys.readouterr().out.strip() == "imported 3 students from roster.csv into gradebook.db (1 new, 2 updated)"
    with sqlite3.connect(course.gradebook) as db:
        assert db.execute("select id, last_name, lms_user_id from student order by id").fetchall() == [
            ("ann", "Lee", "101"), ("bo", "Lank-Smith", "102"), ("cy", "Ng", "104"), ("victim", "Tim", "103")]
    (course.root / "roster.csv").write_bytes("id,first_name\nann,Ann\n".encode("cp1252") + "zoë,Zoë\n".encode("cp1252"))
    assert main(["roster", "roster.csv"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "roster.csv: not UTF-8 text: save it from the spreadsheet as CSV UTF-8 (Excel: File > Save As > CSV UTF-8 "
        "(Comma delimited))")


def test_roster_refuses_markup_and_ids_that_are_not_plain_and_imports_nothing(
        course: Course, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (course.root / "nbgrader_config.py").write_text("")
    (course.root / "roster.csv").write_text(
        "id,first_name,last_name,email,lms_user_id\n"
        f'mallory,Mal,"{HOSTILE.replace(chr(34), chr(34) * 2)}",mal@example.edu,104\n'
        "eve,Eve,Tab,eve@example.edu,=1+1\n"
        "no one,No,One,,\n"
        "Ann,Ann,Again,,\n"  # the gradebook has ann
        "zed,Zed,Zed,zed@example.edu,105\n"
        "zed2,Zed,Zed,zed@example.edu,106\n"
        "fine,Fine,Person,,107\n"
        "dup,Dup,Licate,,103\n")  # victim's Canvas id
    monkeypatch.chdir(course.root)
    assert main(["roster", "roster.csv"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"roster.csv line 2: last_name {HOSTILE!r} holds '\"', '<', '>' (names are text, never markup)",
        "roster.csv line 3: lms_user_id '=1+1' is not an id (Canvas's user id is a number)",
        "roster.csv line 4: id 'no one' is not a student id: letters, digits and . _ @ + - (no space, no `--`), starting "
        "with a letter or digit",
        "roster.csv line 7: email 'zed@example.edu' is also on line 6",
        "roster.csv line 5: id 'Ann' differs only in case from 'ann', already in the gradebook (ids match without "
        "case): write 'ann'",
        "roster.csv line 9: lms_user_id '103' is victim's in the gradebook",
        "nothing imported: correct roster.csv, then import it again"]
    assert read_roster(course.gradebook).ids == {"ann", "bo", "victim"}


def readme_commands(step: str) -> list[str]:
    """The commands the README's instructor table (the Instructor guide's first) prints in the row of `step`, exactly
    as printed."""
    guide = (ROOT / "README.md").read_text().split("\n## Instructor guide\n", 1)[1]
    table = guide[guide.index("\n| step | command |"):].split("\n\n", 1)[0]
    (row,) = [line for line in table.splitlines() if line.startswith(f"| {step} |")]
    return [c for c in re.findall(r"`([^`]+)`", row) if c.startswith(".venv/bin/")]


def test_readme_roster_and_due_date_commands_work_without_the_venv_on_path(tmp_path: Path) -> None:
    """Issue 33, item 1, and issue 32, item 4: from a shell with PATH=/usr/bin:/bin, in a new course, nbgrader's own
    import creates gradebook.db (nbgrader runs `alembic` by name: the course's config finds it) and keeps a hostile
    last name as text; the course's import, the due date, and nbgrader's plain list then run as printed."""
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy2(ROOT / "nbgrader_config.py", root)
    write_notebook(toy(), root / "source" / ASSIGNMENT / NOTEBOOK)
    (root / ".venv").symlink_to(sys.prefix)  # the course's venv, where the README's commands find it
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "LANG": "C.UTF-8"}
    assert shutil.which("alembic", path=env["PATH"]) is None and shutil.which("nbgrader", path=env["PATH"]) is None
    shell = lambda command: subprocess.run(command, shell=True, cwd=root, env=env, capture_output=True,  # noqa: E731
                                           text=True, timeout=300)
    (root / "roster.csv").write_text(ROSTER_CSV + f'mallory,Mal,"{HOSTILE.replace(chr(34), chr(34) * 2)}",,104\r\n')
    imported = shell(".venv/bin/nbgrader db student import roster.csv")
    assert imported.returncode == 0, imported.stderr[-3000:]
    with sqlite3.connect(root / "gradebook.db") as db:
        assert db.execute("select version_num from alembic_version").fetchall() == [(alembic_head(),)]
        assert db.execute("select last_name from student where id = 'mallory'").fetchone() == (
            "\uff1cimg src=x onerror=\uff02window.__lecturelib_xss='roster'\uff02\uff1e",)
    assert "student mallory: last_name" in imported.stderr and "stored as" in imported.stderr
    (roster_command,) = readme_commands("roster")[:1]
    (root / "roster.csv").write_text(ROSTER_CSV.replace("Lank", "Lank-Updated"))
    done = shell(roster_command)
    assert done.returncode == 0 and done.stdout.strip().endswith(
        "imported 2 students from roster.csv into gradebook.db (0 new, 2 updated)"), done.stdout + done.stderr
    (due_command,) = readme_commands("due date")
    done = shell(due_command.replace("NN_topic", ASSIGNMENT))
    assert done.returncode == 0, done.stderr[-3000:]
    with sqlite3.connect(root / "gradebook.db") as db:
        assert db.execute("select duedate from assignment").fetchall() == [("2026-12-01 17:00:00.000000",)]
        assert db.execute("select last_name from student where id = 'bo'").fetchone() == ("Lank-Updated",)
    refused = shell(".venv/bin/nbgrader db student add 'x\";alert(1);//' --last-name=X")  # an id read into a script
    assert refused.returncode != 0 and "refused: letters, digits and . _ @ + - only" in refused.stdout + refused.stderr
    with sqlite3.connect(root / "gradebook.db") as db:
        assert db.execute("select count(*) from student").fetchone() == (3,)


def test_formgrader_page_gets_names_as_text() -> None:
    """EscapeNames (c.HTMLExporter.preprocessors): nbgrader's manual grading template prints these unescaped."""
    nb, resources = EscapeNames().preprocess(toy(), {"student": "mallory", "last_name": HOSTILE, "first_name": "Mal"})
    assert resources["last_name"] == "&lt;img src=x onerror=&quot;window.__lecturelib_xss=&#x27;roster&#x27;&quot;&gt;"
    assert (resources["student"], resources["first_name"]) == ("mallory", "Mal")


def test_formgrader_page_gets_the_names_the_gradebook_holds_now(tmp_path: Path) -> None:
    """Formgrader's session can hand the page a name from before a roster re-import (its objects still alive):
    EscapeNames reads the student's row again, and escapes it."""
    from traitlets.config import Config

    with sqlite3.connect(tmp_path / "gradebook.db") as db:
        db.execute("create table student (id varchar(128) primary key, first_name varchar(128), "
                   "last_name varchar(128))")
        db.execute("insert into student values ('mallory', 'Mal', ?)", (HOSTILE,))
        db.execute("insert into student values ('nameless', NULL, NULL)")
    config = Config()
    config.CourseDirectory.db_url = f"sqlite:///{tmp_path / 'gradebook.db'}?timeout=120"
    stale = {"student": "mallory", "last_name": "Old", "first_name": "Name"}
    _, resources = EscapeNames(config=config).preprocess(toy(), dict(stale))
    assert resources["last_name"] == "&lt;img src=x onerror=&quot;window.__lecturelib_xss=&#x27;roster&#x27;&quot;&gt;"
    assert (resources["student"], resources["first_name"]) == ("mallory", "Mal")
    _, resources = EscapeNames(config=config).preprocess(toy(), {**stale, "student": "nameless"})
    assert (resources["first_name"], resources["last_name"]) == (None, None)  # the page shows the id instead
    _, resources = EscapeNames(config=config).preprocess(toy(), {**stale, "student": "gone"})
    assert (resources["first_name"], resources["last_name"]) == ("Name", "Old")  # no row: what Formgrader had


PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")


@pytest.mark.parametrize("template", ["classic", "lab"])
@pytest.mark.parametrize("images", [False, True])
def test_feedback_exporter_writes_what_nbconvert_writes(template: str, images: bool) -> None:
    """FeedbackExporter (feedback pages) skips nbconvert's accessibility pass where it would change nothing: its page
    reads the same as HTMLExporter's (BeautifulSoup's reading of it is HTMLExporter's page), with or without
    images lacking alt text, in the classic template (feedback's) and the lab one (focusable areas)."""
    import nbformat
    from bs4 import BeautifulSoup
    from nbconvert.exporters import HTMLExporter

    from lecturelib.course.term.feedback import FeedbackExporter

    v4 = nbformat.v4
    nb = v4.new_notebook(cells=[
        v4.new_markdown_cell("# A page\nWith $x^2$, a <b>bold</b> word and `code`." + (
            "\n\n![a plot](data:image/png;base64," + PNG + ') <img src="x.png"> <IMG SRC="y.png" alt="y">'
            if images else "")),
        v4.new_code_cell("print('<img src=x>')  # text, not an image", outputs=[
            v4.new_output("stream", name="stdout", text="<img src=x>\n")]),
        v4.new_code_cell("plot()", outputs=[
            v4.new_output("display_data", data={"image/png": PNG, "text/plain": "<Figure>"})] if images else []),
    ])
    nb.metadata["language_info"] = {"name": "python", "pygments_lexer": "ipython3"}
    slow, _ = HTMLExporter(template_name=template).from_notebook_node(nb)
    fast, _ = FeedbackExporter(template_name=template).from_notebook_node(nb)
    assert str(BeautifulSoup(fast, features="html.parser")) == slow
    assert (fast == slow) == (images or template == "lab")  # where nothing changes, nbconvert's pass is skipped
    assert slow.count("No description has been provided for this image") == (2 if images else 0)


def test_rosters_are_never_committed() -> None:
    """Issue 33, item 11: names, emails and LMS ids stay out of git, wherever the instructor saves the roster."""
    for path in ("roster.csv", "roster-2026-fall.csv", "rosters/section-b.csv", "source/roster.csv"):
        done = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT)
        assert done.returncode == 0, path
