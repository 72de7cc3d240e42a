"""Data loading: a synthetic dataset of controllable cost, DataLoader timings, and host-to-device transfers."""

from __future__ import annotations

import ctypes
import functools
import gc
import math
import mmap
import os
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import psutil
import torch
from torch.utils.data import DataLoader, Dataset

from lecturelib.profiler import benchmark

try:
    import resource  # page-fault counters (Unix)
except ImportError:  # pragma: no cover - Windows
    resource = None  # type: ignore[assignment]

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
    worker_cpus: tuple[int, ...] | None = None  # the CPUs each worker may run on (Linux: os.sched_setaffinity); None: all

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
        if self.worker_cpus is not None:
            parts.append(f"on CPUs {','.join(map(str, self.worker_cpus))}")
        return ", ".join(parts)

    def loader(
        self, dataset: Dataset[tuple[torch.Tensor, torch.Tensor]]
    ) -> DataLoader[tuple[torch.Tensor, torch.Tensor]]:
        """The DataLoader of this configuration over `dataset` (in order, no shuffling)."""
        init = None
        if self.worker_cpus is not None:
            if not hasattr(os, "sched_setaffinity"):
                raise ValueError(f"worker_cpus needs os.sched_setaffinity (Linux); {sys.platform} has none")
            if not self.worker_cpus:
                raise ValueError("worker_cpus must name at least one CPU")
            init = functools.partial(_run_on_cpus, self.worker_cpus)  # picklable: spawned workers get it too
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            num_workers=self.num_workers,
            pin_memory=self.pin_memory,
            persistent_workers=self.persistent_workers,
            prefetch_factor=self.prefetch_factor,
            multiprocessing_context=self.multiprocessing_context,
            worker_init_fn=init,
        )


def _run_on_cpus(cpus: tuple[int, ...], worker_id: int) -> None:
    """worker_init_fn: confine this worker process to `cpus` (the main process keeps its own CPUs)."""
    os.sched_setaffinity(0, cpus)


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
    def running_s(self) -> float:
        """From the first sample's loading to the end of the last step: the epoch without worker start-up."""
        return self.batches[-1].computed_s - min(b.load[0] for b in self.batches)

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
        """Batches per second once the pipeline has filled: whole rounds of the workers, clocked from a ready batch."""
        # Per epoch: skip the first round (W = num_workers batches, 1 without workers: they all start together),
        # then count J·W intervals from batch k to batch k + J·W, which the same worker made (batches go to the
        # workers in turn). The clock starts when batch k was *ready* (its loading ended), not when the main
        # process took it: a batch that waited for the step would start the clock late. So the rate cannot beat
        # either limit, whatever the noise: batch k + J·W came J loads after batch k on one worker (≤ W / L), and
        # J·W steps lie between taking batch k and taking it (≤ 1 / C). Without workers: ≤ 1 / (L + C).
        rounds = max(1, self.config.num_workers)
        intervals, seconds = 0, 0.0
        for epoch in self.epochs:
            k = rounds
            j = (len(epoch.batches) - 1 - k) // rounds  # whole rounds after the first
            if j < 1:
                continue
            last = k + j * rounds
            intervals += j * rounds
            seconds += epoch.batches[last].got_s - epoch.batches[k].load[1]
        if intervals == 0:
            raise ValueError(f"steady state needs an epoch of at least {2 * rounds + 1} batches with "
                             f"{self.config.num_workers} workers")
        return intervals / seconds

    @property
    def running_batches_per_s(self) -> float:
        """Batches per second from each epoch's first sample loading to its last step (worker start-up excluded)."""
        return self.n_batches / sum(e.running_s for e in self.epochs)

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
# What a worker's reading costs in memory: copy-on-access of Python objects, shared pages of arrays and files


@dataclass(frozen=True)
class WorkerMemory:
    """How much a forked DataLoader worker's memory grew while it read every element of some data once (bytes)."""

    rss: int  # resident pages the worker maps, shared ones included (what `top` shows)
    uss: int  # pages only the worker holds: its private copies
    pss: int  # each resident page divided by the number of processes mapping it (PSS)
    anonymous: int  # pages not backed by a file: copies of the parent's memory and new objects (0 where unknown)


