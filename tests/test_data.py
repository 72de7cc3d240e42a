"""Tests of lecturelib.data: the synthetic dataset, DataLoader timings by structure, and CUDA transfers' CPU answer.

No test asserts a speed: the machine is shared. Timings are checked by what a sleep guarantees (it never
returns early) and by counts: batches, worker processes, warnings.
"""

from __future__ import annotations

import math
import os
import sys

import numpy as np
import pytest
import torch
from torch.utils.data import Dataset
from hypothesis import given
from hypothesis import strategies as st

from lecturelib import data
from lecturelib.data import LoaderConfig, SyntheticDataset, Unavailable, time_loader

CUDA = torch.cuda.is_available()
ACCELERATOR = torch.accelerator.is_available()


# --- the dataset ------------------------------------------------------------------------------


def test_synthetic_dataset_sample_is_filled_with_its_index() -> None:
    ds = SyntheticDataset(5, (2, 3))
    sample, trace = ds[3]
    assert torch.equal(sample, torch.full((2, 3), 3.0))
    assert sample.dtype == torch.float32
    pid, start, end = trace.tolist()
    assert pid == os.getpid() and start <= end


@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    dtype=st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.uint8]),
)
def test_synthetic_dataset_sample_bytes_equal_torch_nbytes(shape: list[int], dtype: torch.dtype) -> None:
    ds = SyntheticDataset(2, shape, dtype=dtype)
    assert ds.sample_bytes() == ds[1][0].nbytes  # PyTorch as the oracle: elements × element_size
    assert ds.sample_bytes() == math.prod(shape) * ds[0][0].element_size()


def test_synthetic_dataset_length_and_range() -> None:
    ds = SyntheticDataset(4, (1,))
    assert len(ds) == 4
    with pytest.raises(IndexError):
        ds[4]


