"""nbgrader preprocessors that make autograding trust only plain values, judged outside the kernel."""

from __future__ import annotations

import copy
import os
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any

import zmq
import zmq.asyncio
from jupyter_core.paths import jupyter_runtime_dir
from jupyter_core.utils import ensure_async, run_sync
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Bool, Integer, Unicode

from lecturelib.course.layout import cell_stdout, is_test_cell, nbgrader_meta, read_notebook
from lecturelib.course.sandbox import KERNEL_NAME, STATE_ENV
from lecturelib.grading import Check, InvalidTestCell, Verdict, judge, prepare_test_cell

STASH = "lecturelib_checks"  # key in nbconvert's resources: the checks, from PrepareChecks to JudgeChecks
SCRATCH = "lecturelib_scratch"  # key in nbconvert's resources: (the notebook's folder, the kernel's folder)
SANDBOX_ENV = "LECTURELIB_SANDBOX"  # set by `course autograde`: "bwrap" (every kernel sandboxed) or "none"
STOPPED = "GradingStopped"  # ename of the error a cell gets when the run ended there (time limit, dead kernel)
MIB = 2**20
IPC_PATH_MAX = 90  # a Unix socket path has at most 107 bytes; ZeroMQ appends "-ipc-N" to the connection file's


def verdict_outputs(verdict: Verdict, n_checks: int, note: str = "") -> list[NotebookNode]:
    """The outputs a judged test cell shows: a line on success, an error naming each failed check."""
    if verdict.passed:
        text = f"{verdict.grade_id}: all {n_checks} checks passed\n"
        return [from_dict({"output_type": "stream", "name": "stdout", "text": text})]
    lines = [f"{verdict.grade_id}: {len(verdict.messages)} of {n_checks} checks failed{note}"] + [
        f"  - {m}" for m in verdict.messages
    ]
    return [
        from_dict(
            {"output_type": "error", "ename": "CheckFailed", "evalue": lines[0], "traceback": lines}
        )
    ]


class RestoreMissingCells(NbGraderPreprocessor):
    """Before grading: the release decides every managed cell; deleted cells come back where they stood.

    In place of nbgrader's OverwriteCells, which reads the gradebook (rows a kernel could once rewrite):
    the release's metadata replaces the submission's, so edited points or cell kinds count for nothing,
    and read-only cells (setup, tests) get the release's source back. Cells the submission deleted are put
    back from the release, read-only setup cells included (nbgrader's add_missing_cells restores deleted
    test cells only after an answer cell the submission still has, and stops grading otherwise).
    """

    release_directory = Unicode("", help="the folder of the student release (notebooks/)").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        info = resources["nbgrader"]
        path = os.path.join(self.release_directory, info["assignment"], info["notebook"] + ".ipynb")
        if not self.release_directory or not os.path.exists(path):
            return nb, resources
        release = read_notebook(path).cells
        managed = {nbgrader_meta(c)["grade_id"]: c for c in release if nbgrader_meta(c).get("grade_id")}
        for cell in nb.cells:  # a cell's nbgrader metadata is the release's, never the submission's
            twin = managed.get(nbgrader_meta(cell).get("grade_id"))
            if twin is not None and twin.cell_type == cell.cell_type:
                cell.metadata["nbgrader"] = copy.deepcopy(twin.metadata["nbgrader"])  # points, kind, checksum
                if nbgrader_meta(twin).get("locked"):
                    cell.source = twin.source  # a read-only cell as released (a test: its visible part)
            elif "nbgrader" in cell.metadata:  # {} left by DeduplicateIds on a pasted copy, an invented
                del cell.metadata["nbgrader"]  # grade cell, a cell whose type was changed: the student's own
        present = {nbgrader_meta(c).get("grade_id") for c in nb.cells} - {None}
        by_id = {c.get("id"): c for c in release if nbgrader_meta(c).get("grade_id") not in present}
        for cell in nb.cells:  # an editor dropped the metadata but kept the cell's id: it is that cell
            twin = by_id.get(cell.get("id")) if not nbgrader_meta(cell) else None
            if twin is not None and nbgrader_meta(twin)["grade_id"] not in present:
                cell.metadata["nbgrader"] = copy.deepcopy(twin.metadata["nbgrader"])
                present.add(nbgrader_meta(twin)["grade_id"])
        position = 0  # where the next restored cell goes: after the last release cell found so far
        for cell in release:
            gid = nbgrader_meta(cell).get("grade_id")
            if gid in present:
                position = 1 + next(i for i, c in enumerate(nb.cells) if nbgrader_meta(c).get("grade_id") == gid)
            elif gid is not None:
                self.log.warning("cell %s was missing from the submission: restored from the release", gid)
                restored = copy.deepcopy(cell)
                if restored.cell_type == "code" and nbgrader_meta(restored).get("solution"):
                    # not the stub: it would redefine, as NotImplementedError, an answer written elsewhere
                    restored.source = "# this answer cell was missing from the submission"
                nb.cells.insert(position, restored)
                present.add(gid)
                position += 1
        return nb, resources


