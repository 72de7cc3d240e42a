"""Measure grading: the cost of one honest submission against its notebook run alone, and the throughput of
`--workers 1`, `--workers 2` and a 2-worker local Dask cluster (README "Measured"). Not a test (pytest skips it):

    .venv/bin/python tests/measure_grading.py [ASSIGNMENT] [--students N] [--repeat R]

It builds a throwaway course of ASSIGNMENT (default 02_matmul_flops) with N honest submissions (the solution),
then, in one run, interleaved R times: the notebook alone (nbclient, quick sizes, one intra-op thread: what the
autograder's kernel runs), one submission through `task.grade` (its timings by part), and then the class graded by
each engine. Every figure depends on the machine and its load (printed).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def notebook_alone(path: Path) -> float:
    """Seconds to execute the notebook once with nbclient in a fresh kernel (no sandbox, no grading)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(str(path), as_version=4)
    start = time.perf_counter()
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("assignment", nargs="?", default="02_matmul_flops")
    parser.add_argument("--students", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ.update({"LECTURELIB_QUICK": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"})
    sys.path.insert(0, str(ROOT / "tests"))
    from lecturelib.course.grading import task
    from lecturelib.course.grading.autograde import autograde
    from lecturelib.course.release.build import build
    from lecturelib.course.layout import Course, fill_answers, read_notebook, write_notebook
    from lecturelib.course.grading.worker import COURSE_ENV

    a = args.assignment
    base = Path(tempfile.mkdtemp(prefix="measure-grading-"))
    course = Course(base)
    shutil.copy2(ROOT / "nbgrader_config.py", base)
    shutil.copytree(ROOT / "source" / a, base / "source" / a)
    assert build(course) == []
    (master_path,) = course.source_notebooks(a)
    solved = fill_answers(read_notebook(course.release / a / master_path.name), read_notebook(master_path))
    for i in range(args.students):
        write_notebook(solved, course.submitted / f"s{i}" / a / master_path.name)
    alone_nb = base / "alone" / master_path.name
    write_notebook(solved, alone_nb)
    print(f"load before: {open('/proc/loadavg').read().strip()}; {os.cpu_count()} cores; {a}, quick sizes")

    task.use_course(course.root)
    task.warm()
    kit = task.make_kit(course.root, a, task.course_version(course.root))
    one = task.make_task(course, "s0", a, task.Settings(threads={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}))
    notebook_alone(alone_nb)  # warm-up: the page cache, torch's first import
    alone, graded, parts = [], [], []
    for _ in range(args.repeat):  # interleaved A/B
        alone.append(notebook_alone(alone_nb))
        result = task.grade(one, kit)
        assert result.graded, result.problems
        graded.append(result.seconds)
        parts.append(result.timings)
    a_med, g_med = statistics.median(alone), statistics.median(graded)
    print(f"notebook alone: median {a_med:.2f} s of {alone}; graded: median {g_med:.2f} s of "
          f"{[round(g, 2) for g in graded]}; ratio {g_med / a_med:.2f}")
    for key in parts[0]:
        print(f"  {key}: median {statistics.median(p.get(key, 0.0) for p in parts):.2f} s")

    rates = {}
    for label in ("--workers 1", "--workers 2", "2-worker Dask cluster"):
        if label.startswith("2-worker"):
            from distributed import LocalCluster

            from lecturelib.course.grading import credentials

            os.environ[COURSE_ENV] = str(course.root)
            credentials.create(course.root / "cluster", "127.0.0.1")
            security = credentials.security(course.root / "cluster", "scheduler", "worker", "coordinator")
            with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", scheduler_port=0,
                              protocol="tls://", security=security, dashboard_address="127.0.0.1:0", memory_limit=0,
                              preload=["lecturelib.course.grading.worker"],
                              preload_nanny=["lecturelib.course.grading.credentials"],
                              scheduler_kwargs={"preload": ["lecturelib.course.grading.credentials"]},
                              silence_logs=50) as lc:
                start = time.perf_counter()
                report = autograde(course, [a], scheduler=lc.scheduler_address, force=True)
                seconds = time.perf_counter() - start
        else:
            start = time.perf_counter()
            report = autograde(course, [a], workers=int(label.split()[1]), force=True)
            seconds = time.perf_counter() - start
        assert all(o.graded and not o.problems for o in report.outcomes), [o.problems for o in report.outcomes]
        rates[label] = 60 * len(report.outcomes) / seconds
        print(f"{label}: {len(report.outcomes)} submissions in {seconds:.1f} s = {rates[label]:.2f} a minute; "
              f"load {open('/proc/loadavg').read().split()[0]}")
    print(f"Dask's overhead: 2-worker cluster / --workers 2 time per submission = "
          f"{rates['--workers 2'] / rates['2-worker Dask cluster']:.2f}")
    per_worker = rates["2-worker Dask cluster"] / 2
    for n in (2, 16, 64, 256):
        print(f"projection: 3,600 submissions on {n} such workers (1 core each): {3600 / (per_worker * n) / 60:.1f} h")
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