def _anonymous_bytes() -> int:
    """Anonymous memory of this process (/proc/self/smaps_rollup), -1 where it cannot be read."""
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as file:
            for line in file:
                if line.startswith("Anonymous:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    return -1


def _memory_now() -> tuple[int, int, int, int] | None:
    """(rss, uss, pss, anonymous) of this process, or None without /proc/PID/smaps."""
    try:
        info = psutil.Process().memory_full_info()
        return int(info.rss), int(info.uss), int(getattr(info, "pss", 0)), _anonymous_bytes()
    except (psutil.Error, OSError):
        return None


class _ReadAll(Dataset[tuple[int, ...]]):
    """One item: read every element of `data` in the worker, and return how its memory grew (or (-1,))."""

    def __init__(self, data: Sequence[object] | torch.Tensor | np.ndarray) -> None:
        self.data = data

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> tuple[int, ...]:
        before = _memory_now()
        if before is None:
            return (-1,)  # no /proc/PID/smaps to read here
        if isinstance(self.data, torch.Tensor):
            float(self.data.sum())  # reads every byte of the storage; writes nothing to it
        elif isinstance(self.data, np.ndarray):
            float(self.data.sum(dtype=np.float64))  # the same for an array, a memory-mapped file's included
        else:
            for item in self.data:  # each access increments and decrements the object's reference count
                pass
        after = _memory_now()
        assert after is not None
        return tuple(int(b - a) for a, b in zip(before, after))


def worker_read_memory(
    data: Sequence[object] | torch.Tensor | np.ndarray, *, multiprocessing_context: str | None = None
) -> WorkerMemory | Unavailable:
    """What a DataLoader worker's memory grows by when it reads every element of `data` once."""
    # A forked worker shares the parent's pages until one is written. Reading a Python object writes its
    # reference count, so each page holding objects gets copied into the worker: pytorch/pytorch#13246.
    # A tensor or array is one object: its data pages are read, never written. A memory-mapped file's pages
    # belong to the page cache, one copy for every process that maps them. (spawn and forkserver workers
    # receive `data` by pickle instead: a private copy of all of it.)
    loader = DataLoader(_ReadAll(data), batch_size=None, num_workers=1, multiprocessing_context=multiprocessing_context)
    (grown,) = list(loader)
    grown = tuple(int(v) for v in grown)
    if len(grown) != 4:
        return Unavailable("psutil cannot read the worker's memory (USS, PSS) here: /proc/PID/smaps is not readable")
    rss, uss, pss, anonymous = grown
    return WorkerMemory(rss, uss, pss, max(anonymous, 0) if _anonymous_bytes() >= 0 else 0)


def copy_on_access_bytes(
    data: Sequence[object] | torch.Tensor, *, multiprocessing_context: str | None = None
) -> int | Unavailable:
    """Private bytes (USS) a forked DataLoader worker gains by reading every element of `data` once."""
    grown = worker_read_memory(data, multiprocessing_context=multiprocessing_context)
    return grown if isinstance(grown, Unavailable) else grown.uss


# ---------------------------------------------------------------------------------------------
# Memory-mapped files: a dataset on disk, read through the operating system's page cache


def filesystem_type(path: str | os.PathLike[str]) -> str:
    """The type of the filesystem holding `path` ("ext4", "tmpfs", "overlay", ...); "unknown" without /proc."""
    target = os.path.realpath(path)
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as file:
            lines = file.read().splitlines()
    except OSError:
        return "unknown"
    best, fstype = "", "unknown"
    for line in lines:  # "... mount_point options ... - fstype source super_options"; later mounts hide earlier ones
        left, _, right = line.partition(" - ")
        fields = left.split()
        if len(fields) < 5 or not right:
            continue
        mount_point = fields[4].encode().decode("unicode_escape")  # "\040" is a space
        inside = target == mount_point or target.startswith(mount_point.rstrip("/") + "/")
        if inside and len(mount_point) >= len(best):
            best, fstype = mount_point, right.split()[0]
    return fstype


def _libc() -> ctypes.CDLL | None:
    try:
        return ctypes.CDLL(None, use_errno=True)  # the C library this process already uses
    except OSError:
        return None


def page_cache_fraction(path: str | os.PathLike[str]) -> float | Unavailable:
    """The fraction of a file's pages in the page cache now (mincore on a fresh mapping, which faults nothing in)."""
    size = os.path.getsize(path)
    if size == 0:
        raise ValueError(f"{path} is empty")
    libc = _libc()
    if libc is None or not hasattr(libc, "mincore"):
        return Unavailable(f"no mincore() in this C library ({sys.platform})")
    with open(path, "rb") as file:
        mapping = mmap.mmap(file.fileno(), size, access=mmap.ACCESS_READ)
    view = np.frombuffer(mapping, dtype=np.uint8)  # only to learn the mapping's address: nothing is read
    try:
        pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
        vector = (ctypes.c_ubyte * pages)()
        if libc.mincore(ctypes.c_void_p(view.ctypes.data), ctypes.c_size_t(size), vector) != 0:
            return Unavailable(f"mincore() failed: {os.strerror(ctypes.get_errno())}")
        resident = sum(byte & 1 for byte in bytes(vector))  # bit 0: the page is in memory
    finally:
        del view
        mapping.close()
    return resident / pages


def drop_from_page_cache(path: str | os.PathLike[str]) -> None | Unavailable:
    """Ask the kernel to drop a file's pages from the page cache (fsync, then posix_fadvise DONTNEED): no root needed."""
    # Advice, not an order: pages that a process maps stay, dirty pages are written first (hence fsync), and a
    # filesystem that lives in memory (tmpfs) has nowhere else to keep them. Check with page_cache_fraction().
    # Dropping the whole cache (echo 3 > /proc/sys/vm/drop_caches) needs root, and no call reaches a cache below
    # the operating system (a disk's or a virtual machine's host).
    if not hasattr(os, "posix_fadvise"):
        return Unavailable(f"no posix_fadvise on {sys.platform}")
    with open(path, "rb") as file:
        os.fsync(file.fileno())
        os.posix_fadvise(file.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
    return None


def mapped_rss_bytes(path: str | os.PathLike[str]) -> int | Unavailable:
    """Resident bytes of this process's mappings of `path` (its pages mapped here, from /proc/self/smaps)."""
    target = os.path.realpath(path)
    try:
        maps = psutil.Process().memory_maps(grouped=True)
    except (psutil.Error, OSError, AttributeError, NotImplementedError):
        return Unavailable(f"psutil cannot list this process's mappings on {sys.platform}")
    return sum(int(m.rss) for m in maps if m.path == target)


def page_faults() -> tuple[int, int]:
    """(major, minor) page faults of this thread so far: a major one read a page from disk, a minor one mapped a cached page."""
    if resource is None:
        return (0, 0)
    usage = resource.getrusage(getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF))
    return int(usage.ru_majflt), int(usage.ru_minflt)


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
    """Line rate of a PCIe link in one direction after line encoding: GT/s × lanes × encoding / 8 bits."""
    # Not the payload a copy reaches: every packet (TLP) also carries a header, a sequence number and a CRC,
    # and the link carries acknowledgements and flow-control packets; copies reach about 0.8-0.9 of this.
    if generation not in PCIE_GENERATIONS:
        raise ValueError(f"PCIe generation must be one of {sorted(PCIE_GENERATIONS)}, got {generation}")
    if lanes <= 0:
        raise ValueError(f"lanes must be positive, got {lanes}")
    transfers_per_s, encoding = PCIE_GENERATIONS[generation]
    return transfers_per_s * lanes * encoding / 8


@dataclass(frozen=True)
class PcieLink:
    """The PCIe link of a device, read from Linux sysfs: the fastest it can train to, and what it runs at now."""

    address: str  # the PCI address, e.g. "0000:17:00.0"
    max_generation: int  # the lower of the device's and its port's maximum generation
    max_lanes: int  # the lower of the device's and its port's maximum width
    current_generation: int  # now: GPUs drop to a slower generation when idle, so read it under load
    current_lanes: int

    @property
    def max_bytes_per_s(self) -> float:
        """pcie_bytes_per_s() of the link at its maximum generation and width."""
        return pcie_bytes_per_s(self.max_generation, self.max_lanes)


_GT_PER_S_TO_GENERATION = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}  # PCIe 6 runs 64 GT/s (PAM4)


