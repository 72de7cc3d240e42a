"""Profiling: a torch.utils.benchmark timer, interleaved A/B timing, memory snapshots, the peak memory of a call, live tensor bytes."""

from __future__ import annotations

import ctypes
import statistics
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import psutil
import torch
import torch.utils.benchmark
from torch.multiprocessing.reductions import StorageWeakRef
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


def _accelerator() -> torch.device | None:
    """The accelerator torch would use (cuda, mps, ...), or None on a CPU-only machine."""
    return torch.accelerator.current_accelerator(check_available=True)


def _synchronize() -> None:
    """Wait for queued accelerator work; kernels launch asynchronously (a CPU-GPU sync point)."""
    if _accelerator() is not None:
        torch.accelerator.synchronize()


@dataclass(frozen=True)
class Timing:
    """The result of benchmark(): median and spread of one call's time."""

    median_s: float  # median seconds per call
    iqr_s: float  # interquartile range of the per-call times, seconds
    n_runs: int  # timed blocks; each block ran the callable number_per_run times
    number_per_run: int  # calls per block (one block's time / number_per_run is one sample)
    device: str  # what was synchronized around each block: "cuda", "mps", ... or "cpu"


def benchmark(
    fn: Callable[[], object],
    *,
    min_run_time_s: float = 0.2,
    warmup: int = 3,
    num_threads: int | None = None,
) -> Timing:
    """Time a no-argument callable: warm up, then torch.utils.benchmark's blocked_autorange."""
    if min_run_time_s <= 0:
        raise ValueError(f"min_run_time_s must be positive, got {min_run_time_s}")
    for _ in range(warmup):  # first calls pay for allocation, cuBLAS handle and workspace creation, lazy CUDA module loading
        fn()
    _synchronize()
    # Timer's default timer synchronizes the accelerator (torch.accelerator.synchronize) before reading
    # the clock, so each block's time includes its kernels, not just their launches. Timer runs with
    # 1 thread unless told otherwise; default to torch's own thread count, as the user's code runs.
    timer = torch.utils.benchmark.Timer(
        stmt="fn()",
        globals={"fn": fn},
        num_threads=torch.get_num_threads() if num_threads is None else num_threads,
    )
    measurement = timer.blocked_autorange(min_run_time=min_run_time_s)
    accelerator = _accelerator()
    return Timing(
        median_s=measurement.median,
        iqr_s=measurement.iqr,
        n_runs=len(measurement.times),
        number_per_run=measurement.number_per_run,
        device="cpu" if accelerator is None else accelerator.type,
    )


def format_timing(timing: Timing, label: str = "") -> str:
    """One line for a Timing: median, IQR and runs."""
    prefix = f"{label}: " if label else ""
    return (
        f"{prefix}{timing.median_s * 1e3:.3f} ms median, IQR {timing.iqr_s * 1e3:.3f} ms "
        f"({timing.n_runs} runs × {timing.number_per_run} calls, {timing.device})"
    )


@dataclass(frozen=True)
class FixedCostFit:
    """t(work) = fixed_s + work / rate_per_s, fitted to measured times: the per-call cost and the sustained rate."""

    fixed_s: float  # seconds every call pays whatever its size (Python, dispatch, launch)
    rate_per_s: float  # work per second once the fixed cost is paid (e.g. FLOP/s)
    max_relative_error: float  # largest |fit − measured| / measured over the points: how well one rate explains them


