"""`python -m lecturelib.course build|check|roster|collect|autograde|scheduler|worker|audit|feedback|grades|bundle`:
the instructor's commands."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Any

from lecturelib.course.grading import (
    DEFAULT_PORT,
    SUBMISSION_TIMEOUT_S,
    ClusterError,
    CredentialsError,
    RunLocked,
    SandboxUnavailable,
    autograde,
    format_table,
    printable,
)
from lecturelib.course.isolation import GIB, Limits, audit, format_findings
from lecturelib.course.layout import Course, find_root, repair_gradebook, scripts_on_path
from lecturelib.course.release import BundleError, build, bundle, check
from lecturelib.course.term import LMS_NAMES, collect_downloads, feedback, grades, roster


def _assignments(course: Course, names: list[str]) -> list[str]:
    known = course.assignments()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise SystemExit(f"unknown assignment {unknown[0]!r}; known: {', '.join(known)}")
    return names or known


def main(argv: list[str] | None = None) -> int:
    # nbclient's kernel-alive poller may end in an AssertionError once a kernel it ran is shut down (its client is
    # gone); asyncio would print that task's traceback in the instructor's terminal. It is never a notebook's problem.
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)
    parser = argparse.ArgumentParser(prog="python -m lecturelib.course", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="regenerate notebooks/ (the release) and solutions/ from source/")
    p = sub.add_parser("check", help="fail on drift, stored outputs, bad grade_ids and tests that grade wrongly")
    p.add_argument("--no-execute", action="store_true", help="skip running the solution and the release")
    p = sub.add_parser("roster", help="import the class roster (a CSV: id,first_name,last_name,email,lms_user_id) "
                                      "into the gradebook, every row checked first")
    p.add_argument("csv", metavar="ROSTER.csv")
    p = sub.add_parser("collect", help="collect the LMS's downloads in downloaded/ASSIGNMENT/archive/ into submitted/ "
                                       "(in place of nbgrader zip_collect)")
    p.add_argument("assignment", metavar="ASSIGNMENT")
    p.add_argument("--lms", choices=sorted(LMS_NAMES), default="course",
                   help="how the files are named: course (STUDENT--FILE, named by hand; the default), canvas (Canvas's "
                        "Download Submissions: its user ids, mapped to the roster's lms_user_id) or moodle (Moodle's "
                        "Download all submissions: its participant numbers, mapped to the roster by "
                        "downloaded/ASSIGNMENT/worksheet.csv, the assignment's grading worksheet)")
    p.add_argument("--force", action="store_true", help="replace a student's submission already in submitted/")
    p = sub.add_parser("autograde", help="autograde every collected submission in parallel")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p.add_argument("--workers", type=int, default=1, help="submissions graded at once (default 1)")
    p.add_argument("--student", action="append", dest="students", metavar="ID", help="only this student (repeatable)")
    p.add_argument("--timeout", type=float, default=SUBMISSION_TIMEOUT_S, help="seconds one submission may take")
    p.add_argument("--cell-timeout", type=int, help="seconds one cell may take (default: nbgrader_config.py's)")
    p.add_argument("--memory-limit", type=float, default=Limits().memory_bytes / GIB, metavar="GIB",
                   help="memory each process of a kernel's sandbox may allocate, in GiB (default %(default)g)")
    p.add_argument("--no-sandbox", action="store_true",
                   help="grade without the bubblewrap sandbox (where it cannot run): kernels then run with your rights")
    p.add_argument("--scheduler", metavar="tls://HOST:8786", default="",
                   help="grade on the workers of the course's scheduler (`course scheduler`, `course worker`) instead of here")
    p.add_argument("--credentials", metavar="DIR", help="the cluster's certificates (default: the course's cluster/)")
    p.add_argument("--force", action="store_true", help="grade again what has not changed since it was last graded "
                                                        "(its files, the release, the masters, lecturelib, the options)")
    p = sub.add_parser("scheduler", help="start the course's Dask scheduler: mutual TLS with the course's own certificate "
                                         "authority, made in cluster/ on first use (see README: Grading a large class)")
    p.add_argument("--host", default="", help="the address to listen on (default: every interface)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="the port (default %(default)s; 0: any free one)")
    p.add_argument("--credentials", metavar="DIR", help="the cluster's certificates (default: the course's cluster/)")
    p = sub.add_parser("worker", help="start a Dask worker that grades for this course (see README: Grading a large class)")
    p.add_argument("scheduler", metavar="tls://HOST:8786")
    p.add_argument("--nthreads", type=int, default=os.cpu_count() or 1,
                   help="submissions it grades at once (default: its cores, %(default)s)")
    p.add_argument("--name", help="the worker's name in the scheduler's logs")
    p.add_argument("--credentials", metavar="DIR", help="the cluster's certificates (default: the course's cluster/)")
    p = sub.add_parser("audit", help="report submitted code that tampers with grading")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p = sub.add_parser("feedback", help="generate feedback that never shows hidden tests")
    p.add_argument("assignments", nargs="*", metavar="ASSIGNMENT")
    p.add_argument("--student", action="append", metavar="ID", help="only this student's pages (repeatable)")
    p = sub.add_parser("bundle", help="write the students' course (no source/, solutions or hidden tests) into OUT")
    p.add_argument("out", metavar="OUT", help="a new or empty folder, or an earlier bundle (replaced; its .git kept)")
    p = sub.add_parser("grades", help="export grades for Canvas's gradebook import (exports/canvas-grades.csv)")
    p.add_argument("--assignment", action="append", dest="only", metavar="ASSIGNMENT", help="only this one (repeatable)")
    p.add_argument("--student", action="append", dest="students", metavar="ID", help="only this student (repeatable)")
    p.add_argument("--cells", action="store_true", help="a column per graded cell instead of per assignment")
    p.add_argument("--out", metavar="FILE.csv", help="where to write (default exports/canvas-grades[-cells].csv)")
    p.add_argument("--partial", action="store_true",
                   help="write a total even when a part of it (a written answer) is not graded yet (default: blank)")
    p.add_argument("--canvas-id", action="append", default=[], metavar="ASSIGNMENT=ID",
                   help="Canvas's id of an assignment (repeatable; default: canvas-ids.csv): its column is titled "
                        "'ASSIGNMENT (ID)', which Canvas matches by the id")
    args = parser.parse_args(argv)

    scripts_on_path()  # nbgrader runs `alembic` by name: no command needs an activated venv
    for sig in (signal.SIGTERM, signal.SIGHUP):  # end as Ctrl-C does: grading stopped, folders removed
        signal.signal(sig, _exit_on_signal)
    try:
        course = Course(find_root())
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    if args.command in ("scheduler", "worker") or (args.command == "autograde" and args.scheduler):
        try:
            _cluster_command(course, args)
        except CredentialsError as e:
            print(e, file=sys.stderr)
            return 2
        if args.command in ("scheduler", "worker"):
            return 0
    for note in repair_gradebook(course):
        print(note)
    if args.command == "build":
        kept: list[str] = []
        problems = build.build(course, notes=kept)
        for note in kept:
            print(printable(note))
        success = "built notebooks/ (the release) and solutions/ from source/"
    elif args.command == "check":
        problems = check(course, run=not args.no_execute)
        success = "the course is sound: " + ("no drift, every test grades the solution and the release as it should"
                                             if not args.no_execute else "no drift (the notebooks were not run)")
    elif args.command == "autograde":
        try:
            report = autograde.autograde(course, _assignments(course, args.assignments), workers=args.workers,
                               students=args.students, timeout_s=args.timeout, cell_timeout_s=args.cell_timeout,
                               sandboxed=not args.no_sandbox, limits=Limits(memory_bytes=int(args.memory_limit * GIB)),
                               scheduler=args.scheduler, credentials=args.credentials, progress_bar=True,
                               force=args.force)
        except (SandboxUnavailable, RunLocked, ClusterError, CredentialsError) as e:
            print(e, file=sys.stderr)
            return 2
        except KeyboardInterrupt as e:  # Ctrl-C: one line (run.Stopped says what is left), no traceback
            print(str(e) or "stopped; run it again", file=sys.stderr)
            return 130  # 128 + SIGINT, as a shell reports a command Ctrl-C ended
        print(format_table(report.outcomes) if report.outcomes else "no submissions in submitted/")
        for note in report.notes:
            print(printable(note))
        return 1 if any(o.problems for o in report.outcomes) else 0
    elif args.command == "collect":
        notes: list[str] = []
        collected, problems = collect_downloads(course, _assignments(course, [args.assignment])[0], lms=args.lms,
                                                force=args.force, notes=notes)
        for line in collected:
            print(f"collected {printable(line)}")
        for note in notes:
            print(printable(note))
        problems = [printable(p) for p in problems]
        success = f"collected {len(collected)} submission{'s' if len(collected) != 1 else ''} into submitted/"
    elif args.command == "grades":
        return _grades(course, args)
    elif args.command == "roster":
        done, problems = roster.import_roster(course.gradebook, Path(args.csv))
        success = "; ".join(done)
    elif args.command == "bundle":
        dirty: list[str] = []
        try:
            shown = bundle.bundle(course, Path(args.out), notes=dirty)
        except BundleError as e:
            print(f"no bundle written: {e}", file=sys.stderr)
            return 1 if "must not see" in str(e) else 2
        print(f"wrote the students' course to {args.out}: notebooks/ (the release), lecturelib (without course), "
              "jupyter/student, Makefile, README.md, requirements.txt; no hidden test, no solution")
        for module, assignments in shown.items():
            print(f"  {module} holds the reference of exercises of {', '.join(assignments)} (students may read it; "
                  "`course audit` flags answers that use it)")
        for note in dirty:
            print(printable(note))
        return 0
    elif args.command == "audit":
        print(format_findings(audit.audit(course, _assignments(course, args.assignments))))
        return 0
    else:
        names = _assignments(course, args.assignments)
        problems = feedback.feedback(course, names, args.student)
        pages = sorted(p for a in names for p in course.feedback.glob(f"*/{a}/*.html")
                       if args.student is None or p.parent.parent.name in args.student)
        for problem in problems:
            print(printable(problem))
        if pages:
            print(f"wrote {len(pages)} feedback {'page' if len(pages) == 1 else 'pages'} in feedback/ (no hidden test "
                  "shown)" + (f"; {len(problems)} {'problem' if len(problems) == 1 else 'problems'} above" if problems else ""))
        elif not problems:
            print("no autograded submissions: no feedback to write")
        return 1 if problems else 0
    for problem in problems:
        print(printable(problem))
    if not problems:
        print(success)
    return 1 if problems else 0


def _cluster_command(course: Course, args: argparse.Namespace) -> None:
    """`scheduler` and `worker` (which run until stopped), and the check of `autograde --scheduler`'s address and
    certificates; CredentialsError, in one line, where they are not the course's."""
    from lecturelib.course.grading import credentials

    folder = credentials.folder_of(course.root, args.credentials)
    if args.command == "scheduler":
        made = credentials.create(folder, args.host)
        if made:
            print(f"made {', '.join(made)} certificate{'s' if len(made) > 1 else ''} in {folder} (the course's own "
                  f"authority; copy ca.pem, worker.pem and worker.key to each worker machine's cluster/)", flush=True)
        credentials.serve(folder, args.host, args.port,
                          announce=lambda address: print(f"the course's scheduler listens on {address} (mutual TLS: "
                                                         f"only certificates of {folder / 'ca.pem'})", flush=True))
        return
    credentials.require_tls(args.scheduler)
    credentials.require(folder, "worker" if args.command == "worker" else "coordinator")
    if args.command == "worker":
        from lecturelib.course.grading import worker

        os.environ["LECTURELIB_COURSE"] = str(course.root)
        os.environ.update(credentials.WORKER_ENV)
        cmd = worker.command(args.scheduler, args.nthreads, args.name, [], folder)
        os.execv(cmd[0], cmd)  # the worker is `dask worker` itself: its signals, its exit status


