"""The graded kernel's stdout and stderr: ipykernel's OutStream, sending no stream message larger than CHUNK.

ipykernel gathers what a cell prints and sends it every 0.2 s as one message: a cell that prints 64 MiB fast,
on a loaded machine, can make one message larger than the grader accepts (GradingExecute.max_message_bytes,
refused by ZeroMQ before Python reads it), and the kernel's output channel is then cut. Split into messages
of at most CHUNK characters, the same output reaches the grader as a stream it counts and drops past its caps.
`autograde` starts every graded kernel with this class (GradingExecute's kernel arguments); it is only a
convenience for honest kernels: the grader's own caps do not depend on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ipykernel.iostream import OutStream

CHUNK = 2**20  # characters a stream message carries at most


class ChunkedOutStream(OutStream):
    """OutStream whose flushes send at most CHUNK characters a message."""

    def _flush_buffers(self) -> Iterator[tuple[dict[str, Any], str]]:
        for parent, data in super()._flush_buffers():
            for start in range(0, max(len(data), 1), CHUNK):
                yield parent, data[start:start + CHUNK]
