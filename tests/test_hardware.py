"""Tests of lecturelib.hardware: detection, the datasheet table, measured peaks and the roofline."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lecturelib.hardware import (
    GPU_L2_BYTES,
    GPU_NAMES,
    GPU_SMS,
    MEMORY_BANDWIDTH,
    PEAKS,
    arithmetic_intensity,
    attainable_flop_per_s,
    cpu_clock_hz,
    cpu_vector_units,
    detect_device,
    gemm_tiles,
    gpu_key,
    measure_copy_bytes_per_s,
    measure_matmul_flop_per_s,
    peak_bytes_per_s,
    peak_flop_per_s,
    ridge_point,
    roofline,
    roofline_time_s,
    tile_efficiency,
    wave_efficiency,
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


CPUINFO_ZEN4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu MHz\t\t: 2596.146\nflags\t\t: fpu sse2 avx fma avx2 avx512f avx512bw\n"
CPUINFO_HASWELL = "processor\t: 0\ncpu MHz\t\t: 3400.000\nflags\t\t: fpu sse2 avx fma avx2\n"
CPUINFO_SANDY = "processor\t: 0\nflags\t\t: fpu sse2 avx\n"
CPUINFO_ARM = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes\n"


@pytest.mark.parametrize(
    ("cpuinfo", "isa", "flop_per_cycle"),
    [
        (CPUINFO_ZEN4, "AVX-512", 64),  # 2 units × 16 lanes × 2
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
