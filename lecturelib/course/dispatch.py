"""Two ways to send submissions to `task.grade`: threads of this process (the default) or a Dask cluster.

Both run the same `task.grade(task, kit)` and hand each Result back to the coordinator (`autograde`), which alone
writes the course (`task.save`). `Local(workers)` needs nothing started. `Cluster(address)` connects to a running
Dask scheduler (`dask scheduler`, or one that dask-jobqueue or dask-kubernetes started) whose workers were started
for the course (`python -m lecturelib.course worker ADDRESS`: `lecturelib.course.worker` is their preload). Each
assignment's Kit is sent once to every worker; tasks go only to workers of the coordinator's course version (a Dask
resource they offer, `task.worker_resource`). Dask hands the task of a worker that died to another one; a task whose
workers died `distributed.scheduler.allowed-failures` + 1 times in a row comes back as not graded, saying why.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lecturelib.course import task
from lecturelib.course.task import Kit, Result, Task

CONNECT_TIMEOUT_S = 30


class ClusterError(RuntimeError):
    """The scheduler cannot be reached, or no worker of it grades for this course version."""


def lost(t: Task, why: str) -> Result:
    """The Result of a task that came back without one (its workers died, the scheduler went away)."""
    return Result(t.student, t.assignment, problems=[f"not graded: {why}; its earlier grades, if any, are kept: "
                                                     f"grade it again"], refused=why)


class Local:
    """`workers` submissions graded at once by this process (forked grading processes): nothing to start."""

    def __init__(self, root: Path, workers: int) -> None:
        self.root, self.workers = root, max(1, workers)
        self.notes: list[str] = []

    def run(self, tasks: list[Task], kits: dict[str, Kit]) -> Generator[Result, None, None]:
        task.use_course(self.root)
        pool = ThreadPoolExecutor(max_workers=self.workers)
        try:
            futures = [pool.submit(task.grade, t, kits[t.assignment]) for t in tasks]
            for future in as_completed(futures):
                yield future.result()
        except BaseException:
            task.stop_all()  # interrupted: no grading process (and so no sandbox) outlives the run
            raise
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
            task.release()


class Cluster:
    """Submissions graded by the workers of the Dask scheduler at `address` (tcp://HOST:8786)."""

    def __init__(self, address: str, version: str, tell: Callable[[str], None] | None = None) -> None:
        self.address, self.version, self.tell = address, version, tell
        self.notes: list[str] = []
        self.dashboard = ""
        self.workers = 0

    def run(self, tasks: list[Task], kits: dict[str, Kit]) -> Generator[Result, None, None]:
        from distributed import Client
        from distributed import as_completed as completed

        try:
            client = Client(self.address, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except OSError as e:
            raise ClusterError(f"cannot reach the Dask scheduler at {self.address}: {e}") from None
        try:
            self.dashboard = client.dashboard_link if client.scheduler_info().get("services", {}).get("dashboard") else ""
            self._check_workers(client)
            started = (f"grading on {self.workers} Dask worker{'s' if self.workers != 1 else ''} of {self.address}"
                       + (f"; dashboard: {self.dashboard}" if self.dashboard else " (no dashboard: install bokeh where "
                                                                                  "the scheduler runs)"))
            self.notes.append(started)
            if self.tell is not None:
                self.tell(started)
            resource = {task.worker_resource(self.version): 1}
            shipped = {a: client.scatter(kit, broadcast=True, hash=False) for a, kit in kits.items()}
            futures = {client.submit(task.grade, t, shipped[t.assignment], pure=False, resources=resource,
                                     key=f"grade-{t.assignment}-{t.student}-{time.time_ns()}"): t for t in tasks}
            try:
                for future in completed(futures, loop=client.loop):
                    try:
                        yield future.result()
                    except Exception as e:  # noqa: BLE001 - KilledWorker, a lost scheduler: reported, never raised
                        yield lost(futures[future], f"{type(e).__name__}: {str(e)[:160]}")
            except BaseException:
                client.cancel(list(futures), force=True)  # interrupted: the workers drop what is left
                raise
        finally:
            client.close()

    def _check_workers(self, client: Any) -> None:
        versions: dict[str, str] = client.run(task.host_version)
        ours = [w for w, v in versions.items() if v == self.version]
        others = sorted(w for w in versions if w not in ours)
        if others:
            self.notes.append(f"{len(others)} worker{'s' if len(others) != 1 else ''} of {self.address} grade for "
                              f"another course version or none ({', '.join(others[:3])}{', ...' if len(others) > 3 else ''}): "
                              f"they get no submission; start them with `python -m lecturelib.course worker "
                              f"{self.address}` in an up-to-date checkout")
        if not ours:
            raise ClusterError(f"no worker of {self.address} grades for this course version ({self.version[:12]}; "
                               f"{len(versions)} worker{'s' if len(versions) != 1 else ''} connected): start them with "
                               f"`python -m lecturelib.course worker {self.address}` in the course's folder, with the "
                               f"same lecturelib and notebooks/ as here")
        self.workers = len(ours)


class Progress:
    """The coordinator's progress bar: submissions done / total, failures, rate and time left (tqdm, on stderr)."""

    def __init__(self, total: int, *, enabled: bool = True) -> None:
        self.failures = 0
        self.bar = tqdm(total=total, unit="submission", file=sys.stderr, disable=not enabled or None,
                        dynamic_ncols=True, mininterval=1.0)

    def done(self, failed: bool) -> None:
        self.failures += failed
        self.bar.set_postfix_str(f"{self.failures} failed", refresh=False)
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()
