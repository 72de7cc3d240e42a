"""The student's machine, measured once per kernel: compute roofs per dtype, bandwidth per working set and its tiers,
and a noise floor. Every roof, ceiling and verdict in the notebooks comes from here; datasheet figures are annotations.

`measure()` returns a `Machine` for this kernel's device and thread count (cached: the second call is free):

- **compute roofs** (`machine.compute("fp32")`): the best matmul FLOP/s of that dtype, square sizes doubled until a
  call is long enough to time, the fastest call of each size kept (the one least disturbed by other processes). The
  nominal figure (vector units × clock × threads on a CPU, the datasheet on a known GPU) rides along as an
  annotation; a nominal figure that the measurement exceeds is reported as *not a bound* and never used.
- **memory tiers** (`machine.tiers`, `machine.tier_of(bytes)`): a read-bandwidth sweep over working sets from 1 KiB
  to well past the last cache, cut into plateaus where the rate drops (the knees), whatever sysfs says the caches
  are. The last plateau is memory (DRAM, or a GPU's HBM). An operator is judged against the tier its working set
  lives in (`machine.roofline(...)`), and a lesson that needs DRAM takes `machine.memory.lo_bytes` or more.
- **a noise floor** (`machine.noise`): two identical callables timed in interleaved rounds; the range of their ratio
  is how far apart two timings of the same work land on this machine now. A verdict on a ratio inside it says
  "not shown on this run" (`profiler.effect`).
"""

from __future__ import annotations

import math
import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from lecturelib import hardware, runmode
from lecturelib.flops import matmul_flops
from lecturelib.hardware import BandwidthPoint, Roofline
from lecturelib.profiler import Ratio, compare, time_each_call

KiB, MiB, GiB = 2**10, 2**20, 2**30

# A knee: the rate falls below (1 - KNEE_DROP) × the plateau's median rate. Two cache levels differ by 1.5-3x in
# read bandwidth; one size straddling a boundary sits in between and joins the nearer plateau.
KNEE_DROP = 0.3


@dataclass(frozen=True)
class Tier:
    """One plateau of the read-bandwidth sweep: working sets that stream at about the same rate."""

    name: str  # "L1", "L2", "L3", ... then "DRAM" (CPU) or "HBM" (GPU); "cache 1", ... where sysfs says nothing
    lo_bytes: int  # the smallest working set of the sweep on this plateau
    hi_bytes: int  # the largest working set of the sweep on this plateau
    bytes_per_s: float  # the best read rate measured on it
    sizes: int  # how many sweep sizes landed on it
    is_memory: bool  # the last plateau: the caches no longer help

    def __str__(self) -> str:
        return f"{self.name} ({_size(self.lo_bytes)}–{_size(self.hi_bytes)}: {self.bytes_per_s / 1e9:.1f} GB/s)"


@dataclass(frozen=True)
class ComputeRoof:
    """The measured compute roof of one dtype, and the nominal figure beside it (an annotation, never a bound)."""

    dtype: str  # "fp32", "bf16", "fp16" (or "tf32" on CUDA)
    flop_per_s: float  # the fastest call of the best size: 2n³ / seconds
    n: int  # the square size that reached it
    median_flop_per_s: float  # the median call of that size
    nominal_flop_per_s: float | None  # vector units × clock × threads (CPU) or the datasheet (known GPU); None: unknown
    nominal_source: str  # where the nominal figure comes from, or why there is none

    @property
    def nominal_is_bound(self) -> bool:
        """The nominal figure is above what was measured, as a ceiling must be."""
        return self.nominal_flop_per_s is not None and self.nominal_flop_per_s >= self.flop_per_s

    def describe(self) -> str:
        """One line: the measured roof, and what the nominal figure is worth here."""
        line = f"{self.dtype}: {self.flop_per_s / 1e9:,.1f} GFLOP/s measured (n = {self.n}, median call " \
               f"{self.median_flop_per_s / 1e9:,.1f})"
        if self.nominal_flop_per_s is None:
            return line + f"; no nominal figure ({self.nominal_source})"
        share = self.flop_per_s / self.nominal_flop_per_s
        if self.nominal_is_bound:
            return line + f"; nominal {self.nominal_flop_per_s / 1e9:,.1f} ({self.nominal_source}): {share:.0%} of it"
        return line + (f"; nominal {self.nominal_flop_per_s / 1e9:,.1f} ({self.nominal_source}) is NOT a bound here: "
                       f"the measurement beat it ({share:.2f}x), so the table's assumption does not fit this CPU")