@pytest.mark.parametrize(
    "kwargs",
    [dict(n_samples=0, sample_shape=(1,)), dict(n_samples=2, sample_shape=(0, 3)),
     dict(n_samples=2, sample_shape=(1,), cost_s=-1.0), dict(n_samples=2, sample_shape=(1,), work="gpu")],
)
def test_synthetic_dataset_rejects_bad_arguments(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        SyntheticDataset(**kwargs)  # type: ignore[arg-type]


def test_spend_sleep_never_returns_early() -> None:
    import time

    start = time.perf_counter()
    data.spend(0.01, "sleep")
    assert time.perf_counter() - start >= 0.01


def test_spend_cpu_uses_this_threads_cpu_time() -> None:
    import time

    start = time.thread_time()
    data.spend(0.01, "cpu")
    assert time.thread_time() - start >= 0.01  # CPU time, not wall time: the work is fixed, however busy the machine


# --- time_loader: structure and lower bounds ----------------------------------------------------

COST_S = 0.004  # per sample, slept
BATCH = 4


def _dataset(n: int = 12) -> SyntheticDataset:
    return SyntheticDataset(n, (3, 8, 8), cost_s=COST_S)


def test_time_loader_main_process_counts_batches_and_bounds_the_rate() -> None:
    timing = time_loader(_dataset(), LoaderConfig(batch_size=BATCH), epochs=2, compute_s=0.002)
    assert timing.n_batches == 2 * 3  # 12 samples / 4 per batch, two epochs
    assert timing.worker_processes == 0  # the main process loaded every sample
    assert all(b.pid == os.getpid() for e in timing.epochs for b in e.batches)
    # without workers a batch costs its loading plus the step, one after the other; sleeps never return early
    assert timing.steady_batches_per_s <= 1 / (BATCH * COST_S + 0.002)
    assert timing.batches_per_s <= 1 / (BATCH * COST_S + 0.002)
    assert timing.warnings == ()


def test_time_loader_worker_startup_visible_every_epoch() -> None:
    timing = time_loader(_dataset(8), LoaderConfig(batch_size=BATCH, num_workers=1), epochs=3)
    assert timing.worker_processes == 3  # a new worker process each epoch
    assert len({e.worker_pids for e in timing.epochs}) == 3
    for epoch in timing.epochs:
        assert os.getpid() not in epoch.worker_pids
        # nothing is loaded before iter(): the first batch costs start-up plus a whole batch's loading
        assert epoch.first_batch_s >= BATCH * COST_S
        assert epoch.iter_s > 0 and epoch.wait_s <= epoch.seconds


def test_time_loader_persistent_workers_reuse_processes() -> None:
    timing = time_loader(_dataset(8), LoaderConfig(batch_size=BATCH, num_workers=2, persistent_workers=True), epochs=3)
    assert timing.worker_processes == 2  # started once, kept for every epoch
    assert timing.epochs[0].worker_pids == timing.epochs[1].worker_pids == timing.epochs[2].worker_pids
    assert all(e.end_s >= 0 for e in timing.epochs)
    # kept alive, but nothing prefetched across epochs: each epoch's first batch is loaded after iter()
    assert all(e.first_batch_s >= BATCH * COST_S for e in timing.epochs)


def test_time_loader_step_bounds_the_steady_rate() -> None:
    compute_s = 0.01
    timing = time_loader(_dataset(16), LoaderConfig(batch_size=2, num_workers=2, persistent_workers=True),
                         epochs=1, compute_s=compute_s)
    assert timing.steady_batches_per_s <= 1 / compute_s  # the main process sleeps compute_s between two next()
    assert timing.n_batches == 8


@pytest.mark.parametrize("workers", [0, 1, 2, 3])
def test_time_loader_steady_and_running_rates_never_beat_the_bound(workers: int) -> None:
    # whole rounds of workers, clocked from a ready batch: a hard bound whatever the noise (sleeps never return early)
    compute_s, load_s = 0.002, BATCH * COST_S
    timing = time_loader(_dataset(4 * 8), LoaderConfig(batch_size=BATCH, num_workers=workers), compute_s=compute_s)
    bound = 1 / (load_s + compute_s) if workers == 0 else min(workers / load_s, 1 / compute_s)
    assert timing.steady_batches_per_s <= bound * (1 + 1e-9)
    assert timing.running_batches_per_s <= bound * (1 + 1e-9)
    assert timing.batches_per_s <= timing.running_batches_per_s  # start-up only adds time
    (epoch,) = timing.epochs
    assert epoch.running_s <= epoch.seconds


def test_time_loader_steady_rate_needs_whole_rounds() -> None:
    timing = time_loader(_dataset(4 * 4), LoaderConfig(batch_size=BATCH, num_workers=2))  # 4 batches < 2 * 2 + 1
    with pytest.raises(ValueError, match="at least 5 batches"):
        timing.steady_batches_per_s


class _Affinity(Dataset[tuple[int, ...]]):
    """Each item: the CPUs the process that loads it may run on."""

    def __len__(self) -> int:
        return 2

    def __getitem__(self, index: int) -> tuple[int, ...]:
        return tuple(sorted(os.sched_getaffinity(0)))


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="CPU affinity is Linux only")
def test_loader_config_worker_cpus_confines_the_workers_only() -> None:
    first = min(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    config = LoaderConfig(batch_size=None, num_workers=1, worker_cpus=(first,))  # type: ignore[arg-type]
    assert [tuple(cpus) for cpus in config.loader(_Affinity())] == [(first,), (first,)]  # type: ignore[arg-type]
    assert os.sched_getaffinity(0) == before  # the main process keeps its CPUs
    assert "on CPUs" in config.label()
    with pytest.raises(ValueError):
        LoaderConfig(num_workers=1, worker_cpus=()).loader(_dataset(4))


def test_time_loader_returns_batches_in_order_across_workers() -> None:
    spans = data.pipeline_spans(time_loader(_dataset(12), LoaderConfig(batch_size=BATCH, num_workers=2)))
    assert list(spans) == ["worker 0 loads", "worker 1 loads", "main waits", "main computes"]
    assert len(spans["main computes"]) == 3 and len(spans["main waits"]) == 1 + 3  # iter() and each next()
    assert len(spans["worker 0 loads"]) + len(spans["worker 1 loads"]) == 3
    assert all(b - a >= BATCH * COST_S for a, b in spans["worker 0 loads"])  # a batch: 4 slept samples


def test_time_loader_prefetch_factor_is_passed_through() -> None:
    timing = time_loader(_dataset(8), LoaderConfig(batch_size=BATCH, num_workers=1, prefetch_factor=1))
    assert timing.config.label() == "1 worker, prefetch 1"
    assert timing.n_batches == 2


@pytest.mark.skipif(ACCELERATOR, reason="on a machine with an accelerator, pin_memory works")
def test_time_loader_pin_memory_without_accelerator_is_ignored_with_a_warning() -> None:
    timing = time_loader(_dataset(4), LoaderConfig(batch_size=BATCH, pin_memory=True))
    assert timing.pinned is False
    assert any("no accelerator is found" in w for w in timing.warnings)


def test_time_loader_rejects_what_dataloader_rejects() -> None:
    with pytest.raises(ValueError, match="persistent_workers option needs num_workers > 0"):
        time_loader(_dataset(4), LoaderConfig(num_workers=0, persistent_workers=True))
    with pytest.raises(ValueError, match="prefetch_factor option could only be specified in multiprocessing"):
        time_loader(_dataset(4), LoaderConfig(num_workers=0, prefetch_factor=2))
    with pytest.raises(ValueError):
        time_loader(_dataset(4), LoaderConfig(), epochs=0)


def test_time_loader_spawn_workers_import_the_dataset() -> None:
    # spawn starts a fresh interpreter per worker: the dataset must be picklable from an importable module
    timing = time_loader(SyntheticDataset(2, (1,)), LoaderConfig(batch_size=2, num_workers=1,
                                                                  multiprocessing_context="spawn"))
    assert timing.worker_processes == 1 and timing.n_batches == 1


def test_loader_config_labels() -> None:
    assert LoaderConfig().label() == "0 workers"
    assert LoaderConfig(num_workers=2, persistent_workers=True, prefetch_factor=4, pin_memory=True,
                        multiprocessing_context="fork").label() == "2 workers, persistent, prefetch 4, pinned, fork"


# --- copy-on-access -----------------------------------------------------------------------------


def test_worker_read_memory_shares_a_memory_mapped_file(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "tokens.bin")
    size = 2**24  # 16 MiB: the worker's own pages (about 1 MiB: its stack, Python's allocations) stay far below a quarter
    np.arange(size // 2, dtype=np.uint16).tofile(path)
    tokens = np.memmap(path, dtype=np.uint16, mode="r")
    int(tokens.sum(dtype=np.int64))  # this process maps every page first
    grown = data.worker_read_memory(tokens)
    if isinstance(grown, Unavailable):
        pytest.skip(grown.reason)
    assert grown.rss >= size // 2  # the worker mapped the file's pages ...
    assert grown.uss < size // 4 and grown.anonymous < size // 4  # ... without copying them


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc, mincore and posix_fadvise: Linux")
def test_page_cache_helpers_on_a_file(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "tokens.bin")
    np.zeros(2**20, dtype=np.uint16).tofile(path)  # 2 MiB
    tokens = np.memmap(path, dtype=np.uint16, mode="r")
    assert data.mapped_rss_bytes(path) == 0  # mapping reads nothing
    major0, minor0 = data.page_faults()
    int(tokens[:: 4096 // 2].sum())  # one token per page
    major1, minor1 = data.page_faults()
    assert major1 >= major0 and minor1 + major1 > minor0 + major0  # touching new pages faults
    assert data.mapped_rss_bytes(path) == 2**21  # every page mapped now
    assert data.page_cache_fraction(path) == 1.0  # and in the page cache
    del tokens
    assert data.drop_from_page_cache(path) is None  # advice: whether it was taken depends on the filesystem
    fraction = data.page_cache_fraction(path)
    assert isinstance(fraction, float) and 0.0 <= fraction <= 1.0
    if data.filesystem_type(path) in ("tmpfs", "ramfs"):
        assert fraction == 1.0  # a file in memory has nowhere else to be


@pytest.mark.skipif(not os.path.exists("/proc/self/mountinfo"), reason="needs /proc")
def test_filesystem_type_from_mountinfo() -> None:
    assert data.filesystem_type("/proc") == "proc"
    assert data.filesystem_type("/proc/self") == "proc"  # the longest mount point that contains the path


def test_copy_on_access_python_objects_copied_tensor_not() -> None:
    n = 400_000
    objects = [float(i) for i in range(n)]  # n float objects of 24 bytes: 9.6 MB of reference counts to write
    listed = data.copy_on_access_bytes(objects)
    assert isinstance(listed, int)
    tensor = data.copy_on_access_bytes(torch.arange(n, dtype=torch.float64))  # 3.2 MB read, never written
    assert isinstance(tensor, int)
    assert listed >= n * 24 // 2  # at least half the objects' pages were copied into the worker
    assert tensor < listed / 4


# --- host-to-device transfers -------------------------------------------------------------------


def test_pcie_bytes_per_s_from_the_specifications() -> None:
    assert data.pcie_bytes_per_s(2) == 8e9  # 5 GT/s × 16 × 8/10 / 8: NVIDIA's "8 GB/s on PCIe x16 Gen2"
    assert data.pcie_bytes_per_s(4) == pytest.approx(31_507_692_307.69, rel=1e-12)  # 16e9 × 16 × 128/130 / 8
    assert data.pcie_bytes_per_s(5, lanes=8) == pytest.approx(data.pcie_bytes_per_s(4))  # 2x the rate, half the lanes
    with pytest.raises(ValueError):
        data.pcie_bytes_per_s(7)


@given(st.sampled_from(sorted(data.PCIE_GENERATIONS)), st.integers(1, 32))
def test_pcie_bytes_per_s_linear_in_lanes(generation: int, lanes: int) -> None:
    assert math.isclose(data.pcie_bytes_per_s(generation, lanes), lanes * data.pcie_bytes_per_s(generation, 1))


@given(st.floats(1e6, 1e12), st.floats(1e6, 1e12))
def test_staged_copy_bounds_are_ordered(memcpy: float, link: float) -> None:
    serial, overlapped = data.staged_copy_bytes_per_s(memcpy, link)
    assert serial <= overlapped <= min(memcpy, link) * (1 + 1e-12)
    assert serial >= overlapped / 2 * (1 - 1e-12)  # overlap can at most halve the time of two steps


def test_host_memcpy_bytes_per_s_is_positive_and_keeps_the_thread_count() -> None:
    threads = torch.get_num_threads()
    assert data.host_memcpy_bytes_per_s(2**16, repeats=3) > 0
    assert torch.get_num_threads() == threads
    with pytest.raises(ValueError):
        data.host_memcpy_bytes_per_s(2**16, repeats=0)


def _sysfs_device(root: str, name: str, files: dict[str, str]) -> str:
    os.makedirs(os.path.join(root, name), exist_ok=True)
    for file, text in files.items():
        with open(os.path.join(root, name, file), "w") as f:
            f.write(text + "\n")
    return os.path.join(root, name)


def test_pcie_link_reads_the_lower_of_device_and_port(tmp_path: object) -> None:
    root = str(tmp_path)
    port = _sysfs_device(root, "devices/pci0000:00/0000:00:01.0", {"max_link_speed": "16.0 GT/s PCIe",
                                                                   "max_link_width": "16"})
    device = _sysfs_device(port, "0000:01:00.0", {"max_link_speed": "32.0 GT/s PCIe", "max_link_width": "16",
                                                  "current_link_speed": "2.5 GT/s PCIe", "current_link_width": "16"})
    os.makedirs(os.path.join(root, "bus"))
    os.symlink(device, os.path.join(root, "bus", "0000:01:00.0"))  # /sys/bus/pci/devices/ADDR is a link
    link = data.pcie_link("0000:01:00.0", sysfs=os.path.join(root, "bus"))
    assert not isinstance(link, Unavailable)
    assert (link.max_generation, link.max_lanes) == (4, 16)  # a Gen5 GPU in a Gen4 slot trains to Gen4
    assert (link.current_generation, link.current_lanes) == (1, 16)  # idle: slowed down
    assert link.max_bytes_per_s == data.pcie_bytes_per_s(4, 16)
    assert isinstance(data.pcie_link("0000:02:00.0", sysfs=os.path.join(root, "bus")), Unavailable)


@pytest.mark.skipif(CUDA, reason="the CPU answer: this machine has CUDA")
@pytest.mark.parametrize(
    "measure",
    [lambda: data.h2d_bandwidth([1024]), lambda: data.pin_cost(1024), lambda: data.overlap_demo(1024, 64),
     lambda: data.d2h_hazard(1024), lambda: data.cuda_pcie_link()],
    ids=["h2d_bandwidth", "pin_cost", "overlap_demo", "d2h_hazard", "cuda_pcie_link"],
)
def test_transfers_without_cuda_are_not_available_with_a_reason(measure: object) -> None:
    result = measure()  # type: ignore[operator]
    assert isinstance(result, Unavailable)
    assert result.available is False
    assert "CUDA" in result.reason and torch.__version__ in result.reason


def test_transfers_reject_bad_sizes_on_any_machine() -> None:
    for bad in (lambda: data.h2d_bandwidth([]), lambda: data.h2d_bandwidth([0]), lambda: data.pin_cost(-1),
                lambda: data.overlap_demo(0, 64), lambda: data.d2h_hazard(1024, trials=0)):
        with pytest.raises(ValueError):
            bad()


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_h2d_bandwidth_on_cuda_measures_both_paths() -> None:
    sweep = data.h2d_bandwidth([2**20, 2**24], min_run_time_s=0.02)
    assert not isinstance(sweep, Unavailable)
    assert sweep.sizes_bytes == (2**20, 2**24)
    assert all(r > 0 for r in (*sweep.pageable_bytes_per_s, *sweep.pinned_bytes_per_s))


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_pin_cost_overlap_and_hazard_on_cuda() -> None:
    cost = data.pin_cost(2**24, min_run_time_s=0.02)
    assert not isinstance(cost, Unavailable) and cost.pin_s > 0 and cost.first_pin_s > 0
    overlap = data.overlap_demo(2**26, 2048)
    assert not isinstance(overlap, Unavailable)
    assert set(overlap.runs) == set(overlap.total_ms) == set(data.OVERLAP_RUNS)
    for name in ("pageable, one stream", "pinned, one stream"):  # one stream: compute after the copy
        assert overlap.runs[name]["compute"][0][0] >= overlap.runs[name]["copy"][0][1]
    hazard = data.d2h_hazard(2**24, trials=5)
    assert not isinstance(hazard, Unavailable)
    assert hazard.wrong_after_sync == 0  # synchronizing makes every read right