class RedactTests(NbGraderPreprocessor):
    """Sanitize step: test cells lose their expected literals before the notebook is written to disk.

    nbgrader writes the sanitized notebook into the folder the kernel then runs in, so the literals
    must be gone from it: a kernel could otherwise read them from its own working folder.
    """

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        for cell in nb.cells:
            if is_test_cell(cell):
                try:
                    cell.source = prepare_test_cell(cell.source, cell.metadata.nbgrader["grade_id"])[0]
                except InvalidTestCell as e:  # an instructor's mistake: `course check` reports it
                    self.log.warning("test cell left to the kernel, not judged: %s", e)
        return nb, resources


class PrepareChecks(NbGraderPreprocessor):
    """Before execution: read each test cell's checks from the master in source/ and give the kernel a folder.

    The checks come from the instructors' masters, never from the gradebook or anything a kernel could
    have written, and are read before the kernel starts. The kernel starts in a scratch copy of the
    submission's folder (inside the sandbox, copies of its data files in a private working folder).
    """

    source_directory = Unicode("", help="the folder of the masters (source/): where the checks are read").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        info = resources["nbgrader"]
        path = Path(self.source_directory, info["assignment"], info["notebook"] + ".ipynb")
        if not self.source_directory or not path.exists():
            raise FileNotFoundError(f"no master {path} to read the checks from (PrepareChecks.source_directory)")
        masters = {nbgrader_meta(c)["grade_id"]: c.source for c in read_notebook(path).cells if is_test_cell(c)}
        stash: dict[str, tuple[str, list[Check]]] = {}
        for cell in nb.cells:
            if not is_test_cell(cell):
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            try:
                source = masters[grade_id]
                cell.source, checks = prepare_test_cell(source, grade_id)
            except KeyError:
                self.log.warning("test cell %s is not in %s: left to the kernel, not judged", grade_id, path)
                continue
            except InvalidTestCell as e:
                self.log.warning("test cell %s left to the kernel, not judged: %s", grade_id, e)
                continue
            stash[grade_id] = (source, checks)
        resources[STASH] = stash
        # The kernel starts in a scratch copy of the submission's folder, outside the course tree (in TMPDIR,
        # which `autograde` makes private to this submission and removes after it, whatever happens).
        metadata = resources.setdefault("metadata", {})
        folder = metadata.get("path") or "."
        scratch = tempfile.mkdtemp(prefix="lecturelib-kernel-")
        for name in os.listdir(folder):
            if not name.endswith(".ipynb") and os.path.isfile(os.path.join(folder, name)):
                shutil.copy2(os.path.join(folder, name), scratch)
        resources[SCRATCH], metadata["path"] = (folder, scratch), scratch
        return nb, resources