@dataclass(frozen=True)
class Noise:
    """How far apart two timings of the same work land: the per-round ratio of two identical callables."""

    low: float  # the smallest per-round ratio
    high: float  # the largest per-round ratio
    rounds: int

    @property
    def floor(self) -> float:
        """The relative difference noise alone produced: an effect must be larger to be shown."""
        return max(self.high - 1.0, 1.0 - self.low, 0.0)

    def __str__(self) -> str:
        return f"±{self.floor:.0%} (identical work, {self.rounds} interleaved rounds: {self.low:.2f}–{self.high:.2f}x)"


@dataclass(frozen=True)
class TierRoofline:
    """A kernel on the roofline of the tier its working set lives in."""

    roofline: Roofline  # the roofs used: this dtype's measured compute roof, the tier's measured bandwidth
    tier: Tier  # where the working set lives

    @property
    def bound(self) -> str:
        """"memory" or "compute"."""
        return self.roofline.bound

    @property
    def time_s(self) -> float:
        """The roofline's lower bound on the kernel's time."""
        return self.roofline.time_s

    def describe(self) -> str:
        """One line: intensity, ridge, bound, and which tier's bandwidth was used."""
        r = self.roofline
        return (f"{r.arithmetic_intensity_flop_per_byte:.2f} FLOP/byte against a ridge of {r.ridge_flop_per_byte:.1f} "
                f"({self.tier.name}'s {r.peak_bytes_per_s / 1e9:.1f} GB/s, {r.peak_flop_per_s / 1e9:.1f} GFLOP/s): "
                f"{r.bound}-bound")


