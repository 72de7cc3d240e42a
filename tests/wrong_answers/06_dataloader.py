"""Notebook 06: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex6_1", label="np.prod of the shape: a float for a scalar sample", source='''
from collections.abc import Sequence

import numpy as np


def batch_bytes(batch: int, sample_shape: Sequence[int], element_bytes: int) -> int:
    """Bytes of `batch` samples of `sample_shape` with `element_bytes` bytes per element."""
    return batch * np.prod(sample_shape) * element_bytes
'''),
    Wrong(cell="ex6_6", label="a simulator that dispatches the next batch when a step ends, not when a batch is received",
          source='''
def simulate_loader(load_s: float, compute_s: float, workers: int, prefetch_factor: int, n_batches: int) -> float:
    """Seconds until a training loop fed by a DataLoader with `workers` processes finishes n_batches steps."""
    if workers == 0:
        return n_batches * (load_s + compute_s)
    in_flight = prefetch_factor * workers
    worker_free = [0.0] * workers
    step_ends: list[float] = []
    step_end = 0.0
    for j in range(n_batches):
        dispatched = 0.0 if j < in_flight else step_ends[j - in_flight]  # at consume time: one step too late
        worker = j % workers
        loaded = max(dispatched, worker_free[worker]) + load_s
        worker_free[worker] = loaded
        step_end = max(loaded, step_end) + compute_s
        step_ends.append(step_end)
    return step_end
'''),
]