def fit_fixed_cost(work: Sequence[float], seconds: Sequence[float]) -> FixedCostFit:
    """Least squares on relative error of t = t0 + work / rate over measured (work, seconds) pairs."""
    # minimize Σ ((t0 + b·x_i − t_i) / t_i)², b = 1/rate: linear in (t0, b); weights 1/t_i² make a 1 µs call
    # count as much as a 1 s one. Closed form of the 2×2 normal equations.
    if len(work) != len(seconds) or len(work) < 2:
        raise ValueError(f"need at least two (work, seconds) pairs of equal length, got {len(work)} and {len(seconds)}")
    if any(not (t > 0) for t in seconds) or any(not (x >= 0) for x in work):
        raise ValueError("seconds must be positive and work non-negative")
    w = [1 / t**2 for t in seconds]
    sw = sum(w)
    sx = sum(wi * x for wi, x in zip(w, work))
    sxx = sum(wi * x * x for wi, x in zip(w, work))
    st = sum(wi * t for wi, t in zip(w, seconds))
    sxt = sum(wi * x * t for wi, x, t in zip(w, work, seconds))
    det = sw * sxx - sx * sx
    if det <= 0:
        raise ValueError("work must take at least two different values")
    b = (sw * sxt - sx * st) / det
    t0 = (st - b * sx) / sw
    if not b > 0:
        raise ValueError("the times do not grow with the work: no positive rate fits them")
    error = max(abs(t0 + b * x - t) / t for x, t in zip(work, seconds))
    return FixedCostFit(fixed_s=t0, rate_per_s=1 / b, max_relative_error=error)


@dataclass(frozen=True)
class MemorySnapshot:
    """Process and CUDA memory at one labelled moment."""

    label: str
    cpu_rss_bytes: int  # resident set size of this process (psutil): pages in RAM, all threads
    gpu_allocated_bytes: int | None  # torch.cuda.memory_allocated(): bytes in live tensors; None w/o CUDA
    gpu_reserved_bytes: int | None  # torch.cuda.memory_reserved(): held by the caching allocator
    gpu_max_allocated_bytes: int | None  # torch.cuda.max_memory_allocated(): peak since the last reset


def memory_snapshot(label: str) -> MemorySnapshot:
    """CPU RSS and, with CUDA, the caching allocator's counters now."""
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()  # let queued frees and allocations land first
    return MemorySnapshot(
        label=label,
        cpu_rss_bytes=psutil.Process().memory_info().rss,
        gpu_allocated_bytes=torch.cuda.memory_allocated() if cuda else None,
        gpu_reserved_bytes=torch.cuda.memory_reserved() if cuda else None,
        gpu_max_allocated_bytes=torch.cuda.max_memory_allocated() if cuda else None,
    )


class MemoryProfiler:
    """Collects labelled memory snapshots in order."""

    def __init__(self) -> None:
        self._snapshots: list[MemorySnapshot] = []

    def snapshot(self, label: str) -> MemorySnapshot:
        """Record and return a snapshot called `label`."""
        snap = memory_snapshot(label)
        self._snapshots.append(snap)
        return snap

    @property
    def snapshots(self) -> tuple[MemorySnapshot, ...]:
        """The snapshots so far, oldest first."""
        return tuple(self._snapshots)


def _mib(n_bytes: int | None) -> str:
    """Bytes as MiB text, "-" for None."""
    return "-" if n_bytes is None else f"{n_bytes / 2**20:,.1f}"


def format_snapshots(snapshots: Sequence[MemorySnapshot]) -> str:
    """A table of snapshots in MiB, with the CPU RSS change since the first."""
    header = f"{'label':<24} {'cpu rss':>10} {'Δ rss':>10} {'gpu alloc':>10} {'gpu resv':>10} {'gpu peak':>10}"
    lines = [header + "  (MiB)"]
    base = snapshots[0].cpu_rss_bytes if snapshots else 0
    for snap in snapshots:
        lines.append(
            f"{snap.label:<24} {_mib(snap.cpu_rss_bytes):>10} {_mib(snap.cpu_rss_bytes - base):>10} "
            f"{_mib(snap.gpu_allocated_bytes):>10} {_mib(snap.gpu_reserved_bytes):>10} "
            f"{_mib(snap.gpu_max_allocated_bytes):>10}"
        )
    return "\n".join(lines)


@dataclass(frozen=True)
class PeakMemory:
    """The peak memory a call added, on the device where it was measured, and how."""

    peak_bytes: int  # peak during the call minus the level just before it
    device: str  # "cuda" or "cpu"
    method: str  # what was measured, in words