@dataclass
class Machine:
    """This kernel's device measured: use it for every roof and verdict (see the module docstring)."""

    device: str  # "cpu", "cuda", "mps"
    name: str  # the CPU model or GPU name
    threads: int  # torch's intra-op threads while measuring (CPU)
    quick: bool  # measured at the grader's quick sizes
    sweep: tuple[BandwidthPoint, ...]  # the read sweep, smallest working set first
    tiers: tuple[Tier, ...]  # its plateaus, smallest first; the last one is memory
    noise: Noise
    _compute: dict[str, ComputeRoof] = field(default_factory=dict, repr=False)
    _copy: dict[int, float] = field(default_factory=dict, repr=False)

    @property
    def memory(self) -> Tier:
        """The last tier: DRAM (HBM on a GPU)."""
        return self.tiers[-1]

    def compute(self, dtype: str = "fp32") -> ComputeRoof:
        """The measured compute roof of `dtype` (measured on first use, then kept)."""
        if dtype not in self._compute:
            self._compute[dtype] = compute_roof(dtype, self.device, threads=self.threads, quick=self.quick)
        return self._compute[dtype]

    def roof_flop_per_s(self, dtype: str = "fp32") -> float:
        """The compute roof a verdict uses: the best matmul measured in `dtype`."""
        return self.compute(dtype).flop_per_s

    def tier_of(self, working_set_bytes: int) -> Tier:
        """The tier a working set of this many bytes streams from (the plateau whose sizes bracket it)."""
        if working_set_bytes <= 0:
            raise ValueError(f"working_set_bytes must be positive, got {working_set_bytes}")
        for here, after in zip(self.tiers, self.tiers[1:]):
            # between two plateaus' measured sizes: the boundary is halfway, in log size
            if working_set_bytes <= math.sqrt(here.hi_bytes * after.lo_bytes):
                return here
        return self.tiers[-1]

    def bytes_per_s(self, working_set_bytes: int, op: str = "read") -> float:
        """Measured bandwidth at a working set: its tier's read rate, or a copy of that size (measured once)."""
        if op == "read":
            return self.tier_of(working_set_bytes).bytes_per_s
        if op != "copy":
            raise ValueError(f"unknown op {op!r}; known: read, copy")
        size = max(64, working_set_bytes // 64 * 64)
        if size not in self._copy:
            point = hardware.measure_bandwidth(size, "copy", self.device, min_run_time_s=_run_s(self.quick),
                                               num_threads=self.threads)
            self._copy[size] = point.best_bytes_per_s
        return self._copy[size]

    def roofline(self, flops: int, n_bytes: int, working_set_bytes: int, dtype: str = "fp32",
                 op: str = "read") -> TierRoofline:
        """A kernel of `flops` over `n_bytes` of traffic, judged against this dtype's roof and its working set's tier."""
        tier = self.tier_of(working_set_bytes)
        bandwidth = tier.bytes_per_s if op == "read" else self.bytes_per_s(working_set_bytes, op)
        return TierRoofline(hardware.roofline(flops, n_bytes, peak_flop_per_s=self.roof_flop_per_s(dtype),
                                              peak_bytes_per_s=bandwidth), tier)

    def ridge_flop_per_byte(self, dtype: str = "fp32", working_set_bytes: int | None = None) -> float:
        """Where the memory roof of a tier (memory by default) meets this dtype's measured compute roof."""
        tier = self.memory if working_set_bytes is None else self.tier_of(working_set_bytes)
        return hardware.ridge_point(self.roof_flop_per_s(dtype), tier.bytes_per_s)

    def shown(self, ratio: float) -> bool:
        """A single ratio of two timings is outside this machine's noise floor."""
        return abs(ratio - 1.0) > self.noise.floor

    def describe(self, dtypes: Sequence[str] = ("fp32",)) -> str:
        """A short table: the machine, its tiers, its compute roofs and its noise floor."""
        lines = [f"{self.name} ({self.device}, {self.threads} thread{'s' if self.threads != 1 else ''}"
                 f"{', quick sizes' if self.quick else ''})"]
        for tier in self.tiers:
            lines.append(f"  {tier.name:>6}: {_size(tier.lo_bytes):>9} – {_size(tier.hi_bytes):<9} "
                         f"{tier.bytes_per_s / 1e9:8.1f} GB/s read ({tier.sizes} size{'s' if tier.sizes != 1 else ''})")
        lines.extend("  " + self.compute(d).describe() for d in dtypes)
        lines.append(f"  noise floor: {self.noise}")
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Measuring

_CACHE: dict[tuple[str, int, bool], Machine] = {}


def measure(device: str | None = None, *, threads: int | None = None, quick: bool | None = None,
            refresh: bool = False) -> Machine:
    """This kernel's machine: measured on the first call for (device, threads, quick), then the same object."""
    # CPU: one thread unless asked. A parallel kernel whose thread is descheduled waits at its barrier for a
    # scheduler tick, so on a shared or busy machine multi-threaded timings fall by 10-30x at random; one core's are
    # steady, and its L1 and L2 are its own. Time the kernels you judge against it at `machine.threads` too.
    device = device or hardware.detect_device()
    threads = threads or (1 if device == "cpu" else torch.get_num_threads())
    quick = runmode.quick() if quick is None else quick
    key = (device, threads, quick)
    if refresh or key not in _CACHE:
        sweep = tuple(read_sweep(device, threads, quick))
        caches = _cache_sizes(device)
        _CACHE[key] = Machine(device=device, name=device_name(device), threads=threads, quick=quick, sweep=sweep,
                              tiers=tuple(find_tiers(sweep, caches, memory_name="HBM" if device == "cuda" else "DRAM")),
                              noise=measure_noise(device, threads, quick))
    return _CACHE[key]


def from_sweep(sweep: Sequence[BandwidthPoint], plateaus: Sequence[Sequence[BandwidthPoint]] | None = None, *,
               device: str | None = None, threads: int | None = None, quick: bool | None = None) -> Machine:
    """A Machine from a read sweep measured elsewhere (notebook 01's own probe): tiers from its plateaus."""
    # `plateaus`: the sweep already cut into plateaus (each a run of consecutive sizes, smallest first); without
    # them the sweep is cut at its knees as measure() cuts its own. Compute roofs are shared with measure()'s
    # (compute_roof); the noise floor is measured now. Not cached: measure() still measures its own sweep.
    device = device or hardware.detect_device()
    threads = threads or (1 if device == "cpu" else torch.get_num_threads())
    quick = runmode.quick() if quick is None else quick
    memory_name = "HBM" if device == "cuda" else "DRAM"
    if plateaus is None:
        tiers = find_tiers(sweep, _cache_sizes(device), memory_name=memory_name)
    else:
        tiers = tiers_from_plateaus(plateaus, _cache_sizes(device), memory_name=memory_name)
    ordered = tuple(sorted(sweep, key=lambda p: p.working_set_bytes))
    return Machine(device=device, name=device_name(device), threads=threads, quick=quick, sweep=ordered,
                   tiers=tuple(tiers), noise=measure_noise(device, threads, quick))


_ROOFS: dict[tuple[str, str, int, bool], ComputeRoof] = {}


def compute_roof(dtype: str = "fp32", device: str | None = None, *, threads: int | None = None,
                 quick: bool | None = None) -> ComputeRoof:
    """The measured compute roof of `dtype` alone (no memory sweep): measured once per kernel, shared with measure()."""
    # For a notebook that needs only MFU's denominator: measure() also sweeps the memory tiers (seconds on a CPU).
    device = device or hardware.detect_device()
    threads = threads or (1 if device == "cpu" else torch.get_num_threads())
    quick = runmode.quick() if quick is None else quick
    key = (device, dtype, threads, quick)
    if key not in _ROOFS:
        _ROOFS[key] = _measure_compute(device, dtype, threads, quick)
    return _ROOFS[key]


def sweep_sizes(device: str, quick: bool) -> list[int]:
    """Working sets of the read sweep: 1 KiB to 256 MiB on a CPU (4 KiB to 2 GiB on a GPU), doubling; quick: ×4."""
    if device == "cuda":
        return hardware.working_set_sizes(4 * KiB, 2 * GiB, 4 if quick else 2)
    return hardware.working_set_sizes(1 * KiB, 256 * MiB, 4 if quick else 2)


def read_sweep(device: str, threads: int, quick: bool, *, tries: int = 3) -> list[BandwidthPoint]:
    """The read sweep, each size that streamed slower than a larger one (by more than a knee) measured again."""
    # A smaller working set never streams slower than a larger one: it fits every cache the larger one fits. A size
    # that did was disturbed (on a loaded machine a parallel reduction waits for a descheduled thread), so it is
    # timed again, up to `tries` times in all, keeping its fastest call.
    def one(size: int) -> BandwidthPoint:
        return hardware.measure_bandwidth(size, "read", device, min_run_time_s=_run_s(quick), num_threads=threads)

    # A plateau of one size (a lone knee, the largest size below its neighbour) is timed again for the same reason:
    # a real tier spans a factor of 2 or more in size, so the sweep meets it at two sizes at least.
    points = [one(size) for size in sweep_sizes(device, quick)]
    for _ in range(tries - 1):
        slow = {i for i, p in enumerate(points)
                if any(q.best_bytes_per_s * (1 - KNEE_DROP) > p.best_bytes_per_s for q in points[i + 1:])}
        start = 0
        for group in _plateaus(points, KNEE_DROP):
            if len(group) == 1 and len(points) > 1:
                slow.add(start)
            start += len(group)
        if not slow:
            break
        for i in sorted(slow):
            again = one(points[i].working_set_bytes)
            if again.best_bytes_per_s > points[i].best_bytes_per_s:
                points[i] = again
    return points


def _run_s(quick: bool) -> float:
    """Seconds of timed calls per measured size."""
    return 0.01 if quick else 0.04


def _cache_sizes(device: str) -> list[tuple[str, int]]:
    """The caches the OS or driver reports, smallest first: names for the sweep's plateaus, never their borders."""
    if device == "cuda":
        l2 = hardware.gpu_l2_bytes()
        return [("L2", l2)] if l2 else []
    return [("L1" if name == "L1d" else name, size) for name, size in hardware.cpu_caches().tiers().items()]


def device_name(device: str) -> str:
    """The GPU's name, or the CPU's model name from /proc/cpuinfo (or the platform's)."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
            for line in file:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    return " ".join(value.split())
    except OSError:
        pass
    import platform

    return platform.processor() or platform.machine() or "this CPU"


def find_tiers(points: Sequence[BandwidthPoint], caches: Sequence[tuple[str, int]] = (),
               memory_name: str = "DRAM", drop: float = KNEE_DROP) -> list[Tier]:
    """Cut a read sweep into plateaus at its knees (the rate falls by more than `drop`); the last one is memory."""
    if not points:
        raise ValueError("need at least one BandwidthPoint")
    return tiers_from_plateaus(merge_lone_plateaus(_plateaus(points, drop)), caches, memory_name)


def merge_lone_plateaus(groups: Sequence[Sequence[BandwidthPoint]]) -> list[list[BandwidthPoint]]:
    """A plateau of one size between two others joins the neighbour nearer in log rate, until none is left."""
    # A lone size between two plateaus straddles a boundary. The first and last groups stay even alone (the
    # largest size may be all the sweep saw of memory).
    runs: list[list[BandwidthPoint]] = [list(g) for g in groups]
    merged = True
    while merged and len(runs) > 2:
        merged = False
        for i in range(1, len(runs) - 1):
            if len(runs[i]) == 1:
                rate = math.log(runs[i][0].best_bytes_per_s)
                before = abs(rate - math.log(statistics.median(q.best_bytes_per_s for q in runs[i - 1])))
                after = abs(rate - math.log(statistics.median(q.best_bytes_per_s for q in runs[i + 1])))
                target = i - 1 if before <= after else i + 1
                runs[target] = sorted(runs[target] + runs[i], key=lambda p: p.working_set_bytes)
                del runs[i]
                merged = True
                break
    return runs


def tiers_from_plateaus(groups: Sequence[Sequence[BandwidthPoint]], caches: Sequence[tuple[str, int]] = (),
                        memory_name: str = "DRAM") -> list[Tier]:
    """Name plateaus of a read sweep (runs of sizes, smallest first) after the caches they span; the last is memory."""
    # Names: memory last; a cache plateau by the smallest cache the OS reports that holds its smallest working
    # set ("cache 2" where none does), and the one that holds its largest where that is another ("L1–L2": this
    # machine streams from both alike). A second plateau of the same cache is the part of it this core does not
    # keep (a shared L3, on a VM shared with other machines too): named after the two it lies between, "L3–DRAM".
    groups = [sorted(g, key=lambda p: p.working_set_bytes) for g in groups if g]
    if not groups:
        raise ValueError("need at least one plateau of one BandwidthPoint")
    if any(a[-1].working_set_bytes >= b[0].working_set_bytes for a, b in zip(groups, groups[1:])):
        raise ValueError("plateaus must be runs of increasing working sets, in order")
    tiers: list[Tier] = []
    names = [n for n, _ in caches] + [memory_name]
    for i, group in enumerate(groups):
        lo, hi = group[0].working_set_bytes, group[-1].working_set_bytes
        last = i == len(groups) - 1 and len(groups) > 1
        if last:
            name = memory_name
        else:
            name = next((n for n, size in caches if lo <= size), f"cache {i + 1}")
            upto = next((n for n, size in caches if hi <= size), name)
            if any(t.name.split("–")[-1] == name for t in tiers) and name in names:
                name = f"{name}–{names[names.index(name) + 1]}"
            elif upto != name:  # one plateau over several caches: this machine streams from them alike
                name = f"{name}–{upto}"
        tiers.append(Tier(name, lo, hi, max(p.best_bytes_per_s for p in group), len(group), last))
    if len(tiers) == 1:  # one plateau: the sweep never left (or never entered) a cache; call it what it is
        only = tiers[0]
        tiers[0] = Tier(memory_name, only.lo_bytes, only.hi_bytes, only.bytes_per_s, only.sizes, True)
    return tiers


def _plateaus(points: Sequence[BandwidthPoint], drop: float) -> list[list[BandwidthPoint]]:
    """Walk up the sizes: a point below (1 - drop) × the current plateau's median rate starts a new plateau."""
    ordered = sorted(points, key=lambda p: p.working_set_bytes)
    groups: list[list[BandwidthPoint]] = [[ordered[0]]] if ordered else []
    for p in ordered[1:]:
        level = statistics.median(q.best_bytes_per_s for q in groups[-1])
        if p.best_bytes_per_s < (1 - drop) * level:
            groups.append([p])
        else:
            groups[-1].append(p)
    return groups


def measure_noise(device: str, threads: int, quick: bool) -> Noise:
    """Two identical matmuls timed in interleaved rounds: the range of their ratio is this machine's noise now."""
    n = 128 if device == "cpu" else 1024
    a = torch.randn(n, n, device=device, generator=None)
    b = torch.randn(n, n, device=device)
    rounds = 5 if quick else 9
    c = compare({"a": lambda: a @ b, "b": lambda: a @ b}, rounds=rounds, min_round_s=0.005 if quick else 0.02,
                num_threads=threads)
    ratio: Ratio = c.ratio("a", "b")
    return Noise(ratio.low, ratio.high, rounds)


_TORCH_DTYPES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def _measure_compute(device: str, dtype: str, threads: int, quick: bool) -> ComputeRoof:
    """The best square matmul in `dtype`: sizes doubled from 128 until one call takes long enough (or the cap)."""
    if dtype not in _TORCH_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(_TORCH_DTYPES)}")
    if dtype == "tf32" and device != "cuda":
        raise ValueError("tf32 is a CUDA tensor-core mode; measure fp32 on this device instead")
    cap = (8192 if device == "cuda" else 1024) if quick else (16384 if device == "cuda" else 2048)
    long_enough_s = 0.005 if quick else 0.02  # one call this long: the clock's and the dispatch's cost vanish
    best: tuple[float, int, float] = (0.0, 0, 0.0)  # (best FLOP/s, n, median FLOP/s)
    previous = torch.backends.cuda.matmul.fp32_precision if device == "cuda" else None
    if device == "cuda":
        torch.backends.cuda.matmul.fp32_precision = "tf32" if dtype == "tf32" else "ieee"
    try:
        n = 128
        while n <= cap:
            generator = torch.Generator().manual_seed(0)
            a = torch.randn(n, n, generator=generator).to(device=device, dtype=_TORCH_DTYPES[dtype])
            b = torch.randn(n, n, generator=generator).to(device=device, dtype=_TORCH_DTYPES[dtype])
            for _ in range(2):  # twice: a neighbour busy during one run rarely is during both
                times = time_each_call(lambda: a @ b, min_run_time_s=_run_s(quick) * 2, min_calls=5,
                                       num_threads=threads)
                rate = matmul_flops(n, n, n) / times.best_s
                if rate > best[0]:
                    best = (rate, n, matmul_flops(n, n, n) / times.median_s)
            if times.best_s >= long_enough_s:
                break
            n *= 2
    finally:
        if previous is not None:
            torch.backends.cuda.matmul.fp32_precision = previous
    nominal, source = nominal_flop_per_s(device, dtype, threads)
    return ComputeRoof(dtype, best[0], best[1], best[2], nominal, source)


