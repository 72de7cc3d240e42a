"""Notebook 11: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex11_1", label="a ring that counts what all ranks sent, not what one rank sent", source='''
import torch


def ring_allreduce(chunks: list[torch.Tensor]) -> tuple[list[torch.Tensor], int]:
    """Every rank's buffer after a ring all-reduce of `chunks` (one per rank), and the elements rank 0 sent."""
    n = len(chunks)
    buffers = [c.clone() for c in chunks]
    segments = [torch.tensor_split(b, n) for b in buffers]
    sent = 0
    for s in range(n - 1):
        outgoing = [segments[r][(r - s) % n].clone() for r in range(n)]
        for r in range(n):
            segments[(r + 1) % n][(r - s) % n].add_(outgoing[r])
        sent += sum(o.numel() for o in outgoing)  # every rank's segment: the ring's total traffic
    for s in range(n - 1):
        outgoing = [segments[r][(r + 1 - s) % n].clone() for r in range(n)]
        for r in range(n):
            segments[(r + 1) % n][(r + 1 - s) % n].copy_(outgoing[r])
        sent += sum(o.numel() for o in outgoing)
    return buffers, sent
''', fails=("ex11_1_test",)),
    Wrong(cell="ex11_2", label="the ring's time with N steps per phase instead of N − 1", source='''
def allreduce_seconds(n_bytes: int, world: int, alpha_s: float, bytes_per_s: float) -> float:
    """Seconds of a ring all-reduce of n_bytes among `world` ranks: latency alpha_s per step, bytes_per_s per link."""
    if world == 1:
        return 0.0
    steps = 2 * world  # N instead of N - 1 in each phase
    return steps * alpha_s + steps * (n_bytes / world) / bytes_per_s
''', fails=("ex11_2_test",)),
    Wrong(cell="ex11_3", label="every bucket's all-reduce starts when its bucket is ready, as if they could run at once", source='''
from collections.abc import Sequence


def exposed_comm_seconds(ready_s: Sequence[float], comm_s: Sequence[float], backward_end_s: float) -> float:
    """Seconds the bucket all-reduces run past the end of the backward pass (one at a time, in bucket order)."""
    end = max((ready + seconds for ready, seconds in zip(ready_s, comm_s)), default=0.0)  # no queue on the stream
    return max(0.0, end - backward_end_s)
''', fails=("ex11_3_test",)),
    Wrong(cell="ex11_4", label="ZeRO-3 counted at plain data parallelism's traffic (the parameters' all-gathers forgotten)", source='''
def zero_bytes_per_step(n_params: int, bytes_per_value: int, world: int, stage: int) -> float:
    """Bytes one rank sends per step under ZeRO `stage` (0: plain data parallelism) among `world` ranks."""
    one_collective = (world - 1) / world * n_params * bytes_per_value
    return 2 * one_collective  # every stage: a reduce-scatter and an all-gather
''', fails=("ex11_4_test",)),
    Wrong(cell="ex11_5", label="2·N·D FLOPs (the forward pass only) instead of 6·N·D", source='''
def train_days(n_params: float, tokens: float, n_gpus: int, peak_flop_per_s: float, mfu: float) -> float:
    """Days to train n_params parameters on `tokens` tokens: 6·N·D FLOPs at n_gpus · peak · MFU."""
    flops = 2 * n_params * tokens  # forgets the backward pass
    return flops / (n_gpus * peak_flop_per_s * mfu) / 86_400
''', fails=("ex11_5_test",)),
]
