"""Notebook 06: mistakes that must lose their exercise's points (the builds: the simulator and the staging ring)."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex6_3", label="a simulator that dispatches the next batch when a step ends, not when a batch is received",
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
''', teaches="a batch is dispatched when the loop receives an earlier one, not when a step ends"),
    Wrong(cell="ex6_3", label="the closed form: the first load, then every batch at the steady rate", source='''
def simulate_loader(load_s: float, compute_s: float, workers: int, prefetch_factor: int, n_batches: int) -> float:
    """Seconds until a training loop fed by a DataLoader with `workers` processes finishes n_batches steps."""
    if workers == 0 or n_batches == 0:
        return n_batches * (load_s + compute_s)
    return load_s + (n_batches - 1) * max(load_s / workers, compute_s) + compute_s
''', teaches="the batches were not taken batch by batch: worker j mod W, one at a time, then the step"),
    Wrong(cell="ex6_4", label="a new tensor per batch in the loop's own thread (what pin_memory() on each batch does)",
          source='''
import torch


class StagingRing:
    """Batches copied by a background thread into `slots` buffers allocated once, handed to the loop in order."""

    def __init__(self, batches, slots, *, pin=False):
        self.batches, self.pin = batches, pin

    def __iter__(self):
        for batch in self.batches:
            yield batch.pin_memory() if self.pin else batch.clone()
''', teaches="the buffers were not reused: a staging ring allocates its slots once"),
    Wrong(cell="ex6_4", label="one buffer, filled by the loop itself: no thread, no overlap", source='''
import torch


class StagingRing:
    """Batches copied by a background thread into `slots` buffers allocated once, handed to the loop in order."""

    def __init__(self, batches, slots, *, pin=False):
        self.batches, self.pin = batches, pin

    def __iter__(self):
        buffer = None
        for batch in self.batches:
            if buffer is None:
                buffer = torch.empty_like(batch, pin_memory=self.pin)
            buffer.copy_(batch)
            yield buffer
''', teaches="the batches were read and copied in the training loop's thread: nothing overlapped"),
]
