"""Notebook 11: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell='ex11_1', label="the sum returned on every rank, the count computed from tensor_split's segments: no ring", source='''
from collections.abc import Callable

import torch


def ring_allreduce(chunks: list[torch.Tensor], send: Callable[[int, int, int, torch.Tensor], None] | None = None
                   ) -> tuple[list[torch.Tensor], int]:
    """Every rank's buffer after a ring all-reduce of `chunks` (one per rank) and the elements rank 0 sent."""
    n = len(chunks)
    total = torch.stack(chunks).sum(0)  # the sum, straight away: no ring
    sizes = [s.numel() for s in torch.tensor_split(chunks[0], n)]
    sent = sum(sizes[(0 - s) % n] + sizes[(1 - s) % n] for s in range(n - 1))  # the count from the schedule alone
    return [total.clone() for _ in range(n)], sent
''', fails=('ex11_1_ring',), teaches='a rank did not send one message per step (N − 1 reduce-scatter steps, then N − 1 all-gather steps)'),
    Wrong(cell='ex11_2', label="the ring's time with N steps per phase instead of N − 1", source='''
def allreduce_seconds(n_bytes: int, world: int, alpha_s: float, bytes_per_s: float) -> float:
    """Seconds a ring all-reduce of n_bytes takes among `world` ranks (alpha_s per message, bytes_per_s per link)."""
    if world == 1:
        return 0.0
    steps = 2 * world  # N instead of N - 1 in each phase
    return steps * alpha_s + steps * (n_bytes / world) / bytes_per_s
''', fails=('ex11_2_test',), teaches="the ring's time is not its steps' latencies plus one rank's bytes at the link's rate"),
    Wrong(cell='ex11_3', label="every bucket's all-reduce launched when the backward pass ends (no overlap)", source='''
from collections.abc import Callable, Sequence


class GradBuckets:
    """DDP's gradient buckets: which gradients share an all-reduce, and the moment each all-reduce is launched."""

    def __init__(self, param_bytes: Sequence[int], cap_bytes: int, launch: Callable[[int], None],
                 first_cap_bytes: int | None = None) -> None:
        self.buckets: list[list[int]] = []  # bucket b's parameter indices, in the order they were added
        self.launch = launch
        cap = cap_bytes if first_cap_bytes is None else first_cap_bytes
        current, filled = [], 0
        for i in reversed(range(len(param_bytes))):
            current.append(i)
            filled += param_bytes[i]
            if filled >= cap:
                self.buckets.append(current)
                current, filled, cap = [], 0, cap_bytes
        if current:
            self.buckets.append(current)
        self.arrived = 0

    def ready(self, index: int) -> None:
        """Parameter `index`'s gradient is ready: launch every bucket that may go now, in bucket order."""
        self.arrived += 1
        if self.arrived == sum(len(m) for m in self.buckets):  # the backward pass is over: all-reduce everything
            for b in range(len(self.buckets)):
                self.launch(b)
            self.arrived = 0
''', fails=('ex11_3_launch',), teaches="a bucket's all-reduce was not launched at the moment its last gradient arrived"),
    Wrong(cell='ex11_4', label="every bucket's all-reduce starts when its bucket is ready, as if they could run at once", source='''
from collections.abc import Sequence


def exposed_comm_seconds(ready_s: Sequence[float], comm_s: Sequence[float], backward_end_s: float) -> float:
    """Seconds the buckets' all-reduces run past the end of the backward pass (one at a time, in bucket order)."""
    end = max((ready + seconds for ready, seconds in zip(ready_s, comm_s)), default=0.0)  # no queue on the stream
    return max(0.0, end - backward_end_s)
''', fails=('ex11_4_test',), teaches='an all-reduce started before the previous one had finished (one stream, one at a time)'),
    Wrong(cell='ex11_5', label='2·N·D FLOPs (the forward pass only) instead of 6·N·D', source='''
def train_days(n_params: float, tokens: float, n_gpus: int, peak_flop_per_s: float, mfu: float) -> float:
    """Days a training run of n_params parameters on `tokens` tokens takes on n_gpus GPUs at utilization mfu."""
    flops = 2 * n_params * tokens  # forgets the backward pass
    return flops / (n_gpus * peak_flop_per_s * mfu) / 86_400
''', fails=('ex11_5_test',), teaches="the days are not the run's training FLOPs over the cluster's sustained rate"),
    # second mistakes: they share the wrong-2 submission
    Wrong(cell='ex11_1', label='every message sent two ranks to the right', source='''
from collections.abc import Callable

import torch


def ring_allreduce(chunks: list[torch.Tensor], send: Callable[[int, int, int, torch.Tensor], None] | None = None
                   ) -> tuple[list[torch.Tensor], int]:
    """Every rank's buffer after a ring all-reduce of `chunks` (one per rank) and the elements rank 0 sent."""
    n = len(chunks)
    buffers = [c.clone() for c in chunks]
    segments = [torch.tensor_split(b, n) for b in buffers]
    sent = 0
    for phase in ("reduce-scatter", "all-gather"):
        for s in range(n - 1):
            index = [(r - s + (phase == "all-gather")) % n for r in range(n)]
            outgoing = [segments[r][index[r]].clone() for r in range(n)]
            for r in range(n):
                if send is not None:
                    send(r, (r + 2) % n, index[r], outgoing[r])  # two places to the right
                target = segments[(r + 2) % n][index[r]]
                if phase == "reduce-scatter":
                    target.add_(outgoing[r])
                else:
                    target.copy_(outgoing[r])
            sent += outgoing[0].numel()
    return buffers, sent
''', fails=('ex11_1_test', 'ex11_1_ring'), teaches='a rank sent to a rank other than its right neighbour (r + 1 mod N)'),
    Wrong(cell='ex11_3', label='a full bucket launched at once, before the buckets ahead of it', source='''
from collections.abc import Callable, Sequence


class GradBuckets:
    """DDP's gradient buckets: which gradients share an all-reduce, and the moment each all-reduce is launched."""

    def __init__(self, param_bytes: Sequence[int], cap_bytes: int, launch: Callable[[int], None],
                 first_cap_bytes: int | None = None) -> None:
        self.buckets: list[list[int]] = []  # bucket b's parameter indices, in the order they were added
        self.launch = launch
        cap = cap_bytes if first_cap_bytes is None else first_cap_bytes
        current, filled = [], 0
        for i in reversed(range(len(param_bytes))):
            current.append(i)
            filled += param_bytes[i]
            if filled >= cap:
                self.buckets.append(current)
                current, filled, cap = [], 0, cap_bytes
        if current:
            self.buckets.append(current)
        self.bucket_of = {i: b for b, members in enumerate(self.buckets) for i in members}
        self.waiting = [len(m) for m in self.buckets]

    def ready(self, index: int) -> None:
        """Parameter `index`'s gradient is ready: launch every bucket that may go now, in bucket order."""
        b = self.bucket_of[index]
        self.waiting[b] -= 1
        if self.waiting[b] == 0:  # full: launched at once, whatever the buckets ahead of it
            self.launch(b)
        if sum(self.waiting) == 0:
            self.waiting = [len(m) for m in self.buckets]
''', fails=('ex11_3_launch',), teaches='a full bucket was launched before the buckets ahead of it (every rank must launch the all-reduces in the same order)'),
]
