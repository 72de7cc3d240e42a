"""Tests of lecturelib.profiler: the benchmark timer, memory snapshots and peak memory."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import pytest
import torch

from lecturelib.profiler import (
    MemoryProfiler,
    Ratio,
    Timing,
    benchmark,
    compare,
    fit_fixed_cost,
    format_snapshots,
    format_timing,
    memory_snapshot,
    peak_memory,
)

MIB = 2**20
# 64 MiB: above glibc's largest mmap threshold (32 MiB), so the pages go back to the OS on free
BIG_FLOATS = 16 * MIB  # 16 Mi fp32 elements = 64 MiB
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="CPU-only behaviour")


def test_benchmark_returns_timing() -> None:
    timing = benchmark(lambda: torch.ones(64) @ torch.ones(64), min_run_time_s=0.02)
    assert isinstance(timing, Timing)
    assert timing.median_s > 0
    assert timing.iqr_s >= 0
    assert timing.n_runs >= 1 and timing.number_per_run >= 1
    accelerator = torch.accelerator.current_accelerator(check_available=True)
    assert timing.device == ("cpu" if accelerator is None else accelerator.type)


def test_benchmark_warms_up_before_timing() -> None:
    calls: list[int] = []
    benchmark(lambda: calls.append(1), min_run_time_s=0.01, warmup=5)
    assert len(calls) > 5  # the 5 warm-up calls, then the timed ones


def test_benchmark_median_is_at_least_the_sleep() -> None:
    # time.sleep sleeps at least its argument, so the median cannot be shorter
    timing = benchmark(lambda: time.sleep(0.002), min_run_time_s=0.02, warmup=1)
    assert timing.median_s >= 0.002


def test_benchmark_rejects_nonpositive_run_time() -> None:
    with pytest.raises(ValueError, match="min_run_time_s must be positive"):
        benchmark(lambda: None, min_run_time_s=0)


def test_format_timing_is_one_line() -> None:
    timing = Timing(median_s=0.0015, iqr_s=0.0001, n_runs=7, number_per_run=10, device="cpu")
    assert format_timing(timing, "matmul") == "matmul: 1.500 ms median, IQR 0.100 ms (7 runs × 10 calls, cpu)"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc heap reuse is a Linux behaviour")
def test_peak_memory_cpu_counts_a_tensor_that_reuses_freed_heap() -> None:
    # Freeing a 30 MiB mmapped block raises glibc's mmap threshold to 30 MiB; the 16 MiB tensors after it
    # come from the heap, and a freed one leaves its pages there for the next to reuse.
    del_me = torch.ones(30 * MIB // 4)
    del del_me
    reused = torch.ones(16 * MIB // 4)
    del reused
    result = peak_memory(lambda: torch.ones(16 * MIB // 4), device="cpu")
    assert 15 * MIB <= result.peak_bytes <= 20 * MIB


@no_cuda
def test_memory_snapshot_cpu_only_has_no_gpu_fields() -> None:
    snap = memory_snapshot("start")
    assert snap.label == "start"
    assert snap.cpu_rss_bytes > 0
    assert snap.gpu_allocated_bytes is None and snap.gpu_reserved_bytes is None
    assert snap.gpu_max_allocated_bytes is None


def test_memory_profiler_sees_an_allocation() -> None:
    profiler = MemoryProfiler()
    profiler.snapshot("before")
    x = torch.ones(BIG_FLOATS)  # 64 MiB, written, so resident
    profiler.snapshot("after")
    before, after = profiler.snapshots
    assert [s.label for s in profiler.snapshots] == ["before", "after"]
    assert after.cpu_rss_bytes - before.cpu_rss_bytes >= 60 * MIB
    del x


def test_format_snapshots_has_a_row_per_snapshot() -> None:
    profiler = MemoryProfiler()
    profiler.snapshot("a")
    profiler.snapshot("b")
    lines = format_snapshots(profiler.snapshots).splitlines()
    assert len(lines) == 3
    assert lines[1].startswith("a ") and lines[2].startswith("b ")


def test_peak_memory_cpu_counts_a_transient_tensor() -> None:
    result = peak_memory(lambda: torch.ones(BIG_FLOATS), device="cpu")  # 64 MiB, freed on return
    assert result.device == "cpu"
    assert result.method.startswith("cpu:")
    assert 60 * MIB <= result.peak_bytes <= 72 * MIB


def test_peak_memory_cpu_sees_the_peak_not_the_end() -> None:
    def two_then_none() -> None:
        a = torch.ones(BIG_FLOATS)
        b = torch.ones(BIG_FLOATS)  # 128 MiB live here
        del a, b  # 0 at the end

    result = peak_memory(two_then_none, device="cpu")
    assert 124 * MIB <= result.peak_bytes <= 136 * MIB


@no_cuda
def test_peak_memory_without_cuda_measures_cpu() -> None:
    assert peak_memory(lambda: torch.ones(BIG_FLOATS)).device == "cpu"


def test_peak_memory_rejects_unknown_device() -> None:
    with pytest.raises(ValueError, match="device must be"):
        peak_memory(lambda: None, device="tpu")


@needs_cuda
def test_peak_memory_cuda_is_exact_tensor_bytes() -> None:
    # 2**20 fp32 elements = 4 MiB, a multiple of the allocator's 512-byte blocks
    result = peak_memory(lambda: torch.empty(2**20, device="cuda"))
    assert result.device == "cuda"
    assert result.peak_bytes == 4 * MIB


@needs_cuda
def test_memory_snapshot_cuda_counts_allocated_bytes() -> None:
    before = memory_snapshot("before")
    x = torch.empty(2**20, device="cuda")
    after = memory_snapshot("after")
    assert after.gpu_allocated_bytes - before.gpu_allocated_bytes == 4 * MIB  # type: ignore[operator]
    del x


def test_fit_fixed_cost_recovers_exact_line() -> None:
    # t = 5 µs + work / 1e10: at work 0, 1e5, 1e6, 1e8 the times are 5 µs, 15 µs, 105 µs, 10.005 ms
    work = [0.0, 1e5, 1e6, 1e8]
    seconds = [5e-6 + x / 1e10 for x in work]
    fit = fit_fixed_cost(work, seconds)
    assert fit.fixed_s == pytest.approx(5e-6, rel=1e-9)
    assert fit.rate_per_s == pytest.approx(1e10, rel=1e-9)
    assert fit.max_relative_error == pytest.approx(0.0, abs=1e-9)


def test_fit_fixed_cost_weighs_small_and_large_times_alike() -> None:
    # 10 % noise on the largest time must not swamp the 1 µs fixed cost seen at small sizes
    work = [1e2, 1e3, 1e4, 1e9]
    seconds = [1e-6 + x / 1e9 for x in work]
    seconds[-1] *= 1.1
    fit = fit_fixed_cost(work, seconds)
    assert fit.fixed_s == pytest.approx(1e-6, rel=0.05)
    assert 0.9e9 < fit.rate_per_s < 1e9


@pytest.mark.parametrize(
    ("work", "seconds"),
    [([1.0], [1.0]), ([1.0, 2.0], [1.0]), ([1.0, 1.0], [1.0, 2.0]), ([1.0, 2.0], [0.0, 1.0]), ([1.0, 2.0], [2.0, 1.0])],
)
def test_fit_fixed_cost_rejects_unfittable_input(work, seconds) -> None:
    with pytest.raises(ValueError):
        fit_fixed_cost(work, seconds)


def test_memory_high_water_sees_a_freed_peak() -> None:
    from lecturelib.profiler import MemoryHighWater

    tracker = MemoryHighWater("cpu")
    x = torch.ones(BIG_FLOATS)  # 64 MiB, touched
    del x  # freed (returned to the OS): the current RSS drops, the high-water mark stays
    peak = tracker.peak_added_bytes()
    assert 60 * MIB <= peak <= 80 * MIB, peak / MIB
    assert tracker.method.startswith("cpu")


@needs_cuda
def test_memory_high_water_cuda_is_exact_tensor_bytes() -> None:
    from lecturelib.profiler import MemoryHighWater

    tracker = MemoryHighWater("cuda")
    x = torch.empty(2**20, device="cuda")  # 4 MiB
    del x
    assert tracker.peak_added_bytes() == 4 * MIB


# ---------------------------------------------------------------------------------------------
# time_each_call (notebook 01)


def test_time_each_call_times_at_least_min_calls_and_restores_threads() -> None:
    from lecturelib.profiler import time_each_call

    calls: list[int] = []
    threads_before = torch.get_num_threads()
    times = time_each_call(lambda: calls.append(torch.get_num_threads()), min_run_time_s=1e-6, num_threads=1)
    assert len(times.seconds) >= 5 and list(times.seconds) == sorted(times.seconds)
    assert len(calls) == len(times.seconds) + 2  # two warm-up calls, not timed
    assert set(calls) == {1} and torch.get_num_threads() == threads_before  # ran on 1 thread, then restored
    assert times.best_s == min(times.seconds) and times.best_s <= times.median_s
    assert times.device == ("cpu" if torch.accelerator.current_accelerator(check_available=True) is None
                            else torch.accelerator.current_accelerator().type)


def test_time_each_call_runs_for_min_run_time() -> None:
    from lecturelib.profiler import time_each_call

    started = time.perf_counter()
    times = time_each_call(lambda: time.sleep(0.002), min_run_time_s=0.03, warmup=0)
    assert time.perf_counter() - started >= 0.03 and len(times.seconds) >= 5  # its deadline, and min_calls
    assert times.best_s >= 0.002 and list(times.seconds) == sorted(times.seconds)  # sleeps never undershoot; sorted


def test_time_each_call_rejects_bad_input() -> None:
    from lecturelib.profiler import time_each_call

    with pytest.raises(ValueError):
        time_each_call(lambda: None, min_run_time_s=0.0)
    with pytest.raises(ValueError):
        time_each_call(lambda: None, min_calls=0)


# --- tensor_peak_memory: live tensor bytes, operator by operator -----------------------------------------

def test_tensor_peak_memory_counts_transients_and_existing() -> None:
    from lecturelib.profiler import tensor_peak_memory

    a = torch.ones(1000)  # 4,000 bytes, alive before the call
    peak = tensor_peak_memory(lambda: (a * 2) * 3, existing=[a])
    assert peak.existing_bytes == 4000
    assert peak.peak_bytes == 12_000  # a, a * 2 and (a * 2) * 3 alive at once: 3 · 4,000
    assert peak.op_at_peak == "aten.mul.Tensor" and peak.n_ops == 2


def test_tensor_peak_memory_counts_a_view_once() -> None:
    from lecturelib.profiler import tensor_peak_memory

    def views() -> None:
        x = torch.zeros(256, 4)  # 4,096 bytes
        x.t().reshape(-1)  # reshape of a transpose copies: 4,096 more
        x.view(4, 256)[0]  # views share x's storage: nothing more

    assert tensor_peak_memory(views).peak_bytes == 8192


def test_tensor_peak_memory_equals_pytorch_memtracker() -> None:
    # PyTorch's own module-aware tracker (torch.distributed._tools.mem_tracker) as the oracle, on one
    # training step of a small model: the same peak, to the byte
    from torch.distributed._tools.mem_tracker import MemTracker

    from lecturelib.profiler import tensor_peak_memory

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    x, y = torch.randn(512, 64), torch.randint(10, (512,))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    step()  # creates the optimizer's state
    tracker = MemTracker()
    tracker.track_external(model, optimizer)
    with tracker:
        step()
    oracle = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
    existing = [*model.parameters(), *(s for state in optimizer.state.values() for s in state.values())]
    assert tensor_peak_memory(step, existing=existing).peak_bytes == oracle


def test_release_free_heap_returns_a_bool() -> None:
    from lecturelib.profiler import release_free_heap

    assert isinstance(release_free_heap(), bool)  # True on glibc when memory went back to the OS


# --- compare: interleaved A/B rounds ----------------------------------------------------------------


def test_compare_interleaves_rounds_and_alternates_who_goes_first() -> None:
    calls: list[str] = []
    result = compare({"a": lambda: calls.append("a"), "b": lambda: calls.append("b")}, rounds=4,
                     min_round_s=1e-4, warmup=0)
    na, nb = result.calls_per_round["a"], result.calls_per_round["b"]
    # the last two rounds: round 2 runs a then b, round 3 runs b then a
    assert calls[-2 * (na + nb):] == ["a"] * na + ["b"] * nb + ["b"] * nb + ["a"] * na
    assert len(result.seconds["a"]) == len(result.seconds["b"]) == 4


def test_compare_takes_the_ratio_round_by_round_in_alternating_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clock only the calls move (slow: 2/1024 s a call, fast: 1/1024 s), compare calibrates each (5 and 10 calls
    a round of at least 8/1024 s), times three rounds in the order slow fast, fast slow, slow fast, and takes the
    ratio round by round: exactly 2. (Real sleeps would test the machine's load: they overshoot by what it is.)"""
    import itertools
    import types

    import lecturelib.profiler as profiler

    unit, clock, calls = 2.0 ** -10, [0.0], []
    monkeypatch.setattr(profiler, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def costing(name: str, units: int) -> Callable[[], None]:
        def call() -> None:
            clock[0] += units * unit
            calls.append(name)
        return call

    result = compare({"slow": costing("slow", 2), "fast": costing("fast", 1)}, rounds=3, min_round_s=8 * unit, warmup=1)
    assert result.calls_per_round == {"slow": 5, "fast": 10}
    assert result.seconds == {"slow": (2 * unit,) * 3, "fast": (unit,) * 3}
    # warmup and calibration (1, then 5 or 10 calls) of each, then the rounds: slow fast | fast slow | slow fast
    assert [(k, len(list(g))) for k, g in itertools.groupby(calls)] == [
        ("slow", 7), ("fast", 12), ("slow", 5), ("fast", 20), ("slow", 10), ("fast", 10)]
    ratio = result.ratio("slow", "fast")
    assert (ratio.median, ratio.low, ratio.high) == (2.0, 2.0, 2.0) and str(ratio) == "2.00x (rounds 2.00-2.00x)"
    assert ratio.above(1.9) and not ratio.above(2.0) and ratio.below(2.1) and not ratio.below(2.0)
    assert (result.best_s("slow"), result.median_s("fast")) == (2 * unit, unit)
    assert result.run_s == (7 * 2 + 12 + 5 * 2 + 20 + 10 * 2 + 10) * unit


def test_compare_calibrates_calls_per_round_to_min_round_s(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a clock that only the calls move (a call is 1/1024 s, exact in binary), calibration finds the calls that make
    a round of min_round_s: 1 call is too short, then 10 (1 * 1.2 * 10 / 1, capped at 10x) last exactly 10/1024 s.
    A real sleep would test the machine's load instead (CI once timed a calibrated round of 7 sleeps at 8.3 ms)."""
    import types

    import lecturelib.profiler as profiler

    clock = [0.0]
    monkeypatch.setattr(profiler, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))

    def call() -> None:
        clock[0] += 2.0 ** -10

    result = compare({"call": call}, rounds=3, min_round_s=10 * 2.0 ** -10, warmup=1)
    assert result.calls_per_round == {"call": 10}
    assert result.seconds == {"call": (2.0 ** -10,) * 3}
    assert result.run_s == (1 + 1 + 10 + 3 * 10) * 2.0 ** -10  # warmup, calibration (1, then 10), three rounds


def test_compare_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        compare({}, rounds=3)
    with pytest.raises(ValueError):
        compare({"a": lambda: None}, rounds=0)
    with pytest.raises(ValueError):
        compare({"a": lambda: None}, min_round_s=0)


def test_ratio_of_rounds_is_their_median_and_range() -> None:
    ratio = Ratio.of([1.5, 0.9, 1.2, 2.0])
    assert (ratio.median, ratio.low, ratio.high) == (1.35, 0.9, 2.0)  # median of 4: (1.2 + 1.5) / 2
    assert not ratio.above(1.0) and ratio.above(0.8)
    with pytest.raises(ValueError):
        Ratio.of([])