def _sysfs_generation(text: str) -> int | None:
    """"16.0 GT/s PCIe" (sysfs link speed) -> 4; None for "Unknown" and the like."""
    try:
        return _GT_PER_S_TO_GENERATION.get(float(text.split()[0]))
    except (ValueError, IndexError):
        return None


def pcie_link(address: str, *, sysfs: str | os.PathLike[str] = "/sys/bus/pci/devices") -> PcieLink | Unavailable:
    """The PCIe link of the device at `address` ("DDDD:BB:DD.F"), from sysfs; Unavailable where it cannot be read."""
    # A device trains its link to the lower of its own and its upstream port's abilities: read both maxima.
    # current_link_speed is what runs now; an idle NVIDIA GPU drops to a lower generation to save power.
    device = Path(sysfs) / address

    def read(path: Path, name: str) -> str | None:
        try:
            return (path / name).read_text().strip()
        except OSError:
            return None

    fields = {name: read(device, name) for name in
              ("max_link_speed", "max_link_width", "current_link_speed", "current_link_width")}
    if any(v is None for v in fields.values()):
        return Unavailable(f"no PCIe link attributes for {address} under {sysfs} (not Linux, or not a PCIe device)")
    port = device.resolve().parent  # the bridge or root port the device hangs off
    port_speed, port_width = read(port, "max_link_speed"), read(port, "max_link_width")
    generations = [g for g in (_sysfs_generation(fields["max_link_speed"] or ""),
                               _sysfs_generation(port_speed or "")) if g is not None]
    current = _sysfs_generation(fields["current_link_speed"] or "")
    try:
        widths = [int(w) for w in (fields["max_link_width"], port_width) if w is not None and w.isdigit()]
        current_lanes = int(fields["current_link_width"] or "")
    except ValueError:
        return Unavailable(f"unreadable link width for {address}: {fields}")
    if not generations or not widths or current is None:
        return Unavailable(f"unreadable link speed for {address}: {fields}")
    return PcieLink(address, min(generations), min(widths), current, current_lanes)


