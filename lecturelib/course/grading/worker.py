"""A Dask worker that grades for the course: the preload of `python -m lecturelib.course worker SCHEDULER`.

`python -m lecturelib.course worker tls://HOST:8786` runs `dask worker` with the course's worker certificate (mutual
TLS, `credentials`), its nanny guarded by `lecturelib.course.grading.credentials`, and this preload, which makes the
worker grade for the course in its current folder, or in LECTURELIB_COURSE: it lets each peer ask only what its
certificate's role may (`credentials.guard`), computes the course version (`task.course_version`: lecturelib and
notebooks/), offers one unit of the Dask resource of that version per thread (`task.worker_resource`: only tasks of a
coordinator with the same version come to it), and starts the preloaded server its grading processes are forked from,
before it joins the scheduler.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from lecturelib.course.grading import credentials, task

COURSE_ENV = "LECTURELIB_COURSE"  # the course's folder, where the worker does not start in it


def dask_setup(worker: Any) -> None:
    """Dask's preload hook: runs in the worker's process before it registers with the scheduler."""
    credentials.guard(worker)  # first: whatever fails below, no peer gets more than its role
    root = task.find_course(Path(os.environ[COURSE_ENV]) if os.environ.get(COURSE_ENV) else None)
    task.use_course(root)
    resource = task.worker_resource(task.host_version())
    slots = float(worker.state.nthreads)
    worker.state.total_resources[resource] = slots
    worker.state.available_resources[resource] = slots
    reason = task.sandbox_unavailable()
    if reason:
        print(f"lecturelib: this worker cannot sandbox kernels ({reason}); it grades only for --no-sandbox runs",
              file=sys.stderr)
    task.warm()
    print(f"lecturelib: grading for {root} (course version {task.host_version()[:12]}), {slots:g} at once",
          file=sys.stderr)


def command(scheduler: str, nthreads: int, name: str | None, extra: list[str], folder: Path) -> list[str]:
    """The `dask worker` command line of `python -m lecturelib.course worker`: one worker process with `nthreads`
    grading slots, its nanny (restarts it if it dies), both with the worker certificate in `folder` and guarded, this
    preload, no memory limit of Dask's (each kernel's sandbox has its own), no dashboard (it would answer anyone)."""
    cmd = [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nworkers", "1", "--nthreads",
           str(nthreads), "--memory-limit", "0", "--protocol", "tls",
           "--tls-ca-file", str(credentials.cert_path(folder, "ca")), "--tls-cert", str(credentials.cert_path(folder, "worker")),
           "--tls-key", str(credentials.key_path(folder, "worker")), "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
           "--preload", "lecturelib.course.grading.worker", "--preload-nanny", "lecturelib.course.grading.credentials"]
    return cmd + (["--name", name] if name else []) + extra
