"""`python -m lecturelib.course build|check|autograde|audit|feedback`: the instructor's commands."""

from __future__ import annotations

import argparse
import sys

from lecturelib.course.audit import audit, format_findings
from lecturelib.course.autograde import SUBMISSION_TIMEOUT_S, autograde, format_table
from lecturelib.course.build import build, check
from lecturelib.course.feedback import feedback
from lecturelib.course.layout import Course, find_root


def _assignments(course: Course, names: list[str]) -> list[str]:
    known = course.assignments()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown assignment {unknown[0]!r}; known: {', '.join(known)}")
    return names or known


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lecturelib.course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="regenerate notebooks/ (the release) and solutions/ from source/")
    p = sub.add_parser("check", help="fail on drift, stored outputs, bad grade_ids and tests that grade wrongly")
    p.add_argument("--no-execute", action="store_true", help="skip running the solution and the release")
    p = sub.add_parser("autograde", help="autograde every collected submission in parallel")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p.add_argument("--workers", type=int, default=1, help="submissions graded at once (default 1)")
    p.add_argument("--student", action="append", dest="students", metavar="ID", help="only this student (repeatable)")
    p.add_argument("--timeout", type=float, default=SUBMISSION_TIMEOUT_S, help="seconds one submission may take")
    p.add_argument("--cell-timeout", type=int, help="seconds one cell may take (default: nbgrader_config.py's)")
    p = sub.add_parser("audit", help="report submitted code that tampers with grading")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p = sub.add_parser("feedback", help="generate feedback that never shows hidden tests")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    args = parser.parse_args(argv)

    try:
        course = Course(find_root())
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    if args.command == "build":
        problems = build(course)
    elif args.command == "check":
        problems = check(course, run=not args.no_execute)
    elif args.command == "autograde":
        outcomes = autograde(course, _assignments(course, args.assignments), workers=args.workers,
                             students=args.students, timeout_s=args.timeout, cell_timeout_s=args.cell_timeout)
        print(format_table(outcomes) if outcomes else "no submissions in submitted/")
        return 1 if any(o.problems for o in outcomes) else 0
    elif args.command == "audit":
        print(format_findings(audit(course, _assignments(course, args.assignments))))
        return 0
    else:
        problems = feedback(course, _assignments(course, args.assignments))
    for problem in problems:
        print(problem)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
