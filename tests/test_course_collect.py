"""lecturelib.course.collect and roster: LMS downloads become submissions of the roster's students.

Canvas's and Moodle's names decide who an upload is from (their own ids, mapped onto the roster); a name the student
typed inside the file name never does; an id the roster lacks is refused, saying how to add the student. No kernel
runs here: a toy course, a gradebook holding a roster, and the download as each LMS names it.
"""

from __future__ import annotations

import io
import os
import shutil
import zipfile
from pathlib import Path

import pytest

from lecturelib.course.__main__ import main
from lecturelib.course.collect import collect_downloads, lms_name
from lecturelib.course.layout import Course, scripts_on_path, write_notebook
from lecturelib.course.roster import read_roster, read_worksheet
from test_course_build import toy

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