def nominal_flop_per_s(device: str, dtype: str, threads: int) -> tuple[float | None, str]:
    """The table's figure for this device and dtype, and its source (an annotation: the measured roof is the bound)."""
    if device == "cuda":
        key = hardware.gpu_key(torch.cuda.get_device_name())
        if key is None:
            return None, f"{torch.cuda.get_device_name()} is not in lecturelib.hardware.PEAKS"
        try:
            return hardware.peak_flop_per_s(key, dtype), hardware.PEAKS[(key, dtype)].source
        except (ValueError, KeyError):
            return None, f"no {dtype} figure for {key} in lecturelib.hardware.PEAKS"
    if device != "cpu":
        return None, f"no table for {device}"
    if dtype != "fp32":
        return None, f"no {dtype} figure for CPUs in the table: measured only"
    units, clock = hardware.cpu_vector_units(), hardware.cpu_clock_hz()
    if units is None or clock is None:
        return None, "the vector units or the clock of this CPU are unknown"
    hz, where = clock
    return (units.flop_per_cycle_fp32 * hz * threads,
            f"{units.isa}: {units.flop_per_cycle_fp32} FLOP/cycle × {hz / 1e9:.2f} GHz ({where}) × {threads} "
            f"thread{'s' if threads != 1 else ''}")


def _size(n_bytes: int) -> str:
    """1 KiB, 4 MiB, 2 GiB: the binary unit that keeps the number short."""
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (KiB, "KiB")):
        if n_bytes >= unit:
            value = n_bytes / unit
            return f"{value:.0f} {name}" if value == int(value) else f"{value:.1f} {name}"
    return f"{n_bytes} B"


def cores() -> int:
    """CPUs this process may run on (its affinity mask), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1