# On CPU, torch 2.13 has no allocator statistics (torch.cpu has no memory_allocated;
# torch.accelerator's memory functions cover accelerators only), tracemalloc sees only Python's own
# allocations, not torch's, and torch.profiler(profile_memory=True) costs seconds and writes to
# stderr. So the CPU peak is the process's resident set: on Linux the kernel's exact high-water mark
# (VmHWM, reset by writing "5" to /proc/self/clear_refs, Linux >= 4.0); elsewhere psutil RSS sampled
# by a thread, which can miss peaks shorter than the interval. RSS counts pages actually touched:
# torch.empty() that is never written costs nothing, and memory kept by malloc for reuse after a free
# does not show up again. Allocations above glibc's mmap threshold (at most 32 MiB) are returned to
# the OS on free, so large tensors are measured reliably; smaller ones are measured reliably too once
# _release_free_heap has handed malloc's free pages back (glibc malloc_trim), so that reusing them
# touches new pages again.
_CLEAR_REFS = "/proc/self/clear_refs"
_STATUS = "/proc/self/status"
_SAMPLE_INTERVAL_S = 0.001


def _status_kib(field: str) -> int:
    """A "VmRSS:  123 kB"-style field of /proc/self/status, in KiB."""
    with open(_STATUS, encoding="ascii") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise OSError(f"{field} not in {_STATUS}")


def _reset_rss_high_water_mark() -> bool:
    """Reset the kernel's peak-RSS counter for this process; False where that is not possible."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        with open(_CLEAR_REFS, "w", encoding="ascii") as clear_refs:
            clear_refs.write("5")
        _status_kib("VmHWM")
    except OSError:
        return False
    return True


def _release_free_heap() -> None:
    """Return the C heap's free pages to the OS (glibc malloc_trim), where there is such a call."""
    # Without it, a tensor freed before the measurement leaves pages in RSS that malloc hands out
    # again: fn() reuses them, and its allocation never shows as a rise in RSS.
    try:
        ctypes.CDLL(None).malloc_trim(0)
    except (AttributeError, OSError):  # not glibc (macOS, musl): nothing to release this way
        pass


