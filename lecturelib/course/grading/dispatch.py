"""Two ways to send submissions to `task.grade`: threads of this process (the default) or a Dask cluster.

Both run the same `task.grade(task, kit)` and hand each Result back to the coordinator (`autograde`), which alone
writes the course (`task.save`). `Local(workers)` needs nothing started. `Cluster(address)` connects, over mutual TLS
with the course's certificates (`credentials`), to the course's scheduler (`python -m lecturelib.course scheduler`,
or one that dask-jobqueue or dask-kubernetes started with them) whose workers were started for the course (`python -m
lecturelib.course worker ADDRESS`: `lecturelib.course.grading.worker` is their preload). Each assignment's Kit is
sent once to every worker; tasks go only to workers of the coordinator's course version (a Dask resource they offer,
`task.worker_resource`; only a holder of the course's worker certificate can register a worker at all). A worker is
trusted to run kernels, not to choose what it grades: it returns plain data (`Result.from_data` checks it), and a
result whose answer cells are not the submission's (`task.not_the_submission`) is refused, its worker distrusted for
the rest of the run and the submission graded again on another. Dask hands the task of a worker that died to another
one; a task whose workers died `distributed.scheduler.allowed-failures` + 1 times in a row comes back as not graded,
saying why.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from tqdm import tqdm

from lecturelib.course.grading import credentials, task
from lecturelib.course.grading.task import Kit, Result, Task, load_config

CONNECT_TIMEOUT_S = 30


class ClusterError(RuntimeError):
    """The scheduler cannot be reached, or no worker of it grades for this course version."""


def lost(t: Task, why: str, problems: list[str] | None = None) -> Result:
    """The Result of a task that came back without one (its workers died, the scheduler went away, no worker
    returned the submission's own notebook); `problems` what came back in its place."""
    return Result(t.student, t.assignment, problems=[*(problems or []), f"not graded: {why}; its earlier grades, if "
                                                     f"any, are kept: grade it again"], refused=why)


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
    """Submissions graded by the workers of the course's Dask scheduler at `address` (tls://HOST:8786), over mutual
    TLS with the course's certificates (`credentials`: the coordinator's, in `credentials_dir`)."""

    def __init__(self, address: str, version: str, tell: Callable[[str], None] | None = None, *, root: Path,
                 credentials_dir: Path | None = None) -> None:
        credentials.require_tls(address)
        self.address, self.version, self.tell, self.root = address, version, tell, root
        self.credentials = credentials.folder_of(root, credentials_dir)
        credentials.require(self.credentials, "coordinator")
        self.notes: list[str] = []
        self.workers = 0
        self.distrusted: set[str] = set()  # workers that returned a notebook that was not the submission

    def run(self, tasks: list[Task], kits: dict[str, Kit]) -> Generator[Result, None, None]:
        from distributed import Client
        from distributed import as_completed as completed

        try:
            client = Client(self.address, timeout=CONNECT_TIMEOUT_S, set_as_default=False,
                            security=credentials.security(self.credentials, "coordinator"))
        except (OSError, TimeoutError) as e:
            raise ClusterError(f"cannot reach the course's Dask scheduler at {self.address} with the coordinator's "
                               f"certificate in {self.credentials}: {e}") from None
        try:
            credentials.check_scheduler(client, self.address)
            self._check_workers(client)
            started = f"grading on {self.workers} Dask worker{'s' if self.workers != 1 else ''} of {self.address}"
            self.notes.append(started)
            if self.tell is not None:
                self.tell(started)
            config = load_config(self.root)  # the coordinator's: its release is the one each answer is checked with
            resource = {task.worker_resource(self.version): 1}
            shipped = {a: client.scatter(kit, broadcast=True, hash=False) for a, kit in kits.items()}

            def submit(t: Task, only: list[str] | None = None) -> Any:
                return client.submit(task.grade_data, t, shipped[t.assignment], pure=False, resources=resource,
                                     key=f"grade-{t.assignment}-{t.student}-{time.time_ns()}",
                                     **({"workers": only, "allow_other_workers": False} if only else {}))

            futures = {submit(t): t for t in tasks}
            refused: dict[tuple[str, str], list[str]] = {}  # (student, assignment) -> results refused, and why
            pending = completed(futures, loop=client.loop)
            try:
                for future in pending:
                    t = futures.pop(future)
                    received = self._receive(client, future, t, kits[t.assignment], config)
                    pair = (t.student, t.assignment)
                    if isinstance(received, Result):
                        received.problems[:0] = refused.pop(pair, [])
                        yield received
                        continue
                    why, worker = received
                    refused.setdefault(pair, []).append(f"refused the result of worker {worker or '?'}: {why}")
                    if worker and worker not in self.distrusted:
                        self.distrusted.add(worker)
                        self.notes.append(f"worker {worker} returned a notebook that is not the submission it was sent "
                                          f"({t.student}, {t.assignment}): no result of it counts in this run, what it "
                                          f"graded is graded again elsewhere; check that machine")
                    trusted = [w for w, v in client.run(task.host_version).items()
                               if v == self.version and w not in self.distrusted]
                    if trusted:
                        again = submit(t, only=trusted)
                        futures[again] = t
                        pending.add(again)
                    else:
                        yield lost(t, "the worker returned a notebook that is not the submission, and no other worker "
                                      "of this course version is left to grade it", problems=refused.pop(pair))
            except BaseException:
                client.cancel(list(futures), force=True)  # interrupted: the workers drop what is left
                raise
        finally:
            client.close()

    def _receive(self, client: Any, future: Any, t: Task, kit: Kit, config: Any) -> Result | tuple[str, str]:
        """The Result of a finished task, or why it is refused and the worker that returned it: any result of a
        distrusted worker, one that is not a Result's plain data, one whose notebooks are not the submission's."""
        try:
            data = future.result()
        except Exception as e:  # noqa: BLE001 - KilledWorker, a lost scheduler: reported, never raised
            return lost(t, f"{type(e).__name__}: {str(e)[:160]}")
        holders = client.who_has([future]).get(future.key, ())  # where it ran, as the scheduler knows it
        worker = holders[0] if holders else ""
        if worker in self.distrusted:
            return "an earlier result of this worker was not the submission it was sent", worker
        try:
            result = Result.from_data(data, t)
        except ValueError as e:
            return f"the worker returned no result of this submission ({e})", worker
        why = task.not_the_submission(t, result, config, kit.notebooks())
        if why:
            return f"the worker returned a notebook that is not the submission ({why})", worker
        return result

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
