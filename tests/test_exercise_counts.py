"""The course's autograded points are earned by building (issue "Points only for building"): tests/exercise_counts.py."""

from exercise_counts import MAX_SHORT_SHARE, MIN_MECHANISM_SHARE, ROOT, Exercise, counts, exercises, markdown, written_points


def test_exercise_counts_meet_the_goals() -> None:
    c = counts(exercises())
    assert c.exercises > 0
    assert c.short_share <= MAX_SHORT_SHARE, f"{c.short} of {c.exercises} exercises have a solution of ≤ 3 lines"
    assert c.mechanism_share >= MIN_MECHANISM_SHARE, f"{c.mechanism_points:g} of {c.points:g} points on mechanisms"


def test_exercise_counts_classify_by_lines_and_loops() -> None:
    loop = Exercise("nb", "ex1_1", 6, 3.0, True)  # 6 lines with a loop: a mechanism
    short_loop = Exercise("nb", "ex1_2", 5, 2.0, True)  # a loop in 5 lines is still a formula
    long_formula = Exercise("nb", "ex1_3", 12, 1.0, False)
    tiny = Exercise("nb", "ex1_4", 3, 1.0, False)
    assert [e.mechanism for e in (loop, short_loop, long_formula, tiny)] == [True, False, False, False]
    c = counts([loop, short_loop, long_formula, tiny])
    assert (c.exercises, c.short, c.points, c.mechanism_points) == (4, 1, 7.0, 3.0)  # 3 + 2 + 1 + 1 = 7


def test_exercise_list_names_what_each_exercise_asks_for() -> None:
    table = markdown([Exercise("01_x", "ex1_2", 17, 4.0, True, ("read_bandwidth",))], {"01_x": 3.0})
    assert "| 01_x | **1.2 `read_bandwidth` (4)** | 3 |" in table


def test_readme_lists_the_exercises_as_the_masters_have_them() -> None:
    """README's exercise list is what `python tests/exercise_counts.py --markdown` prints now: regenerate it there."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert markdown(exercises(), written_points()) in readme