def _cpu_peak_bytes(fn: Callable[[], object]) -> tuple[int, str]:
    """Peak RSS added by fn(), and how it was measured."""
    _release_free_heap()
    if _reset_rss_high_water_mark():
        before_kib = _status_kib("VmRSS")  # equals VmHWM right after the reset
        fn()
        peak_kib = _status_kib("VmHWM")
        return (peak_kib - before_kib) * 1024, "cpu: Linux peak RSS (VmHWM after clear_refs), whole process"
    process = psutil.Process()
    before = process.memory_info().rss
    peak = before
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, process.memory_info().rss)
            done.wait(_SAMPLE_INTERVAL_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        fn()
    finally:
        done.set()
        sampler.join()
    peak = max(peak, process.memory_info().rss)
    return peak - before, f"cpu: psutil RSS sampled every {_SAMPLE_INTERVAL_S * 1e3:g} ms, whole process"


def _cuda_peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes in CUDA tensors added by fn() (torch.cuda.max_memory_allocated)."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()  # frees and allocations of queued work have landed
    return torch.cuda.max_memory_allocated() - before


def peak_memory(fn: Callable[[], object], device: str | None = None) -> PeakMemory:
    """Peak memory added while running fn(), on CUDA if it allocated there, else CPU RSS."""
    # device=None: with CUDA, measure both and report CUDA if fn allocated any CUDA tensor; without
    # CUDA (CPU and MPS machines), report CPU RSS (MPS shares the host's unified memory).
    if device is not None and device not in ("cuda", "cpu"):
        raise ValueError(f"device must be 'cuda', 'cpu' or None, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but CUDA is not available")
    if device == "cpu" or not torch.cuda.is_available():
        cpu_bytes, method = _cpu_peak_bytes(fn)
        return PeakMemory(peak_bytes=cpu_bytes, device="cpu", method=method)
    cuda_method = "cuda: torch.cuda.max_memory_allocated (tensor bytes, 512-byte blocks; no CUDA context)"
    if device == "cuda":
        return PeakMemory(peak_bytes=_cuda_peak_bytes(fn), device="cuda", method=cuda_method)
    cuda_peaks: list[int] = []  # filled by the call below: fn runs once, measured on both devices
    cpu_bytes, method = _cpu_peak_bytes(lambda: cuda_peaks.append(_cuda_peak_bytes(fn)))
    if cuda_peaks[0] > 0:
        return PeakMemory(peak_bytes=cuda_peaks[0], device="cuda", method=cuda_method)
    return PeakMemory(peak_bytes=cpu_bytes, device="cpu", method=method)


class MemoryHighWater:
    """Peak memory added since this object was made: CUDA tensor bytes, or else the process's peak RSS."""

    # CUDA: torch.cuda.max_memory_allocated since a reset, minus the bytes allocated then. Elsewhere:
    # the kernel's peak-RSS counter (Linux VmHWM, reset here: one MemoryHighWater at a time), or RSS
    # sampled at each call to peak_added_bytes. RSS also counts memory malloc keeps after a free, so in a
    # process that ran something big before, a later run can reuse those pages and add less than it uses.

    def __init__(self, device: str = "cpu") -> None:
        self.device = "cuda" if device == "cuda" else "cpu"
        if self.device == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self._base = torch.cuda.memory_allocated()
            self.method = "cuda: torch.cuda.max_memory_allocated (tensor bytes)"
        elif _reset_rss_high_water_mark():
            self._base = _status_kib("VmRSS") * 1024
            self.method = "cpu: Linux peak RSS (VmHWM after clear_refs), whole process"
        else:
            self._base = psutil.Process().memory_info().rss
            self.method = "cpu: psutil RSS sampled when read, whole process"
        self._sampled_peak = self._base

    def peak_added_bytes(self) -> int:
        """The peak since creation minus the level at creation, in bytes."""
        if self.device == "cuda":
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated() - self._base
        if self.method.startswith("cpu: Linux"):
            # max(0, ...): the kernel keeps RSS counts in per-CPU batches, so a run that adds nothing can read < 0
            return max(0, _status_kib("VmHWM") * 1024 - self._base)
        self._sampled_peak = max(self._sampled_peak, psutil.Process().memory_info().rss)
        return self._sampled_peak - self._base


# ---------------------------------------------------------------------------------------------
# Call-by-call timing (notebook 01): the fastest of many calls, for sharing a busy machine


@dataclass(frozen=True)
class CallTimes:
    """Seconds of each timed call of time_each_call(), fastest first."""

    seconds: tuple[float, ...]  # one entry per call, sorted
    device: str  # what was synchronized around each call: "cuda", "mps", ... or "cpu"

    @property
    def best_s(self) -> float:
        """The fastest call: the one least disturbed by other processes."""
        return self.seconds[0]

    @property
    def median_s(self) -> float:
        """The median call."""
        return self.seconds[len(self.seconds) // 2]


def time_each_call(
    fn: Callable[[], object],
    *,
    min_run_time_s: float = 0.05,
    min_calls: int = 5,
    warmup: int = 2,
    num_threads: int | None = None,
) -> CallTimes:
    """Time every call of a no-argument callable for min_run_time_s (at least min_calls calls), after a warm-up."""
    # benchmark() times blocks of calls of >= 10 ms each; on a machine shared with other jobs nearly every
    # block is interrupted. Timing each call instead (fine for calls of ~0.1 ms and more: the clock costs
    # < 1 µs) lets some calls run undisturbed, and the fastest of them is a clean measurement.
    if min_run_time_s <= 0 or min_calls < 1:
        raise ValueError(f"need min_run_time_s > 0 and min_calls >= 1, got {min_run_time_s}, {min_calls}")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(num_threads or previous_threads)
    try:
        for _ in range(warmup):  # first calls pay for page faults, allocation, kernel selection
            fn()
        times: list[float] = []
        deadline = time.perf_counter() + min_run_time_s
        while len(times) < min_calls or time.perf_counter() < deadline:
            _synchronize()  # kernels launch asynchronously: start the clock on an empty queue (sync point)
            start = time.perf_counter()
            fn()
            _synchronize()
            times.append(time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous_threads)
    accelerator = _accelerator()
    return CallTimes(tuple(sorted(times)), "cpu" if accelerator is None else accelerator.type)


# ---------------------------------------------------------------------------------------------
# Interleaved A/B timing: a ratio that means something on a busy machine


@dataclass(frozen=True)
class Ratio:
    """time(a) / time(b) over interleaved rounds: the median round's ratio and the range of all rounds."""

    median: float  # the median of the per-round ratios
    low: float  # the smallest per-round ratio
    high: float  # the largest per-round ratio

    @classmethod
    def of(cls, per_round: Sequence[float]) -> Ratio:
        """The Ratio of ratios taken round by round elsewhere (a loader run, a cold read): median and range."""
        if not per_round:
            raise ValueError("need at least one round")
        return cls(statistics.median(per_round), min(per_round), max(per_round))

    def above(self, x: float) -> bool:
        """Every round put the ratio above x: a difference the noise of this run cannot explain."""
        return self.low > x

    def below(self, x: float) -> bool:
        """Every round put the ratio below x."""
        return self.high < x

    def __str__(self) -> str:
        return f"{self.median:.2f}x (rounds {self.low:.2f}-{self.high:.2f}x)"


@dataclass(frozen=True)
class Comparison:
    """Seconds per call of several callables, timed in interleaved rounds (see compare())."""

    seconds: dict[str, tuple[float, ...]]  # name -> seconds per call in each round, in round order
    calls_per_round: dict[str, int]  # name -> calls timed together in each round
    run_s: float  # wall-clock seconds of the whole comparison, warm-up included
    device: str  # what was synchronized around each round: "cuda", "mps", ... or "cpu"

    def median_s(self, name: str) -> float:
        """The median round's seconds per call."""
        return statistics.median(self.seconds[name])

    def best_s(self, name: str) -> float:
        """The fastest round's seconds per call: the one least disturbed by other processes."""
        return min(self.seconds[name])

    def ratio(self, a: str, b: str) -> Ratio:
        """time(a) / time(b), round by round: both were timed back to back, so a load change hits both."""
        per_round = [x / y for x, y in zip(self.seconds[a], self.seconds[b])]
        return Ratio(statistics.median(per_round), min(per_round), max(per_round))


def effect(ratio: Ratio, above: str, below: str, *, at: float = 1.0) -> str:
    """`above` if every round put the ratio above `at`, `below` if every round put it below, else "not shown"."""
    # A verdict states an effect only when the spread of its interleaved rounds cannot explain it.
    if ratio.above(at):
        return above
    if ratio.below(at):
        return below
    return f"not shown on this run (rounds {ratio.low:.2f}-{ratio.high:.2f}x straddle {at:g}x)"


T = TypeVar("T")


def until(measure: Callable[[], T], holds: Callable[[T], bool], *, tries: int = 3) -> tuple[T, bool]:
    """Measure again, up to `tries` times, until `holds(result)`; the last result and whether it held."""
    # For orderings that must hold (latency grows with the tier, a part costs no more than the whole): a run that
    # breaks one was disturbed, so it is repeated; if it never holds, the caller says so instead of concluding.
    if tries < 1:
        raise ValueError(f"tries must be at least 1, got {tries}")
    result = measure()
    for _ in range(tries - 1):
        if holds(result):
            return result, True
        result = measure()
    return result, holds(result)


def compare(
    fns: Mapping[str, Callable[[], object]],
    *,
    rounds: int = 7,
    min_round_s: float = 0.02,
    warmup: int = 2,
    num_threads: int | None = None,
) -> Comparison:
    """Time callables in interleaved rounds (A B C, C B A, ...), each round of each as many calls as lasted at
    least min_round_s when calibrated (above the clock's noise; a machine whose load changes may run them faster)."""
    # A/B timing done one after the other measures the machine's load as much as the code: a neighbour that
    # starts halfway slows only B. Interleaving puts every round of A next to a round of B, alternating which
    # goes first (drift cancels), so a ratio taken round by round compares like with like.
    if len(fns) < 1 or rounds < 1 or min_round_s <= 0:
        raise ValueError(f"need at least one callable, rounds >= 1 and min_round_s > 0, got {len(fns)}, {rounds}, {min_round_s}")
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(num_threads or previous_threads)
    start = time.perf_counter()
    try:
        calls: dict[str, int] = {}
        for name, fn in fns.items():
            for _ in range(warmup):  # first calls pay for allocation, kernel selection, lazy loading
                fn()
            _synchronize()
            n, took = 1, 0.0
            while True:  # calibrate: calls per round so that a round lasts at least min_round_s
                took = _time_calls(fn, n)
                if took >= min_round_s:
                    break
                n = max(n + 1, min(n * 10, int(n * 1.2 * min_round_s / max(took, 1e-9)) + 1))
            calls[name] = n
        seconds: dict[str, list[float]] = {name: [] for name in fns}
        order = list(fns)
        for r in range(rounds):
            for name in order if r % 2 == 0 else reversed(order):
                seconds[name].append(_time_calls(fns[name], calls[name]) / calls[name])
    finally:
        torch.set_num_threads(previous_threads)
    accelerator = _accelerator()
    return Comparison({k: tuple(v) for k, v in seconds.items()}, calls, time.perf_counter() - start,
                      "cpu" if accelerator is None else accelerator.type)


def _time_calls(fn: Callable[[], object], n: int) -> float:
    """Seconds for n calls, the accelerator's queue empty before and after (sync points)."""
    _synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    _synchronize()
    return time.perf_counter() - t0


# --- Tensor bytes alive, operator by operator (CUDA's max_memory_allocated, on any device) ---------------

@dataclass(frozen=True)
class TensorPeak:
    """The most bytes held in live tensors while a call ran, and where that happened."""

    peak_bytes: int  # most bytes of distinct tensor storages alive at the end of one operator
    op_at_peak: str  # the operator whose output reached the peak, e.g. "aten._log_softmax_backward_data.default"
    existing_bytes: int  # bytes of the `existing` tensors (alive before the call); part of peak_bytes
    n_ops: int  # operators seen


class _LiveTensorBytes(TorchDispatchMode):
    """Sums the bytes of every storage an operator returns, as long as that storage is alive."""

    def __init__(self, existing: Iterable[torch.Tensor]) -> None:
        super().__init__()
        self._live: dict[int, tuple[StorageWeakRef, int]] = {}  # storage id -> (weak ref, bytes)
        self.n_ops = 0
        self.peak = self.existing = self._track(existing)
        self.op_at_peak = "(before the call)"

    def _track(self, tensors: Iterable[object]) -> int:
        """Register the storages of `tensors` not seen yet; return the bytes alive now."""
        for key in [key for key, (ref, _) in self._live.items() if ref.expired()]:
            del self._live[key]  # freed: drop it before its address can be reused by a new storage
        for tensor in tensors:
            if isinstance(tensor, torch.Tensor):
                storage = tensor.untyped_storage()  # views share their base's storage: counted once
                ref = StorageWeakRef(storage)
                self._live.setdefault(ref.cdata, (ref, storage.nbytes()))
        return sum(n_bytes for _, n_bytes in self._live.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        self.n_ops += 1
        alive = self._track(tree_flatten(out)[0])
        if alive > self.peak:
            self.peak, self.op_at_peak = alive, str(func)
        return out


def tensor_peak_memory(fn: Callable[[], object], existing: Iterable[torch.Tensor] = ()) -> TensorPeak:
    """Most bytes in live tensors while fn() runs, counted after every operator (a TorchDispatchMode)."""
    # What torch.cuda.max_memory_allocated counts on a GPU (tensor bytes, not the allocator's cache or
    # rounding), on any device, also on "meta" and fake tensors. `existing` are tensors alive before the
    # call that belong in the count (weights, optimizer states). Not seen: buffers a kernel allocates
    # and frees inside one operator, memory outside tensors. Costs one Python call per operator.
    tracker = _LiveTensorBytes(existing)
    with tracker:
        fn()
    return TensorPeak(peak_bytes=tracker.peak, op_at_peak=tracker.op_at_peak,
                      existing_bytes=tracker.existing, n_ops=tracker.n_ops)


def release_free_heap() -> bool:
    """Ask glibc to give freed heap memory back to the OS (malloc_trim(0)); False where there is no glibc."""
    # glibc keeps memory that free() returned, below its mmap threshold, for reuse: it stays resident
    # (in RSS) and a later allocation reuses it without adding to RSS. Trimming first makes the next
    # peak_memory() on CPU see every page the measured call touches.
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        return bool(libc.malloc_trim(0))
    except (OSError, AttributeError):
        return False