def _message_bytes(msg: dict[str, Any]) -> int:
    """How much output one IOPub message carries (text, data, traceback), without serializing it again."""
    content = msg.get("content", {})
    parts = [content.get("text", "")] + list(content.get("data", {}).values()) + list(content.get("traceback", []))
    return sum(len(p) if isinstance(p, (str, bytes)) else len(str(p)) for p in parts)


class GradingExecute(Execute):
    """nbgrader's Execute for autograding: the sandboxed kernel, a fair end when a cell fails, output capped.

    * The kernel is the sandboxed one (`lecturelib.course.sandbox`), reached over IPC sockets in a folder of
      its own, when `autograde` runs it so (SANDBOX_ENV=bwrap); outside `autograde` (Formgrader's button,
      plain `nbgrader autograde`) it refuses to grade. Also without a sandbox, no kernel listens on TCP.
    * A cell that runs past the cell time limit, or during which the kernel dies, ends the run there: the
      kernel is killed at once, that cell gets an error that says what happened (the real time limit, or why
      the kernel died), the cells before keep their results and the cells after are not run (they score 0).
      A notebook never costs more than the time limit plus a few seconds, and what passed keeps its points.
    * A cell keeps at most `max_cell_output_bytes` of output and the notebook `max_output_bytes`: the rest is
      dropped as it arrives and a note says so, so a flood of output costs neither the grader's memory nor disk.
    """

    interrupt_on_timeout = Bool(False, help="kill the kernel instead: a broken kernel need not answer").tag(config=True)
    max_cell_output_bytes = Integer(2 * MIB, help="output one cell may keep").tag(config=True)
    max_output_bytes = Integer(16 * MIB, help="output the whole notebook may keep").tag(config=True)
    max_message_bytes = Integer(64 * MIB, help="largest message read from the kernel").tag(config=True)

    def reset_execution_trackers(self) -> None:
        super().reset_execution_trackers()
        self._stopped = ""
        self._cell_bytes: dict[int, int] = {}
        self._total_bytes = 0
        self._truncated: set[int] = set()

    def preprocess(self, nb: NotebookNode, resources: Any = None, km: Any = None) -> tuple[NotebookNode, Any]:
        if os.environ.get(SANDBOX_ENV) not in ("bwrap", "none"):
            raise RuntimeError("grade with `python -m lecturelib.course autograde`: it runs every kernel in a sandbox "
                               "(plain `nbgrader autograde` and Formgrader's Autograde button do not)")
        return super().preprocess(nb, resources, km)

    def create_kernel_manager(self) -> Any:
        if os.environ.get(SANDBOX_ENV) == "bwrap":
            self.kernel_name = KERNEL_NAME  # whatever the notebook names
        km = super().create_kernel_manager()
        connection = os.path.join(jupyter_runtime_dir(), f"kernel-{uuid.uuid4().hex[:12]}.json")
        if len(connection) <= IPC_PATH_MAX:
            os.makedirs(os.path.dirname(connection), exist_ok=True)
            km.transport, km.connection_file = "ipc", connection
            km.ip = connection[: -len(".json")] + "-ipc"
        return km

    async def async_start_new_kernel_client(self) -> Any:
        """nbclient's, but the client's sockets refuse a message larger than `max_message_bytes` (a single print
        of hundreds of MB) before Python reads it: the grader's memory stays small whatever a kernel sends."""
        assert self.km is not None
        context = zmq.asyncio.Context()
        context.setsockopt(zmq.MAXMSGSIZE, self.max_message_bytes)
        try:
            self.kc = self.km.client(context=context)
            await ensure_async(self.kc.start_channels())
            await ensure_async(self.kc.wait_for_ready(timeout=self.startup_timeout))
        except Exception:
            await self._async_cleanup_kernel()
            raise
        self.kc.allow_stdin = False
        return self.kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    def output(self, outs: list[NotebookNode], msg: dict[str, Any], display_id: str | None,
               cell_index: int) -> NotebookNode | None:
        size = _message_bytes(msg)
        room = min(self.max_cell_output_bytes - self._cell_bytes.get(cell_index, 0),
                   self.max_output_bytes - self._total_bytes)
        if size > room:
            self._truncated.add(cell_index)
            if msg["msg_type"] != "stream" or room <= 0:
                return None
            msg = {**msg, "content": {**msg["content"], "text": msg["content"]["text"][:room]}}
            size = room
        self._cell_bytes[cell_index] = self._cell_bytes.get(cell_index, 0) + size
        self._total_bytes += size
        return super().output(outs, msg, display_id, cell_index)

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if self._stopped:
            if cell.cell_type == "code":  # not run: its checks, if any, fail
                note = f"not run: the grader stopped at {self._stopped}"
                cell.outputs = [from_dict({"output_type": "error", "ename": STOPPED, "evalue": note, "traceback": [note]})]
                cell.execution_count = None
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except CellTimeoutError as e:
            if "IOPub" in str(e):
                self._stop(cell, f"its output did not arrive within {self.iopub_timeout} s of the cell's end (a single "
                                 f"output larger than {self.max_message_bytes // MIB} MiB is refused)")
            else:
                self._stop(cell, f"it ran longer than the cell time limit of {self.timeout} s")
        except DeadKernelError:
            self._stop(cell, "the kernel died while it ran" + self._death())
        if index in self._truncated and cell.cell_type == "code":
            limit = min(self.max_cell_output_bytes, self.max_output_bytes) // 1024
            cell.outputs.append(from_dict({"output_type": "stream", "name": "stdout",
                                           "text": f"\n[output truncated by the grader: a cell keeps {limit} KiB]\n"}))
        return cell, resources

    def _death(self) -> str:
        """Why the sandboxed kernel died, as its supervisor saw it (a limit), if it said."""
        state = os.environ.get(STATE_ENV, "")
        try:
            return f" ({Path(state, 'reason').read_text().strip()})"
        except OSError:
            return " (it exited or was killed: os._exit, a crash, or the machine's memory)"

    def _stop(self, cell: NotebookNode, what: str) -> None:
        where = nbgrader_meta(cell).get("grade_id") or f"cell {self.code_cells_executed}"
        self._stopped = f"{where} ({what})"
        note = f"the grader stopped here: {what}; the cells after it were not run"
        self.log.error("cell %s: %s", where, note)
        cell.outputs.append(from_dict({"output_type": "error", "ename": STOPPED, "evalue": note, "traceback": [note]}))
        if self.km is not None:
            try:
                run_sync(self.km.shutdown_kernel)(now=True)  # at once: a broken kernel would not answer a request
            except Exception as e:  # noqa: BLE001 - already dead, or dying: the run goes on without it
                self.log.warning("could not shut the kernel down: %s", e)


class JudgeChecks(NbGraderPreprocessor):
    """After execution: judge the reported values and make the verdict the test cell's only output."""

    def preprocess(self, nb: NotebookNode, resources: Any) -> tuple[NotebookNode, Any]:
        if SCRATCH in resources:
            folder, scratch = resources.pop(SCRATCH)
            resources["metadata"]["path"] = folder
            shutil.rmtree(scratch, ignore_errors=True)
        stash = resources.get(STASH, {})
        for cell in nb.cells:
            if not is_test_cell(cell) or cell.metadata.nbgrader["grade_id"] not in stash:
                continue
            grade_id = cell.metadata.nbgrader["grade_id"]
            source, checks = stash[grade_id]
            verdict = judge(grade_id, checks, cell_stdout(cell))
            stops = [o.evalue for o in cell.outputs if o.output_type == "error" and o.ename == STOPPED]
            note = f" ({stops[0]})" if stops else ""
            cell.source = source  # the instructor's test, as the gradebook holds it
            cell.outputs = verdict_outputs(verdict, len(checks), note)
        return nb, resources
