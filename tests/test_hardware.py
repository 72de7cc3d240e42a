"""Tests of lecturelib.hardware: detection, the datasheet table, measured peaks and the roofline."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lecturelib.flops import matmul_flops
from lecturelib.hardware import (
    GPU_L2_BYTES,


    GEMV_D_MODEL,
    GPU_NAMES,
    GPU_SMS,
    MEMORY_BANDWIDTH,
    PEAKS,
    BandwidthPoint,
    CpuCaches,
    _cache_size_bytes,
    arithmetic_intensity,
    attainable_flop_per_s,
    cpu_clock_hz,
    cpu_vector_units,
    detect_device,
    gemm_tiles,


    bandwidth_sweep,
    cpu_caches,
    decode_seconds_per_token,
    detect_device,
    elementwise_bytes,
    gpu_key,
    gpu_l2_bytes,
    kernel_roofline,
    matmul_bytes,
    measure_bandwidth,
    measure_copy_bytes_per_s,
    measure_matmul_flop_per_s,
    peak_bytes_per_s,
    peak_flop_per_s,
    ridge_point,
    roofline,
    roofline_time_s,
    tile_efficiency,
    wave_efficiency,


    memory_plateau_bytes,
    tier_bandwidths,
    working_set_sizes,
)

REQUIRED_GPUS = ("h100-sxm", "h100-pcie", "h200", "a100-sxm-80gb", "l4", "t4")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_detect_device_matches_torch() -> None:
    if torch.cuda.is_available():
        expected = "cuda"
    elif torch.backends.mps.is_available():
        expected = "mps"
    else:
        expected = "cpu"
    assert detect_device() == expected


@pytest.mark.parametrize("device_key", REQUIRED_GPUS)
def test_peaks_cover_required_gpus(device_key: str) -> None:
    assert (device_key, "fp32") in PEAKS
    assert (device_key, "fp16") in PEAKS
    if device_key != "t4":  # Turing's tensor cores have no bf16 or tf32 mode
        assert (device_key, "bf16") in PEAKS
        assert (device_key, "tf32") in PEAKS
    assert device_key in MEMORY_BANDWIDTH


def test_peaks_every_entry_has_a_source_url() -> None:
    for key, peak in [*PEAKS.items(), *MEMORY_BANDWIDTH.items()]:
        assert peak.source.startswith("https://"), key
        assert peak.value > 0, key


def test_peak_flop_per_s_is_dense_half_of_sparse_datasheet() -> None:
    assert peak_flop_per_s("h100-sxm", "bf16") == 989.5e12  # datasheet 1,979 TF with sparsity / 2
    assert peak_flop_per_s("a100-sxm-80gb", "bf16") == 312e12  # datasheet 312 TF dense (624 sparse)
    assert peak_flop_per_s("h100-sxm", "fp32") == 67e12  # non-tensor fp32, no sparsity


def test_peak_flop_per_s_tensor_cores_beat_fp32() -> None:
    for (device_key, dtype), peak in PEAKS.items():
        if dtype != "fp32":
            assert peak.value > peak_flop_per_s(device_key, "fp32"), (device_key, dtype)


def test_peak_bytes_per_s_h100_and_h200() -> None:
    assert peak_bytes_per_s("h100-sxm") == 3.35e12  # HBM3, 3.35 TB/s
    assert peak_bytes_per_s("h200") == 4.8e12  # HBM3e, 4.8 TB/s


def test_peak_flop_per_s_unknown_raises() -> None:
    with pytest.raises(ValueError, match="unknown device 'v100'"):
        peak_flop_per_s("v100", "fp16")
    with pytest.raises(ValueError, match="no 'bf16' peak for t4"):
        peak_flop_per_s("t4", "bf16")
    with pytest.raises(ValueError, match="unknown device"):
        peak_bytes_per_s("v100")


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA L4", "l4"),
        ("Tesla T4", "t4"),
        ("NVIDIA A100-SXM4-40GB", None),  # other memory: not in the table
        ("NVIDIA GeForce RTX 4090", None),
    ],
)
def test_gpu_key_maps_device_names(name: str, key: str | None) -> None:
    assert gpu_key(name) == key


def test_gpu_names_map_into_the_table() -> None:
    assert set(GPU_NAMES.values()) == {key for key, _ in PEAKS} == set(MEMORY_BANDWIDTH)


def test_roofline_h100_bf16_examples() -> None:
    peak, bandwidth = peak_flop_per_s("h100-sxm", "bf16"), peak_bytes_per_s("h100-sxm")
    # bf16 vector add of n elements: n FLOPs over 3 · 2n bytes (read a, read b, write c)
    add = roofline(1000, 6000, peak_flop_per_s=peak, peak_bytes_per_s=bandwidth)
    assert add.bound == "memory"
    assert add.attainable_flop_per_s == pytest.approx(3.35e12 / 6)  # intensity 1/6 · 3.35 TB/s
    # bf16 4096³ matmul: 2 · 4096³ FLOPs over 3 · 4096² · 2 bytes: intensity 4096/3 ≈ 1365 FLOP/byte
    mm = roofline(2 * 4096**3, 3 * 4096**2 * 2, peak_flop_per_s=peak, peak_bytes_per_s=bandwidth)
    assert mm.bound == "compute"
    assert mm.attainable_flop_per_s == peak
    assert mm.ridge_flop_per_byte == pytest.approx(295.37, rel=1e-4)  # 989.5e12 / 3.35e12


@given(
    flops=st.integers(1, 10**15),
    n_bytes=st.integers(1, 10**12),
    peak=st.floats(1e9, 1e16),
    bandwidth=st.floats(1e8, 1e13),
)
def test_roofline_attainable_is_the_lower_roof(flops: int, n_bytes: int, peak: float, bandwidth: float) -> None:
    result = roofline(flops, n_bytes, peak_flop_per_s=peak, peak_bytes_per_s=bandwidth)
    memory_roof = flops / n_bytes * bandwidth
    assert result.attainable_flop_per_s == min(peak, memory_roof)
    assert result.bound == ("memory" if memory_roof < peak else "compute")


def test_measure_matmul_flop_per_s_cpu_is_positive() -> None:
    flop_per_s = measure_matmul_flop_per_s(128, "fp32", "cpu", min_run_time_s=0.05)
    assert math.isfinite(flop_per_s) and flop_per_s > 0


def test_measure_copy_bytes_per_s_cpu_is_positive() -> None:
    bytes_per_s = measure_copy_bytes_per_s(2**20, "cpu", min_run_time_s=0.05)
    assert math.isfinite(bytes_per_s) and bytes_per_s > 0


def test_measure_matmul_flop_per_s_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="tf32 is a CUDA"):
        measure_matmul_flop_per_s(64, "tf32", "cpu")
    with pytest.raises(ValueError, match="unknown dtype"):
        measure_matmul_flop_per_s(64, "fp4", "cpu")
    with pytest.raises(ValueError, match="n must be positive"):
        measure_matmul_flop_per_s(0, "fp32", "cpu")
    with pytest.raises(ValueError, match="n_bytes must be positive"):
        measure_copy_bytes_per_s(0, "cpu")


@needs_cuda
@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_measure_matmul_flop_per_s_cuda_below_datasheet(dtype: str) -> None:
    key = gpu_key(torch.cuda.get_device_name())
    if key is None or (key, dtype) not in PEAKS:
        pytest.skip(f"no {dtype} datasheet peak for {torch.cuda.get_device_name()}")
    measured = measure_matmul_flop_per_s(4096, dtype, "cuda", min_run_time_s=0.2)
    assert 0 < measured <= 1.05 * peak_flop_per_s(key, dtype)


@needs_cuda
def test_measure_copy_bytes_per_s_cuda_below_datasheet() -> None:
    key = gpu_key(torch.cuda.get_device_name())
    if key is None:
        pytest.skip(f"no datasheet bandwidth for {torch.cuda.get_device_name()}")
    measured = measure_copy_bytes_per_s(2**30, "cuda", min_run_time_s=0.2)  # 1 GiB: far above L2
    assert 0 < measured <= 1.05 * peak_bytes_per_s(key)


def test_roofline_time_is_the_slower_of_compute_and_traffic() -> None:
    # 1e12 FLOPs over 1e9 bytes on a 1e12 FLOP/s, 1e11 B/s device: compute 1 s, traffic 0.01 s
    assert roofline_time_s(10**12, 10**9, 1e12, 1e11) == 1.0
    # 1e9 FLOPs over 1e12 bytes: traffic 10 s dominates
    assert roofline_time_s(10**9, 10**12, 1e12, 1e11) == 10.0
    assert ridge_point(1e12, 1e11) == 10.0  # FLOP/byte
    assert attainable_flop_per_s(0.5, 1e12, 1e11) == 5e10  # below the ridge: 0.5 · 1e11
    assert attainable_flop_per_s(100.0, 1e12, 1e11) == 1e12  # above it: the peak
    r = roofline(10**9, 10**12, peak_flop_per_s=1e12, peak_bytes_per_s=1e11)
    assert (r.bound, r.time_s, r.peak_flop_per_s, r.peak_bytes_per_s) == ("memory", 10.0, 1e12, 1e11)


@pytest.mark.parametrize(
    "call",
    [
        lambda: ridge_point(0.0, 1e9),
        lambda: ridge_point(1e12, -1.0),
        lambda: attainable_flop_per_s(-1.0, 1e12, 1e9),
        lambda: roofline_time_s(-1, 10, 1e12, 1e9),
        lambda: roofline_time_s(1, 10, float("inf"), 1e9),
        lambda: arithmetic_intensity(-5, 10),
    ],
)
def test_roofline_helpers_reject_bad_input(call) -> None:
    with pytest.raises(ValueError):
        call()


@given(
    flops=st.integers(0, 10**15),
    n_bytes=st.integers(1, 10**12),
    peak=st.floats(1e9, 1e16),
    bandwidth=st.floats(1e8, 1e13),
)
def test_roofline_time_times_attainable_rate_is_the_flops(flops: int, n_bytes: int, peak: float, bandwidth: float) -> None:
    r = roofline(flops, n_bytes, peak_flop_per_s=peak, peak_bytes_per_s=bandwidth)
    assert r.time_s * r.attainable_flop_per_s == pytest.approx(flops, rel=1e-9, abs=1e-9)


CPUINFO_ZEN4 = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\ncpu MHz\t\t: 2596.146\n"
                "flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw\n")
CPUINFO_SAPPHIRE = ("processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\ncpu MHz\t\t: 2100.000\n"
                    "flags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw amx_bf16\n")
CPUINFO_HASWELL = "processor\t: 0\ncpu MHz\t\t: 3400.000\nflags\t\t: fpu sse2 avx fma avx2\n"
CPUINFO_SANDY = "processor\t: 0\nflags\t\t: fpu sse2 avx\n"
CPUINFO_ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n"


@pytest.mark.parametrize(
    ("cpuinfo", "isa", "flop_per_cycle"),
    [
        (CPUINFO_ZEN4, "AVX-512", 32),  # 2 units × 8 lanes (a 512-bit FMA runs as two 256-bit halves) × 2
        (CPUINFO_SAPPHIRE, "AVX-512", 64),  # 2 units × 16 lanes × 2
        (CPUINFO_HASWELL, "AVX2+FMA", 32),  # 2 units × 8 lanes × 2
        (CPUINFO_SANDY, "AVX", 16),  # a multiply pipe and an add pipe × 8 lanes
        (CPUINFO_ARM, "NEON", 16),  # 2 pipes × 4 lanes × 2
    ],
)
def test_cpu_vector_units_from_flags(cpuinfo: str, isa: str, flop_per_cycle: int) -> None:
    units = cpu_vector_units(cpuinfo)
    assert units is not None and (units.isa, units.flop_per_cycle_fp32) == (isa, flop_per_cycle)


def test_cpu_vector_units_unknown() -> None:
    assert cpu_vector_units("processor\t: 0\nflags\t\t: fpu\n") is None


def test_cpu_clock_prefers_cpufreq_max(tmp_path) -> None:
    for cpu, khz in (("cpu0", "3700000"), ("cpu1", "3500000")):
        (tmp_path / cpu / "cpufreq").mkdir(parents=True)
        (tmp_path / cpu / "cpufreq" / "cpuinfo_max_freq").write_text(khz + "\n")
    assert cpu_clock_hz(str(tmp_path), CPUINFO_ZEN4) == (3.7e9, "cpufreq cpuinfo_max_freq (the boost clock)")
    hz, source = cpu_clock_hz(str(tmp_path / "none"), CPUINFO_ZEN4)
    assert hz == pytest.approx(2.596146e9) and "cpu MHz" in source
    assert cpu_clock_hz(str(tmp_path / "none"), "processor\t: 0\n") is None


def test_gemm_tiles_and_quantization_h100_n1024() -> None:
    # 1024 x 1024 output in 128 x 128 tiles: 8 x 8 = 64 tiles for 132 SMs: one partial wave, 64/132 busy
    assert gemm_tiles(1024, 1024) == 64
    assert wave_efficiency(64, GPU_SMS["h100-sxm"]) == 64 / 132
    assert tile_efficiency(1024, 1024) == 1.0
    # 1000 x 1000: still 64 tiles, but the edge tiles are partly empty: 1000² / (64 · 128²)
    assert gemm_tiles(1000, 1000) == 64 and tile_efficiency(1000, 1000) == 1_000_000 / (64 * 128 * 128)
    # 4096²: 1024 tiles = 7 full waves + 100 tiles: 1024 / (8 · 132)
    assert wave_efficiency(gemm_tiles(4096, 4096), 132) == 1024 / 1056


def test_gpu_tables_cover_the_same_devices() -> None:
    assert set(GPU_SMS) == set(GPU_L2_BYTES) <= set(MEMORY_BANDWIDTH)
    with pytest.raises(ValueError):
        wave_efficiency(0, 132)
    with pytest.raises(ValueError):
        gemm_tiles(0, 5)


# ---------------------------------------------------------------------------------------------
# Notebook 01: bytes moved, kernels on a roofline, this machine's caches and bandwidth sweep


@pytest.mark.parametrize(("n", "n_inputs", "dtype"), [(1000, 2, torch.float32), (7, 1, torch.bfloat16), (33, 3, torch.float64)])
def test_elementwise_bytes_equals_tensor_bytes(n: int, n_inputs: int, dtype: torch.dtype) -> None:
    inputs = [torch.ones(n, dtype=dtype) for _ in range(n_inputs)]
    output = torch.stack(inputs).sum(0)  # one array written
    oracle = sum(t.nbytes for t in inputs) + output.nbytes
    assert elementwise_bytes(n, n_inputs, dtype.itemsize) == oracle


def test_elementwise_bytes_fp32_add() -> None:
    assert elementwise_bytes(2**20, 2, 4) == 12 * 2**20  # read a and b, write c: 3 · 4 bytes per element


@given(m=st.integers(1, 64), k=st.integers(1, 64), n=st.integers(1, 64), element_bytes=st.sampled_from([1, 2, 4]))
def test_matmul_bytes_equals_operands_and_result(m: int, k: int, n: int, element_bytes: int) -> None:
    a, b = torch.ones(m, k, dtype=torch.uint8), torch.ones(k, n, dtype=torch.uint8)
    oracle = (a.nbytes + b.nbytes + (a @ b).nbytes) * element_bytes  # uint8: one byte per element
    assert matmul_bytes(m, k, n, element_bytes) == oracle
    assert matmul_bytes(m, k, n, element_bytes) == matmul_bytes(n, k, m, element_bytes)  # (AB)ᵀ = BᵀAᵀ


def test_matmul_bytes_square_intensity_is_2n_over_3s() -> None:
    n = 4096
    assert matmul_bytes(n, n, n, 2) == 3 * n * n * 2  # 100,663,296 bytes
    assert arithmetic_intensity(matmul_flops(n, n, n), matmul_bytes(n, n, n, 2)) == 2 * n / (3 * 2)


def test_decode_seconds_per_token_llama2_7b_on_h100() -> None:
    # 6,738,415,616 parameters (Llama-2-7B) × 2 bytes over 3.35 TB/s ≈ 4.02 ms per token
    assert decode_seconds_per_token(6_738_415_616, 2, 3.35e12) == pytest.approx(4.0229e-3, rel=1e-4)


@pytest.mark.parametrize(("n", "bound"), [(64, "memory"), (885, "memory"), (887, "compute"), (4096, "compute")])
def test_kernel_roofline_matmul_crosses_the_ridge(n: int, bound: str) -> None:
    # h100-sxm bf16: ridge 989.5e12 / 3.35e12 ≈ 295.4 FLOP/byte; square matmul intensity n/3 crosses it at n ≈ 886
    assert kernel_roofline("h100-sxm", "bf16", "matmul", n).bound == bound


def test_kernel_roofline_gemv_batch_one_is_one_flop_per_byte() -> None:
    r = kernel_roofline("h100-sxm", "bf16", "gemv", 1)
    d = GEMV_D_MODEL
    assert r.arithmetic_intensity_flop_per_byte == 2 * d * d / ((d + d * d + d) * 2)  # ≈ 1 FLOP per byte
    assert r.bound == "memory" and r.time_s == (d + d * d + d) * 2 / 3.35e12


@pytest.mark.parametrize(
    "call",
    [
        lambda: kernel_roofline("h100-sxm", "bf16", "conv", 8),
        lambda: kernel_roofline("h100-sxm", "int3", "matmul", 8),
        lambda: kernel_roofline("h100-sxm", "bf16", "matmul", 0),
        lambda: kernel_roofline("t4", "bf16", "matmul", 8),
    ],
)
def test_kernel_roofline_rejects_bad_input(call) -> None:
    with pytest.raises(ValueError):
        call()


def _fake_cache(root: Path, index: int, level: str, kind: str, size: str) -> None:
    folder = root / f"index{index}"
    folder.mkdir(parents=True)
    for name, text in (("level", level), ("type", kind), ("size", size)):
        (folder / name).write_text(text + "\n")


def test_cpu_caches_reads_a_sysfs_tree(tmp_path: Path) -> None:
    _fake_cache(tmp_path, 0, "1", "Data", "48K")
    _fake_cache(tmp_path, 1, "1", "Instruction", "32K")  # instruction caches are not data caches
    _fake_cache(tmp_path, 2, "2", "Unified", "2048K")
    _fake_cache(tmp_path, 3, "3", "Unified", "36M")
    caches = cpu_caches(tmp_path)
    assert caches == CpuCaches(l1d_bytes=48 * 1024, l2_bytes=2 * 2**20, l3_bytes=36 * 2**20)
    assert list(caches.tiers()) == ["L1d", "L2", "L3"]


def test_cpu_caches_unknown_levels_are_none(tmp_path: Path) -> None:
    _fake_cache(tmp_path, 0, "1", "Data", "32K")
    _fake_cache(tmp_path, 1, "2", "Unified", "")  # an empty size: unknown, not zero
    (tmp_path / "index2").mkdir()  # no files at all: skipped
    assert cpu_caches(tmp_path) == CpuCaches(l1d_bytes=32 * 1024, l2_bytes=None, l3_bytes=None)
    assert cpu_caches(tmp_path / "missing") == CpuCaches(None, None, None)  # no sysfs (macOS, Windows)
    assert CpuCaches(None, None, None).tiers() == {}


@pytest.mark.parametrize(("text", "size"), [("32K", 32768), ("1024K\n", 2**20), ("32M", 2**25), ("1G", 2**30),
                                            ("512", 512), ("", None), ("0K", None), ("big", None)])
def test_cache_size_bytes_parses_sysfs_units(text: str, size: int | None) -> None:
    assert _cache_size_bytes(text) == size


def test_cpu_caches_of_this_machine_grow_with_level() -> None:
    sizes = list(cpu_caches().tiers().values())
    assert sizes == sorted(sizes)  # possibly empty (no sysfs), never out of order


def test_working_set_sizes_are_geometric() -> None:
    assert working_set_sizes(1024, 8192) == [1024, 2048, 4096, 8192]
    assert working_set_sizes(4096, 2**20, step=8) == [4096, 32768, 262144]
    with pytest.raises(ValueError):
        working_set_sizes(0, 8)


@pytest.mark.parametrize("op", ["read", "copy"])
def test_measure_bandwidth_counts_bytes_per_call(op: str) -> None:
    point = measure_bandwidth(4096, op, "cpu", bytes_per_call=2**20, min_run_time_s=0.01, num_threads=1)
    assert point.op == op and point.working_set_bytes == 4096
    # read: the 4 KiB buffer is summed 2**20 / 4096 = 256 times per call; copy: 2 KiB read + 2 KiB written
    assert point.bytes_per_call == (2**20 if op == "read" else 4096)
    assert 0 < point.best_s <= point.median_s
    assert point.best_bytes_per_s == point.bytes_per_call / point.best_s


def test_measure_bandwidth_read_repeats_without_copying() -> None:
    # a working set that doesn't divide bytes_per_call: ceil(1000 / 24) = 42 repetitions of 24 bytes
    assert measure_bandwidth(24, "read", "cpu", bytes_per_call=1000, min_run_time_s=0.01).bytes_per_call == 42 * 24


def test_measure_bandwidth_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="unknown op"):
        measure_bandwidth(4096, "write", "cpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="multiple of 8"):
        measure_bandwidth(12, "read", "cpu")
    with pytest.raises(ValueError, match="min_run_time_s"):
        measure_bandwidth(4096, "read", "cpu", min_run_time_s=0.0)


def test_bandwidth_sweep_sorts_sizes() -> None:
    points = bandwidth_sweep([8192, 1024], "read", "cpu", min_run_time_s=0.01, num_threads=1)
    assert [p.working_set_bytes for p in points] == [1024, 8192]


def _point(working_set_bytes: int, bytes_per_s: float) -> BandwidthPoint:
    return BandwidthPoint("read", working_set_bytes, 10**9, 10**9 / bytes_per_s, 10**9 / bytes_per_s)


def test_tier_bandwidths_takes_the_best_of_each_tier() -> None:
    points = [_point(1024, 100e9), _point(4096, 150e9), _point(16384, 80e9), _point(2**20, 60e9),
              _point(2**22, 20e9), _point(2**23, 25e9)]
    tiers = {"L2": 2**15, "L1d": 2**12}  # any order: sorted by size
    # L1d: 1 KiB and 4 KiB; L2: 16 KiB; beyond 32 KiB: only sizes >= 4 × 32 KiB count as memory
    assert tier_bandwidths(points, tiers) == {"L1d": 150e9, "L2": 80e9, "DRAM": 60e9}
    assert tier_bandwidths(points, {}, memory_name="HBM") == {"HBM": 25e9}  # no caches known: the largest size
    assert tier_bandwidths([], {"L1d": 4096}) == {}


def test_tier_bandwidths_takes_memory_from_where_the_sweep_reached_it() -> None:
    # sysfs says L3 = 300 MiB (the whole socket's, shared), but the curve is flat from 64 MiB on
    points = [_point(2**15, 150e9), _point(2**20, 60e9), _point(2**24, 30e9), _point(2**26, 12e9),
              _point(2**27, 11e9), _point(2**28, 11.5e9)]
    tiers = {"L1d": 48 * 2**10, "L2": 2**21, "L3": 300 * 2**20}
    assert tier_bandwidths(points, tiers) == {"L1d": 150e9, "L2": 60e9, "L3": 30e9}  # 4 × L3 never reached: no DRAM
    assert memory_plateau_bytes(points) == 2**26
    assert tier_bandwidths(points, tiers, memory_from_bytes=2**26) == {
        "L1d": 150e9, "L2": 60e9, "L3": 30e9, "DRAM": 12e9}  # L3 keeps only the sizes below the plateau


def test_memory_plateau_bytes_walks_back_from_the_largest_size() -> None:
    assert memory_plateau_bytes([_point(2**20, 100e9)]) == 2**20  # one point: all we know
    steps = [_point(2**20, 100e9), _point(2**22, 40e9), _point(2**24, 10e9), _point(2**26, 9e9)]
    assert memory_plateau_bytes(steps) == 2**24  # 10 is within 25 % of 9; 40 is not
    assert memory_plateau_bytes(steps, tolerance=5.0) == 2**22  # 40 <= 6 × 9
    assert memory_plateau_bytes(list(reversed(steps))) == 2**24  # any order
    dip = [_point(2**20, 100e9), _point(2**22, 5e9), _point(2**24, 10e9)]  # a slower point is on the plateau too
    assert memory_plateau_bytes(dip) == 2**22
    with pytest.raises(ValueError):
        memory_plateau_bytes([])
    with pytest.raises(ValueError):
        memory_plateau_bytes(steps, tolerance=0.0)


def test_gpu_l2_bytes_is_none_without_cuda() -> None:
    if torch.cuda.is_available():
        size = gpu_l2_bytes()
        assert size is None or size > 2**20
    else:
        assert gpu_l2_bytes() is None


@needs_cuda
def test_measure_bandwidth_cuda_read_beyond_l2_below_datasheet() -> None:
    key = gpu_key(torch.cuda.get_device_name())
    if key is None:
        pytest.skip(f"no datasheet bandwidth for {torch.cuda.get_device_name()}")
    point = measure_bandwidth(2**30, "read", "cuda", min_run_time_s=0.2)  # 1 GiB: far beyond any L2
    assert 0 < point.best_bytes_per_s <= 1.05 * peak_bytes_per_s(key)