def cuda_pcie_link(device: int = 0) -> PcieLink | Unavailable:
    """The PCIe link of a CUDA device (its PCI address from torch, its link from sysfs)."""
    reason = cuda_unavailable_reason()
    if reason is not None:
        return Unavailable(reason)
    props = torch.cuda.get_device_properties(device)
    fields = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if not all(isinstance(f, int) for f in fields):
        return Unavailable(f"this PyTorch ({torch.__version__}) does not report the device's PCI address")
    domain, bus, slot = fields  # the fields torch.numa.binding formats into a sysfs address
    address = f"{domain:04x}:{bus:02x}:{slot:02x}.0"
    return pcie_link(address)


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


OVERLAP_RUNS = ("pageable, one stream", "pinned, one stream", "pinned, side stream")


@dataclass(frozen=True)
class Overlap:
    """A host-to-device copy and some matmuls, timed three ways that change one thing at a time (ms from start)."""

    copy_bytes: int
    runs: dict[str, dict[str, list[Span]]]  # OVERLAP_RUNS -> {"copy": [span], "compute": [span]}
    total_ms: dict[str, float]  # OVERLAP_RUNS -> from the start to the end of the later of copy and compute
    available: Literal[True] = True


def overlap_demo(copy_bytes: int, matmul_n: int, *, matmuls: int = 4) -> Overlap | Unavailable:
    """Time a host-to-device copy and `matmuls` bf16 matmuls: pageable vs pinned on one stream, then on two streams."""
    # The overlapped pattern is the DataLoader's: copy batch k+1 while the GPU computes on batch k. It needs a
    # pinned source, non_blocking=True, and a stream other than the one computing (PyTorch's pin_memory and
    # non_blocking tutorial); the GPU must have a free copy engine. The three runs change one thing at a time:
    # pageable -> pinned on the same stream (the copy itself gets faster, nothing overlaps: one stream runs its
    # work in order), then pinned on a side stream (the copy now runs beside the matmuls).
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

    def run(name: str) -> tuple[dict[str, list[Span]], float]:
        torch.cuda.synchronize()
        start, c0, c1, m0, m1 = event(), event(), event(), event(), event()
        start.record(main)
        if name == "pinned, side stream":
            side.wait_event(start)  # the side stream starts with the main one, not before
            with torch.cuda.stream(side):
                c0.record(side)
                dst.copy_(pinned, non_blocking=True)  # returns at once: a DMA queued on the side stream
                c1.record(side)
            m0.record(main)
            compute()  # queued on the main stream while the copy runs
            m1.record(main)
            main.wait_stream(side)  # anything on main after this sees the copied bytes
        else:
            c0.record(main)
            if name == "pageable, one stream":
                dst.copy_(pageable)  # the host stages the bytes through a pinned buffer before returning
            else:
                dst.copy_(pinned, non_blocking=True)  # returns at once, but the matmuls queue behind it
            c1.record(main)
            m0.record(main)
            compute()
            m1.record(main)
        torch.cuda.synchronize()
        spans = {"copy": [(start.elapsed_time(c0), start.elapsed_time(c1))],
                 "compute": [(start.elapsed_time(m0), start.elapsed_time(m1))]}
        return spans, max(start.elapsed_time(c1), start.elapsed_time(m1))

    for name in OVERLAP_RUNS:  # warm-up: cuBLAS handle, kernels loaded, allocators primed
        run(name)
    results = {name: run(name) for name in OVERLAP_RUNS}
    return Overlap(copy_bytes, {k: v[0] for k, v in results.items()}, {k: v[1] for k, v in results.items()})


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
