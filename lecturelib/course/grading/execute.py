"""GradingExecute, nbgrader's Execute for autograding, in three parts: the kernel, its output, the end of a cell.

* `SandboxedKernel`: where the graded kernel runs and how it ends. The kernel is the sandboxed one
  (`lecturelib.course.isolation.sandbox`) when `autograde` runs it so (SANDBOX_ENV=bwrap); outside `autograde`
  (Formgrader's button, plain `nbgrader autograde`) it refuses to grade. Its connection file and IPC sockets live in
  a short private folder (`sandbox.socket_folder`) whatever TMPDIR is: no kernel is ever started on TCP, sandboxed
  or not. After the last cell (or a stop) the kernel is ended at once, its sandbox with it (`_async_end_kernel`).
* `CappedOutput`: what of the kernel's messages is kept. Every byte the kernel sends counts: each message's content,
  metadata and buffers, whatever its type (output, display updates, clear_output, comm messages, errors). A cell
  keeps what arrives while it has received less than `max_cell_output_bytes` and the notebook less than
  `max_output_bytes`; the rest is dropped as it arrives (a test cell still keeps its check records, up to
  `max_record_bytes`), and a note says so. Comm messages are never kept: widget state in a graded notebook would be
  the student's. A message larger than `max_message_bytes` is refused before Python reads it.
* `CellStops`: when a cell ends the run. A cell that runs past the cell time limit, or during which the kernel dies,
  ends the run there: the kernel is killed at once, that cell gets an error that says what happened (the real time
  limit, or why the kernel died), the cells before keep their results and the cells after are not run (they score
  0). After a cell's reply, its remaining output is waited for as long as it keeps coming (no deadline while messages
  arrive; `iopub_timeout` seconds of silence end the wait, and the run): a slow or loaded machine never turns a flood
  of output into lost points, and the cell's result and every later cell stand.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from queue import Empty
from time import monotonic
from typing import Any

import zmq
import zmq.asyncio
from jupyter_core.utils import ensure_async, run_sync
from nbclient.client import timestamp
from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode, from_dict
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Integer

from lecturelib.course.isolation import KERNEL_NAME, STATE_ENV, connection_paths, socket_folder
from lecturelib.course.layout import is_test_cell, nbgrader_meta
from lecturelib.grading import RECORD_MARK

CHUNKED_STREAM = "lecturelib.course.grading.kernel_stream.ChunkedOutStream"  # the kernels' stdout/stderr (see it)
SANDBOX_ENV = "LECTURELIB_SANDBOX"  # set by `course autograde`: "bwrap" (every kernel sandboxed) or "none"
STOPPED = "GradingStopped"  # ename of the error a cell gets when the run ended there (time limit, dead kernel)
MIB = 2**20


def message_bytes(msg: dict[str, Any]) -> int:
    """Bytes one message from the kernel carries (content, metadata, buffers), about as it was sent, counted without
    serializing it again; no recursion, whatever its nesting."""
    total, stack = 0, [msg.get("content", {}), msg.get("metadata", {}), list(msg.get("buffers") or [])]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item) if item.isascii() else len(item.encode("utf-8", "replace"))
        elif isinstance(item, (bytes, bytearray, memoryview)):
            total += len(item)
        elif isinstance(item, dict):
            total += 2
            for key, value in item.items():
                stack += (key, value)
        elif isinstance(item, (list, tuple)):
            total += 2
            stack += item
        else:
            total += 8  # a number, a bool, None
    return total


def _records(text: str) -> str:
    """The check records in a piece of output text (lines that start with RECORD_MARK), one a line."""
    return "".join(line + "\n" for line in text.split("\n") if line.startswith(RECORD_MARK))


class SandboxedKernel(Execute):
    """Execute whose kernel is the course's sandboxed one (or, with --no-sandbox, a plain one), started on IPC
    sockets in a short private folder, refused outside `autograde`, and ended at once (see the module's docstring)."""

    kill_after_s = Float(5.0, help="seconds a kernel ended with SIGTERM may take before SIGKILL").tag(config=True)

    def preprocess(self, nb: NotebookNode, resources: Any = None, km: Any = None) -> tuple[NotebookNode, Any]:
        if os.environ.get(SANDBOX_ENV) not in ("bwrap", "none"):
            raise RuntimeError("grade with `python -m lecturelib.course autograde`: it runs every kernel in a sandbox "
                               "(plain `nbgrader autograde` and Formgrader's Autograde button do not)")
        self._sockets = socket_folder()  # before any kernel starts: refuses, with the reason, where none can be made
        arguments: list[str] = list(getattr(self, "extra_arguments"))  # noqa: B009 - nbgrader and nbclient both declare it
        stream = f"--IPKernelApp.outstream_class={CHUNKED_STREAM}"
        self.extra_arguments = arguments + ([stream] if stream not in arguments else [])
        try:
            return super().preprocess(nb, resources, km)
        finally:
            shutil.rmtree(self._sockets, ignore_errors=True)

    def create_kernel_manager(self) -> Any:
        sandboxed = os.environ.get(SANDBOX_ENV) == "bwrap"
        if sandboxed:
            self.kernel_name = KERNEL_NAME  # whatever the notebook names
        km = super().create_kernel_manager()
        connection, ip = connection_paths(self._sockets, sandboxed)
        km.transport, km.connection_file, km.ip = "ipc", connection, ip
        return km

    async def _async_end_kernel(self) -> None:
        """End the kernel now: SIGTERM to its process group (the sandbox's supervisor then kills the sandbox, removes its
        cgroup and exits; a kernel without the sandbox exits), SIGKILL if anything is left after `kill_after_s`. Never
        the graceful shutdown: the graded kernel has nothing left to do, and one that imported torch spends seconds
        in its interpreter's final garbage collection before it exits."""
        provisioner = getattr(self.km, "provisioner", None) if self.km is not None else None
        if provisioner is None or not provisioner.has_process:
            return
        try:
            await provisioner.terminate()
            await asyncio.wait_for(provisioner.wait(), timeout=self.kill_after_s)
        except (asyncio.TimeoutError, OSError):
            await provisioner.kill()
            await provisioner.wait()

    async def _async_cleanup_kernel(self) -> None:
        await self._async_end_kernel()
        await super()._async_cleanup_kernel()  # the kernel is gone: its connection file and sockets are removed

    _cleanup_kernel = run_sync(_async_cleanup_kernel)


class CappedOutput(Execute):
    """Execute that counts every message the kernel sends and keeps a cell's output only up to the caps (see the
    module's docstring); `_messages` counts the current cell's messages, what CellStops waits on."""

    store_widget_state = Bool(False, help="never: a graded notebook keeps no widget state the kernel sent").tag(config=True)
    max_cell_output_bytes = Integer(2 * MIB, help="bytes of messages one cell may receive and keep").tag(config=True)
    max_output_bytes = Integer(16 * MIB, help="bytes of messages the whole notebook may receive and keep").tag(config=True)
    max_record_bytes = Integer(64 * 1024, help="check records a test cell keeps past the caps").tag(config=True)
    max_message_bytes = Integer(64 * MIB, help="largest message read from the kernel").tag(config=True)

    def reset_execution_trackers(self) -> None:
        super().reset_execution_trackers()
        self._cell_bytes: dict[int, int] = {}  # received by each cell, kept or not
        self._total_bytes = 0
        self._record_bytes: dict[int, int] = {}
        self._truncated: set[int] = set()
        self._messages = 0  # messages received for the cell that runs (progress while its output is awaited)

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

    def process_message(self, msg: dict[str, Any], cell: NotebookNode, cell_index: int) -> NotebookNode | None:
        kind = msg["msg_type"]
        self._messages += 1
        if kind == "status":
            return super().process_message(msg, cell, cell_index)  # busy/idle: the end of the cell's output
        size = message_bytes(msg)
        room = min(self.max_cell_output_bytes - self._cell_bytes.get(cell_index, 0),
                   self.max_output_bytes - self._total_bytes)
        self._cell_bytes[cell_index] = self._cell_bytes.get(cell_index, 0) + size
        self._total_bytes += size
        if kind.startswith("comm"):
            return None  # widget messages: the grader has no frontend, and keeps no state a kernel sent
        if size <= room:
            return super().process_message(msg, cell, cell_index)
        self._truncated.add(cell_index)
        content = msg.get("content", {})
        if kind == "stream" and room > 0:  # what fits, then nothing
            text = content.get("text", "")
            kept = text[:room]
            msg = {**msg, "content": {**content, "text": kept + self._keep_records(text[room:], cell, cell_index)}}
            return super().process_message(msg, cell, cell_index)
        if kind == "stream":
            records = self._keep_records(content.get("text", ""), cell, cell_index)
            if records:
                return super().process_message({**msg, "content": {**content, "text": records}}, cell, cell_index)
        elif kind == "error" and not any(o.get("output_type") == "error" for o in cell.outputs):
            small = {"ename": str(content.get("ename", ""))[:200], "evalue": str(content.get("evalue", ""))[:1000]}
            return super().process_message({**msg, "content": {**small, "traceback": [small["evalue"]]}}, cell, cell_index)
        elif kind == "execute_input":
            return super().process_message(msg, cell, cell_index)
        return None

    def _keep_records(self, text: str, cell: NotebookNode, cell_index: int) -> str:
        """The check records in output dropped past the caps, kept for a test cell (up to max_record_bytes)."""
        if not is_test_cell(cell) or RECORD_MARK not in text:
            return ""
        records = _records(text)
        room = self.max_record_bytes - self._record_bytes.get(cell_index, 0)
        records = records[:max(0, room)]
        self._record_bytes[cell_index] = self._record_bytes.get(cell_index, 0) + len(records)
        return ("\n" + records) if records else ""

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        self._messages = 0
        cell, resources = super().preprocess_cell(cell, resources, index)  # a stop, if any, is noted first
        if index in self._truncated and cell.cell_type == "code":
            limit = min(self.max_cell_output_bytes, self.max_output_bytes) // 1024
            cell.outputs.append(from_dict({"output_type": "stream", "name": "stdout", "text": (
                f"\n[output truncated by the grader: a cell keeps {limit} KiB, a notebook "
                f"{self.max_output_bytes // MIB} MiB; this cell received {self._cell_bytes.get(index, 0)} bytes]\n")}))
        return cell, resources


class CellStops(Execute):
    """Execute in which a cell past its time limit, a dead kernel or a silent output channel ends the run at that
    cell, saying why, and the cells after are not run (see the module's docstring). Waits on `_messages`, which
    CappedOutput counts (its note names CappedOutput's `max_message_bytes`); ends the kernel with SandboxedKernel's
    `_async_end_kernel`."""

    interrupt_on_timeout = Bool(False, help="kill the kernel instead: a broken kernel need not answer").tag(config=True)
    iopub_timeout = Integer(30, help="seconds of silence on IOPub, after a cell's reply, that end the wait for its "
                                     "output (the wait has no deadline while output arrives)").tag(config=True)

    def reset_execution_trackers(self) -> None:
        super().reset_execution_trackers()
        self._stopped = ""
        self._silent = False  # the kernel's output channel went quiet after a cell's reply

    async def _async_poll_for_reply(self, msg_id: str, cell: NotebookNode, timeout: int | None,
                                    task_poll_output_msg: Any, task_poll_kernel_alive: Any) -> dict[str, Any]:
        """nbclient 0.11's, but once the reply is there the cell's output is awaited while it keeps arriving."""
        assert self.kc is not None
        new_timeout: float | None = None
        if timeout is not None:
            deadline = monotonic() + timeout
            new_timeout = float(timeout)
        error_on_timeout_execute_reply = None
        while True:
            try:
                if error_on_timeout_execute_reply:
                    msg = error_on_timeout_execute_reply
                    msg["parent_header"] = {"msg_id": msg_id}
                else:
                    msg = await ensure_async(self.kc.shell_channel.get_msg(timeout=new_timeout))
                if msg["parent_header"].get("msg_id") == msg_id:
                    if self.record_timing:
                        cell["metadata"]["execution"]["shell.execute_reply"] = timestamp(msg)
                    await self._async_wait_for_output(task_poll_output_msg, cell)
                    task_poll_kernel_alive.cancel()
                    return msg
                if new_timeout is not None:
                    new_timeout = max(0, deadline - monotonic())
            except Empty:
                assert timeout is not None
                task_poll_kernel_alive.cancel()
                await self._async_check_alive()
                error_on_timeout_execute_reply = await self._async_handle_timeout(timeout, cell)

    async def _async_wait_for_output(self, task: Any, cell: NotebookNode) -> None:
        """Wait for the output task to see the kernel go idle, as long as messages keep arriving. Silence for
        `iopub_timeout` seconds means the kernel's output channel is cut (a message larger than max_message_bytes
        was refused): no later cell's output could arrive, so the run ends at this cell (see preprocess_cell)."""
        seen = -1
        while True:
            done, _ = await asyncio.wait({task}, timeout=self.iopub_timeout)
            if done:
                task.result()
                return
            if self._messages == seen:
                break
            seen = self._messages
        task.cancel()
        self._silent = True

    def preprocess_cell(self, cell: NotebookNode, resources: Any, index: int) -> tuple[NotebookNode, Any]:
        if self._stopped:
            if cell.cell_type == "code":  # not run: its checks, if any, fail
                note = f"not run: the grader stopped at {self._stopped}"
                cell.outputs = [from_dict({"output_type": "error", "ename": STOPPED, "evalue": note, "traceback": [note]})]
                cell.execution_count = None
            return cell, resources
        self._silent = False
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
            if self._silent:
                self._stop(cell, f"its output stopped arriving: nothing came for {self.iopub_timeout} s after the cell "
                                 f"ended (a single output larger than {self.max_message_bytes // MIB} MiB cuts the "
                                 f"kernel's output channel)")
        except CellTimeoutError:
            self._stop(cell, f"it ran longer than the cell time limit of {self.timeout} s")
        except DeadKernelError:
            self._stop(cell, "the kernel died while it ran" + self._death())
        return cell, resources

    def _death(self) -> str:
        """Why the sandboxed kernel died, as its supervisor saw it (a limit), if it said."""
        state = os.environ.get(STATE_ENV, "")
        try:
            with open(Path(state, "reason"), errors="replace") as f:
                return f" ({f.read(1000).strip()})"
        except OSError:
            return " (it exited or was killed: os._exit, a crash, or the machine's memory)"

    def _stop(self, cell: NotebookNode, what: str) -> None:
        where = nbgrader_meta(cell).get("grade_id") or f"cell {self.code_cells_executed}"
        self._stopped = f"{where} ({what})"
        note = f"the grader stopped here: {what}; the cells after it were not run"
        self.log.error("cell %s: %s", where, note)
        cell.outputs.append(from_dict({"output_type": "error", "ename": STOPPED, "evalue": note, "traceback": [note]}))
        try:
            run_sync(self._async_end_kernel)()  # at once: a broken kernel would not answer a request
        except Exception as e:  # noqa: BLE001 - already dead, or dying: the run goes on without it
            self.log.warning("could not shut the kernel down: %s", e)


class GradingExecute(CappedOutput, CellStops, SandboxedKernel):
    """nbgrader's Execute for autograding: the sandboxed kernel, output capped, a fair end when a cell fails (the
    module's docstring says each part). CappedOutput comes first: its note on a truncated cell follows a stop's."""
