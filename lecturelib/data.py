"""Data loading: a synthetic dataset of controllable cost, DataLoader timings, and host-to-device transfers."""

from __future__ import annotations

import gc
import math
import os
import statistics
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import psutil
import torch
from torch.utils.data import DataLoader, Dataset

from lecturelib.profiler import benchmark

Work = Literal["sleep", "cpu"]  # how a cost is spent: waiting (like I/O) or computing on one core (like decoding)
Span = tuple[float, float]  # (start, end) in time.perf_counter() seconds


def spend(seconds: float, work: Work = "sleep") -> None:
    """Spend `seconds` waiting (sleep) or computing (cpu: arithmetic until this thread's CPU time grew that much)."""
    if seconds <= 0:
        return
    if work == "sleep":
        time.sleep(seconds)  # the core is free meanwhile: another process can use it
        return
    if work != "cpu":
        raise ValueError(f"work must be 'sleep' or 'cpu', got {work!r}")
    # thread_time counts CPU time of this thread only: on a busy machine the wall time grows, the work does not
    end = time.thread_time() + seconds
    x = 0
    while time.thread_time() < end:
        for i in range(200):
            x += i * i


# ---------------------------------------------------------------------------------------------
# A synthetic map-style dataset


class SyntheticDataset(Dataset[tuple[torch.Tensor, torch.Tensor]]):
    """n_samples tensors of sample_shape; sample i is filled with i and costs cost_s of work to produce."""

    def __init__(
        self,
        n_samples: int,
        sample_shape: Sequence[int],
        *,
        cost_s: float = 0.0,
        work: Work = "sleep",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if n_samples <= 0 or any(d <= 0 for d in sample_shape):
            raise ValueError(f"n_samples and sample_shape must be positive, got {n_samples} and {tuple(sample_shape)}")
        if not (math.isfinite(cost_s) and cost_s >= 0):
            raise ValueError(f"cost_s must be a non-negative number of seconds, got {cost_s}")
        if work not in ("sleep", "cpu"):
            raise ValueError(f"work must be 'sleep' or 'cpu', got {work!r}")
        self.n_samples = n_samples
        self.sample_shape = tuple(sample_shape)
        self.cost_s = cost_s
        self.work: Work = work
        self.dtype = dtype

    def __len__(self) -> int:
        return self.n_samples

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(sample, trace): the sample, and [pid, start, end] of the process that made it (perf_counter seconds)."""
        if not 0 <= index < self.n_samples:
            raise IndexError(f"index {index} out of range for {self.n_samples} samples")
        start = time.perf_counter()  # CLOCK_MONOTONIC on Linux: one clock for every process of the machine
        spend(self.cost_s, self.work)
        sample = torch.full(self.sample_shape, float(index), dtype=self.dtype)
        end = time.perf_counter()
        return sample, torch.tensor([float(os.getpid()), start, end], dtype=torch.float64)

    def sample_bytes(self) -> int:
        """Bytes of one sample: elements × bytes per element."""
        return math.prod(self.sample_shape) * torch.empty((), dtype=self.dtype).element_size()


# ---------------------------------------------------------------------------------------------
# Timing a DataLoader configuration


@dataclass(frozen=True)
class LoaderConfig:
    """The DataLoader arguments that decide how batches are produced (the rest keep their defaults)."""

    batch_size: int = 8
    num_workers: int = 0  # 0: the main process loads each batch itself, when it asks for it
    pin_memory: bool = False  # copy each batch into page-locked memory (needs an accelerator; ignored without one)
    persistent_workers: bool = False  # keep the worker processes from one epoch to the next (needs num_workers > 0)
    prefetch_factor: int | None = None  # batches in flight per worker (None: DataLoader's default, 2 with workers)
    multiprocessing_context: str | None = None  # "fork", "spawn", "forkserver"; None: the platform's default

    def label(self) -> str:
        """A short description, e.g. "2 workers, persistent, prefetch 4"."""
        parts = [f"{self.num_workers} worker{'s' if self.num_workers != 1 else ''}"]
        if self.persistent_workers:
            parts.append("persistent")
        if self.prefetch_factor is not None:
            parts.append(f"prefetch {self.prefetch_factor}")
        if self.pin_memory:
            parts.append("pinned")
        if self.multiprocessing_context is not None:
            parts.append(self.multiprocessing_context)
        return ", ".join(parts)

    def loader(
        self, dataset: Dataset[tuple[torch.Tensor, torch.Tensor]]
    ) -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
        """The DataLoader of this configuration over `dataset` (in order, no shuffling)."""
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.persistent_workers,
            prefetch_factor=self.prefetch_factor,
            multiprocessing_context=self.multiprocessing_context,
        )


@dataclass(frozen=True)
class BatchRecord:
    """One batch as the main process saw it, times in perf_counter seconds."""

    asked_s: float  # the main process called next()
    got_s: float  # next() returned the batch
    computed_s: float  # the simulated training step on it finished
    load: Span  # first start to last end of its samples' work, in the process that made them
    pid: int  # that process (the main process itself when num_workers = 0)


@dataclass(frozen=True)
class EpochTiming:
    """One pass over the dataset: iter(loader), then next() and a simulated step per batch."""

    started_s: float  # perf_counter when iter(loader) was called
    iter_s: float  # how long iter(loader) took: starting workers (unless persistent) and sending the first indices
    ended_s: float  # perf_counter after the loop ended (workers of a non-persistent loader shut down by then)
    batches: tuple[BatchRecord, ...]

    @property
    def seconds(self) -> float:
        """Wall time of the epoch, start-up included."""
        return self.ended_s - self.started_s

    @property
    def first_batch_s(self) -> float:
        """From iter(loader) to the first batch in hand: start-up plus one batch's loading."""
        return self.batches[0].got_s - self.started_s

    @property
    def end_s(self) -> float:
        """From the last step to the end of the loop: the last next(), where a non-persistent loader joins workers."""
        return self.ended_s - self.batches[-1].computed_s

    @property
    def wait_s(self) -> float:
        """Time the main process spent waiting for data: iter(loader) and every next()."""
        return self.iter_s + sum(b.got_s - b.asked_s for b in self.batches)

    @property
    def worker_pids(self) -> tuple[int, ...]:
        """The processes that made this epoch's samples, sorted."""
        return tuple(sorted({b.pid for b in self.batches}))


@dataclass(frozen=True)
class LoaderTiming:
    """What time_loader measured for one configuration over several epochs."""

    config: LoaderConfig
    compute_s: float  # the simulated training step per batch
    main_pid: int  # the process that iterated (a worker pid is never this one)
    epochs: tuple[EpochTiming, ...]
    pinned: bool  # whether the batches came back in page-locked memory
    warnings: tuple[str, ...]  # what PyTorch warned while the loader ran (kept here, not printed)

    @property
    def n_batches(self) -> int:
        """Batches over all epochs."""
        return sum(len(e.batches) for e in self.epochs)

    @property
    def seconds(self) -> float:
        """Wall time of all epochs, start-up included."""
        return sum(e.seconds for e in self.epochs)

    @property
    def batches_per_s(self) -> float:
        """Batches per second over all epochs, worker start-up and shut-down included."""
        return self.n_batches / self.seconds

    @property
    def steady_batches_per_s(self) -> float:
        """1 / the median time between two consecutive batches arriving in the main process (start-up excluded)."""
        gaps = [b.got_s - a.got_s for e in self.epochs for a, b in zip(e.batches, e.batches[1:])]
        if not gaps:
            raise ValueError("steady state needs at least two batches in an epoch")
        return 1 / statistics.median(gaps)

    @property
    def wait_per_batch_s(self) -> float:
        """The main process's wait for data per batch, start-up included."""
        return sum(e.wait_s for e in self.epochs) / self.n_batches

    @property
    def worker_processes(self) -> int:
        """How many worker processes made samples over the run (0 when the main process loaded them)."""
        return len({pid for e in self.epochs for pid in e.worker_pids} - {self.main_pid})


def time_loader(
    dataset: Dataset[tuple[torch.Tensor, torch.Tensor]],
    config: LoaderConfig,
    *,
    epochs: int = 1,
    compute_s: float = 0.0,
    compute_work: Work = "sleep",
) -> LoaderTiming:
    """Iterate `epochs` epochs of a DataLoader, spending compute_s per batch as a training step, and time it all."""
    # The dataset must return (sample, trace) as SyntheticDataset does: trace[:, 0] pid, [:, 1:] the work's span.
    # compute_work="sleep" models a GPU step: the main thread waits for the GPU and its core is free.
    if epochs <= 0:
        raise ValueError(f"epochs must be positive, got {epochs}")
    records: list[EpochTiming] = []
    pinned = False
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # every warning recorded, none printed
        loader = config.loader(dataset)
        for _ in range(epochs):
            batches: list[BatchRecord] = []
            started = time.perf_counter()
            iterator = iter(loader)  # workers start here (every epoch unless persistent)
            iter_done = time.perf_counter()
            while True:
                asked = time.perf_counter()
                try:
                    samples, trace = next(iterator)  # trace: (batch, 3) float64
                except StopIteration:
                    break
                got = time.perf_counter()
                spend(compute_s, compute_work)
                pinned = bool(samples.is_pinned())
                load = (float(trace[:, 1].min()), float(trace[:, 2].max()))
                batches.append(BatchRecord(asked, got, time.perf_counter(), load, int(trace[0, 0])))
            del iterator
            records.append(EpochTiming(started, iter_done - started, time.perf_counter(), tuple(batches)))
        del loader  # a persistent loader's workers end with it
        gc.collect()
    if any(len(e.batches) == 0 for e in records):
        raise ValueError("the dataset gave no batch")
    return LoaderTiming(
        config=config,
        compute_s=compute_s,
        main_pid=os.getpid(),
        epochs=tuple(records),
        pinned=pinned,
        warnings=tuple(dict.fromkeys(str(w.message) for w in caught)),  # each message once, in order
    )


def pipeline_spans(timing: LoaderTiming, epoch: int = 0) -> dict[str, list[Span]]:
    """One epoch as a timeline from its start: each loading process's work, the main process's waits and steps."""
    record = timing.epochs[epoch]
    t0 = record.started_s
    workers = [pid for pid in record.worker_pids if pid != timing.main_pid]
    rows: dict[str, list[Span]] = {f"worker {k} loads": [] for k in range(len(workers))}  # workers first, in order
    for b in record.batches:
        name = "main loads" if b.pid == timing.main_pid else f"worker {workers.index(b.pid)} loads"
        rows.setdefault(name, []).append((b.load[0] - t0, b.load[1] - t0))
    rows["main waits"] = [(0.0, record.iter_s)] + [(b.asked_s - t0, b.got_s - t0) for b in record.batches]
    rows["main computes"] = [(b.got_s - t0, b.computed_s - t0) for b in record.batches]
    return rows


# ---------------------------------------------------------------------------------------------
# What this machine cannot measure


@dataclass(frozen=True)
class Unavailable:
    """A measurement that cannot be made on this machine, and why."""

    reason: str
    available: Literal[False] = False


# ---------------------------------------------------------------------------------------------
# Copy-on-access: what a worker's reading of Python objects costs in memory


class _ReadAll(Dataset[int]):
    """One item: read every element of `data` in the worker, and return how many private bytes that added."""

    def __init__(self, data: Sequence[object] | torch.Tensor) -> None:
        self.data = data

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> int:
        try:
            process = psutil.Process()
            before = process.memory_full_info().uss  # bytes only this process holds (its copied pages)
        except (psutil.Error, OSError):
            return -1  # no /proc/PID/smaps to read here
        if isinstance(self.data, torch.Tensor):
            float(self.data.sum())  # reads every byte of the storage; writes nothing to it
        else:
            for item in self.data:  # each access increments and decrements the object's reference count
                pass
        return int(process.memory_full_info().uss - before)


def copy_on_access_bytes(
    data: Sequence[object] | torch.Tensor, *, multiprocessing_context: str | None = None
) -> int | Unavailable:
    """Private bytes a forked DataLoader worker gains by reading every element of `data` once (the "memory leak")."""
    # A forked worker shares the parent's pages until one is written. Reading a Python object writes its
    # reference count, so each page holding objects gets copied into the worker: pytorch/pytorch#13246.
    loader = DataLoader(_ReadAll(data), batch_size=None, num_workers=1, multiprocessing_context=multiprocessing_context)
    (grown,) = list(loader)
    if grown < 0:
        return Unavailable("psutil cannot read the worker's private memory (USS) here: /proc/PID/smaps is not readable")
    return int(grown)


# ---------------------------------------------------------------------------------------------
# Host-to-device transfers (CUDA only; a clear "not measurable here" elsewhere)


def cuda_unavailable_reason() -> str | None:
    """Why CUDA transfers cannot be measured here, or None when they can."""
    if torch.cuda.is_available():
        return None
    if torch.version.cuda is None:
        build = f"this PyTorch ({torch.__version__}) is built without CUDA"
    else:
        build = f"this PyTorch ({torch.__version__}, CUDA {torch.version.cuda}) finds no CUDA GPU"
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    other = ""
    if accelerator is not None:
        other = f"; the accelerator here is {accelerator.type}, and these measurements use CUDA streams and events"
    return f"{build}{other}: there is no device to copy to, and pinned memory needs a CUDA allocator"


# PCI Express per lane: transfer rate (GT/s) and line encoding, by generation (PCI-SIG base specifications
# 1.0-5.0, tabulated at https://en.wikipedia.org/wiki/PCI_Express#Comparison_table). Gen 1-2 send 8 bits in 10,
# gen 3-5 send 128 in 130.
PCIE_GENERATIONS: dict[int, tuple[float, float]] = {
    1: (2.5e9, 8 / 10),
    2: (5e9, 8 / 10),
    3: (8e9, 128 / 130),
    4: (16e9, 128 / 130),
    5: (32e9, 128 / 130),
}


def pcie_bytes_per_s(generation: int, lanes: int = 16) -> float:
    """Peak payload bytes per second of a PCIe link in one direction: GT/s × lanes × encoding / 8 bits."""
    if generation not in PCIE_GENERATIONS:
        raise ValueError(f"PCIe generation must be one of {sorted(PCIE_GENERATIONS)}, got {generation}")
    if lanes <= 0:
        raise ValueError(f"lanes must be positive, got {lanes}")
    transfers_per_s, encoding = PCIE_GENERATIONS[generation]
    return transfers_per_s * lanes * encoding / 8


def staged_copy_bytes_per_s(memcpy_bytes_per_s: float, link_bytes_per_s: float) -> tuple[float, float]:
    """Bounds on a pageable copy's rate, staged through pinned memory: (one step after the other, both overlapped)."""
    # The driver memcpy's the pageable bytes into a pinned buffer, then DMAs the buffer over the link. Done one
    # after the other: 1 / (1/m + 1/l). Overlapped chunk by chunk (double buffering): the slower of the two.
    if not (memcpy_bytes_per_s > 0 and link_bytes_per_s > 0):
        raise ValueError("rates must be positive")
    serial = 1 / (1 / memcpy_bytes_per_s + 1 / link_bytes_per_s)
    return serial, min(memcpy_bytes_per_s, link_bytes_per_s)


def host_memcpy_bytes_per_s(n_bytes: int, *, repeats: int = 20, threads: int = 1) -> float:
    """Bytes per second of the fastest of `repeats` pageable host-to-host copies (one thread, as staging does)."""
    # Counted once (payload), unlike hardware.measure_copy_bytes_per_s, which counts read + write (STREAM). The
    # fastest call, not the median: on a shared machine most calls are slowed by other processes, the fastest least.
    if n_bytes <= 0 or repeats <= 0 or threads <= 0:
        raise ValueError("n_bytes, repeats and threads must be positive")
    src = torch.ones(n_bytes, dtype=torch.uint8)
    dst = torch.empty_like(src)
    dst.copy_(src)  # first touch: the destination's pages are faulted in here, not in a timed call
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        fastest = math.inf
        for _ in range(repeats):
            start = time.perf_counter()
            dst.copy_(src)
            fastest = min(fastest, time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    return n_bytes / fastest


@dataclass(frozen=True)
class H2DSweep:
    """Host-to-device copy bandwidth, from pageable and from pinned memory, at each size."""

    device: str  # torch.cuda.get_device_name()
    sizes_bytes: tuple[int, ...]
    pageable_bytes_per_s: tuple[float, ...]  # dst.copy_(pageable): staged through a pinned buffer by the driver
    pinned_bytes_per_s: tuple[float, ...]  # dst.copy_(pinned, non_blocking=True): DMA straight from the source
    available: Literal[True] = True


def _cuda_copy_seconds(src: torch.Tensor, dst: torch.Tensor, *, non_blocking: bool, min_run_time_s: float) -> float:
    """Median seconds of dst.copy_(src) (benchmark synchronizes CUDA after each timed block)."""
    return benchmark(lambda: dst.copy_(src, non_blocking=non_blocking), min_run_time_s=min_run_time_s).median_s


def h2d_bandwidth(sizes_bytes: Sequence[int], *, min_run_time_s: float = 0.1) -> H2DSweep | Unavailable:
    """Bytes per second of host-to-device copies from pageable and from pinned memory, per size (CUDA)."""
    if not sizes_bytes or any(n <= 0 for n in sizes_bytes):
        raise ValueError(f"sizes_bytes must be positive, got {list(sizes_bytes)}")
    reason = cuda_unavailable_reason()
    if reason is not None:
        return Unavailable(reason)
    pageable_rates, pinned_rates = [], []
    for n in sizes_bytes:
        pageable = torch.ones(n, dtype=torch.uint8)
        pinned = torch.ones(n, dtype=torch.uint8, pin_memory=True)
        dst = torch.empty(n, dtype=torch.uint8, device="cuda")
        pageable_rates.append(n / _cuda_copy_seconds(pageable, dst, non_blocking=False, min_run_time_s=min_run_time_s))
        pinned_rates.append(n / _cuda_copy_seconds(pinned, dst, non_blocking=True, min_run_time_s=min_run_time_s))
        del pageable, pinned, dst
    return H2DSweep(torch.cuda.get_device_name(), tuple(sizes_bytes), tuple(pageable_rates), tuple(pinned_rates))


@dataclass(frozen=True)
class PinCost:
    """What pinning n_bytes costs, next to the copies it is meant to speed up (seconds, medians)."""

    n_bytes: int
    first_pin_s: float  # the first t.pin_memory() of this size: cudaHostAlloc (page-locking) and the copy
    pin_s: float  # t.pin_memory() again: PyTorch's host allocator reuses the freed pinned block, so only the copy
    pageable_to_device_s: float  # t.to("cuda"): the driver stages it through its own pinned buffer
    pinned_to_device_s: float  # p.to("cuda", non_blocking=True) from memory already pinned, then synchronize
    pin_then_to_device_s: float  # t.pin_memory().to("cuda", non_blocking=True): pinning on the critical path
    available: Literal[True] = True


def pin_cost(n_bytes: int, *, min_run_time_s: float = 0.1) -> PinCost | Unavailable:
    """The cost of pin_memory() itself, against pageable and pinned host-to-device copies of the same bytes (CUDA)."""
    if n_bytes <= 0:
        raise ValueError(f"n_bytes must be positive, got {n_bytes}")
    reason = cuda_unavailable_reason()
    if reason is not None:
        return Unavailable(reason)
    pageable = torch.ones(n_bytes, dtype=torch.uint8)
    torch.cuda.synchronize()
    start = time.perf_counter()
    pinned = pageable.pin_memory()  # blocks the host until the copy into page-locked memory is done
    first_pin_s = time.perf_counter() - start

    def to_device(t: torch.Tensor, non_blocking: bool) -> Callable[[], object]:
        return lambda: t.to("cuda", non_blocking=non_blocking)

    return PinCost(
        n_bytes=n_bytes,
        first_pin_s=first_pin_s,
        pin_s=benchmark(pageable.pin_memory, min_run_time_s=min_run_time_s).median_s,
        pageable_to_device_s=benchmark(to_device(pageable, False), min_run_time_s=min_run_time_s).median_s,
        pinned_to_device_s=benchmark(to_device(pinned, True), min_run_time_s=min_run_time_s).median_s,
        pin_then_to_device_s=benchmark(
            lambda: pageable.pin_memory().to("cuda", non_blocking=True), min_run_time_s=min_run_time_s
        ).median_s,
    )


@dataclass(frozen=True)
class Overlap:
    """A copy and a matmul run one after the other, then side by side on two CUDA streams (milliseconds from start)."""

    copy_bytes: int
    serial: dict[str, list[Span]]  # "copy", "compute": pageable copy, then compute, on the default stream
    overlapped: dict[str, list[Span]]  # pinned copy on a side stream (non_blocking) while compute runs
    serial_ms: float
    overlapped_ms: float
    available: Literal[True] = True


def overlap_demo(copy_bytes: int, matmul_n: int, *, matmuls: int = 4) -> Overlap | Unavailable:
    """Time a host-to-device copy and `matmuls` bf16 matmuls serially, then overlapped (CUDA streams and events)."""
    # The overlapped pattern is the DataLoader's: copy batch k+1 while the GPU computes on batch k. Three things
    # are needed (PyTorch's pin_memory/non_blocking tutorial): a pinned source, non_blocking=True, and a stream
    # other than the one computing; the GPU must have a free copy engine.
    if copy_bytes <= 0 or matmul_n <= 0 or matmuls <= 0:
        raise ValueError("copy_bytes, matmul_n and matmuls must be positive")
    reason = cuda_unavailable_reason()
    if reason is not None:
        return Unavailable(reason)
    pageable = torch.ones(copy_bytes, dtype=torch.uint8)
    pinned = pageable.pin_memory()
    dst = torch.empty(copy_bytes, dtype=torch.uint8, device="cuda")
    a = torch.randn(matmul_n, matmul_n, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()

    def event() -> torch.cuda.Event:
        return torch.cuda.Event(enable_timing=True)

    def compute() -> None:
        for _ in range(matmuls):
            a @ a

    def run(overlapped: bool) -> tuple[dict[str, list[Span]], float]:
        torch.cuda.synchronize()
        start, c0, c1, m0, m1 = event(), event(), event(), event(), event()
        start.record(main)
        if overlapped:
            side.wait_event(start)  # the side stream starts with the main one, not before
            with torch.cuda.stream(side):
                c0.record(side)
                dst.copy_(pinned, non_blocking=True)  # returns at once: a DMA on the side stream
                c1.record(side)
            m0.record(main)
            compute()  # queued on the main stream while the copy runs
            m1.record(main)
            main.wait_stream(side)  # anything on main after this sees the copied bytes
        else:
            c0.record(main)
            dst.copy_(pageable)  # blocks the host until the staged copy is done
            c1.record(main)
            m0.record(main)
            compute()
            m1.record(main)
        torch.cuda.synchronize()
        spans = {"copy": [(start.elapsed_time(c0), start.elapsed_time(c1))],
                 "compute": [(start.elapsed_time(m0), start.elapsed_time(m1))]}
        total = max(start.elapsed_time(c1), start.elapsed_time(m1))
        return spans, total

    run(False)  # warm-up: cuBLAS handle, kernels loaded, allocators primed
    run(True)
    serial, serial_ms = run(False)
    overlapped, overlapped_ms = run(True)
    return Overlap(copy_bytes, serial, overlapped, serial_ms, overlapped_ms)


@dataclass(frozen=True)
class D2HHazard:
    """Device-to-host copies with non_blocking=True, read at once or after torch.cuda.synchronize()."""

    n_elements: int
    trials: int
    wrong_before_sync: int  # trials whose host tensor did not yet hold the values when read
    wrong_after_sync: int  # the same after synchronizing: 0
    available: Literal[True] = True


def d2h_hazard(n_elements: int, trials: int = 20) -> D2HHazard | Unavailable:
    """Count reads of a device→host non_blocking copy that see stale data, without and with synchronizing (CUDA)."""
    # A host→device non_blocking copy is safe: later kernels on the stream wait for it. Device→host is not: the
    # host thread goes on while the copy is queued, and reading the CPU tensor is not a CUDA operation.
    if n_elements <= 0 or trials <= 0:
        raise ValueError("n_elements and trials must be positive")
    reason = cuda_unavailable_reason()
    if reason is not None:
        return Unavailable(reason)
    wrong_before = wrong_after = 0
    for trial in range(trials):
        value = float(trial + 1)  # a new value each trial: a reused pinned block never holds the answer already
        src = torch.full((n_elements,), value, device="cuda")  # a kernel queued just before the copy
        host = src.to("cpu", non_blocking=True)  # pinned destination, copy queued, returns at once
        wrong_before += int(host[-1].item() != value)  # the host reads it now
        torch.cuda.synchronize()
        wrong_after += int(host[-1].item() != value)
    return D2HHazard(n_elements, trials, wrong_before, wrong_after)