def _grades(course: Course, args: argparse.Namespace) -> int:
    if not course.gradebook.is_file():
        print("no gradebook.db: autograde first", file=sys.stderr)
        return 2
    try:
        ids = {**grades.read_canvas_ids(course.root / grades.CANVAS_IDS), **grades.canvas_option(args.canvas_id)}
        table = grades.export(course, assignments=args.only, students=args.students, cells=args.cells,
                              partial=args.partial, canvas_ids=ids)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    default = course.exports / ("canvas-grades-cells.csv" if args.cells else "canvas-grades.csv")
    out = Path(args.out) if args.out else default
    grades.write(course, out, table)
    shown = out.resolve().relative_to(course.root) if out.resolve().is_relative_to(course.root) else out
    plural = lambda n, word: f"{n} {word}{'' if n == 1 else 's'}"  # noqa: E731
    print(f"wrote {shown}: {plural(len(table.rows), 'student')}, {plural(len(table.columns), 'column')} (Canvas "
          f"gradebook import); Notes: {plural(table.late, 'late submission')}, "
          f"{plural(table.ungraded, 'written answer')} not graded by hand yet")
    if table.blank:
        print(f"{plural(table.blank, 'total')} left blank: a written answer in {'it' if table.blank == 1 else 'each'} "
              "is not graded yet (Formgrader > Manual Grading; --partial writes partial totals)")
    untitled = [c.assignment for c in table.columns if c.cell is None and c.title == c.assignment]
    if untitled and len(untitled) < len(table.columns):
        print(f"no Canvas id for {', '.join(untitled)}: Canvas matches that column by its title (add it to "
              f"{grades.CANVAS_IDS} or --canvas-id)")
    return 0


def _exit_on_signal(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
