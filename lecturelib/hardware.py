"""Hardware: device detection, datasheet peaks per (device, dtype), measured peaks, and the roofline."""

from __future__ import annotations

import contextlib
import glob
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import torch

from lecturelib.flops import matmul_flops
from lecturelib.profiler import benchmark


def detect_device() -> str:
    """The best device torch can use here: "cuda", "mps" or "cpu"."""
    if torch.cuda.is_available():
        return "cuda"
    if torch.backends.mps.is_available():
        return "mps"
    return "cpu"


@dataclass(frozen=True)
class Peak:
    """A datasheet peak rate with its source."""

    value: float  # FLOP/s in PEAKS, bytes/s in MEMORY_BANDWIDTH
    source: str  # the datasheet it comes from


# Datasheets. NVIDIA marks tensor-core figures "with sparsity" (2:4 structured sparsity); every figure
# below is dense, i.e. half of the marked figure. fp32 is the non-tensor-core (CUDA core) rate.
_H100 = "https://www.nvidia.com/en-us/data-center/h100/"  # the product page lists H100 SXM and H100 NVL
# The product page and the current H100 datasheet no longer list the PCIe card; its figures are in NVIDIA's
# "H100 PCIe GPU Product Brief", PB-11133-001_v02 (November 2022), table of specifications.
_H100_PCIE = "https://www.nvidia.com/content/dam/en-zz/Solutions/gtcs22/data-center/h100/PB-11133-001_v01.pdf"
_H200 = "https://www.nvidia.com/en-us/data-center/h200/"
_A100 = "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf"
_L4 = "https://www.nvidia.com/en-us/data-center/l4/"
_T4 = "https://www.nvidia.com/en-us/data-center/tesla-t4/"

# Peak FLOP/s keyed by (device key, dtype). A missing key means no tensor-core support for that dtype
# (the T4, Turing, has fp16 tensor cores but none for bf16 or tf32).
PEAKS: dict[tuple[str, str], Peak] = {
    # H100 SXM5: fp32 67 TF; tf32 989*, bf16 1,979*, fp16 1,979*, fp8 3,958* TF (* with sparsity)
    ("h100-sxm", "fp32"): Peak(67e12, _H100),
    ("h100-sxm", "tf32"): Peak(989e12 / 2, _H100),
    ("h100-sxm", "bf16"): Peak(1979e12 / 2, _H100),
    ("h100-sxm", "fp16"): Peak(1979e12 / 2, _H100),
    ("h100-sxm", "fp8"): Peak(3958e12 / 2, _H100),
    # H100 PCIe (80 GB HBM2e): fp32 51 TF; tf32 756*, bf16 1,513*, fp16 1,513*, fp8 3,026* TF
    ("h100-pcie", "fp32"): Peak(51e12, _H100_PCIE),
    ("h100-pcie", "tf32"): Peak(756e12 / 2, _H100_PCIE),
    ("h100-pcie", "bf16"): Peak(1513e12 / 2, _H100_PCIE),
    ("h100-pcie", "fp16"): Peak(1513e12 / 2, _H100_PCIE),
    ("h100-pcie", "fp8"): Peak(3026e12 / 2, _H100_PCIE),
    # H200 SXM: same compute as the H100 SXM; more and faster memory
    ("h200", "fp32"): Peak(67e12, _H200),
    ("h200", "tf32"): Peak(989e12 / 2, _H200),
    ("h200", "bf16"): Peak(1979e12 / 2, _H200),
    ("h200", "fp16"): Peak(1979e12 / 2, _H200),
    ("h200", "fp8"): Peak(3958e12 / 2, _H200),
    # A100 SXM4 80GB: fp32 19.5 TF; tf32 156 (312*), bf16 312 (624*), fp16 312 (624*) TF
    ("a100-sxm-80gb", "fp32"): Peak(19.5e12, _A100),
    ("a100-sxm-80gb", "tf32"): Peak(156e12, _A100),
    ("a100-sxm-80gb", "bf16"): Peak(312e12, _A100),
    ("a100-sxm-80gb", "fp16"): Peak(312e12, _A100),
    # L4: fp32 30.3 TF; tf32 120*, bf16 242*, fp16 242*, fp8 485* TF
    ("l4", "fp32"): Peak(30.3e12, _L4),
    ("l4", "tf32"): Peak(120e12 / 2, _L4),
    ("l4", "bf16"): Peak(242e12 / 2, _L4),
    ("l4", "fp16"): Peak(242e12 / 2, _L4),
    ("l4", "fp8"): Peak(485e12 / 2, _L4),
    # T4: fp32 8.1 TF; "mixed precision (FP16/FP32)" tensor cores 65 TF (Turing has no sparsity)
    ("t4", "fp32"): Peak(8.1e12, _T4),
    ("t4", "fp16"): Peak(65e12, _T4),
}

# Peak memory (DRAM) bandwidth in bytes/s per device key.
MEMORY_BANDWIDTH: dict[str, Peak] = {
    "h100-sxm": Peak(3.35e12, _H100),  # 80 GB HBM3, 3.35 TB/s
    "h100-pcie": Peak(2.0e12, _H100_PCIE),  # 80 GB HBM2e, 2 TB/s
    "h200": Peak(4.8e12, _H200),  # 141 GB HBM3e, 4.8 TB/s
    "a100-sxm-80gb": Peak(2039e9, _A100),  # 80 GB HBM2e, 2,039 GB/s
    "l4": Peak(300e9, _L4),  # 24 GB GDDR6, 300 GB/s
    "t4": Peak(320e9, _T4),  # 16 GB GDDR6, 320 GB/s
}

# torch.cuda.get_device_name() → device key. Exact names only: variants with other clocks or memory
# (A100 40GB, A100 PCIe, H100 NVL, H200 NVL, GH200) have other peaks and map to None.
GPU_NAMES: dict[str, str] = {
    "NVIDIA H100 80GB HBM3": "h100-sxm",
    "NVIDIA H100 PCIe": "h100-pcie",
    "NVIDIA H200": "h200",
    "NVIDIA A100-SXM4-80GB": "a100-sxm-80gb",
    "NVIDIA L4": "l4",
    "Tesla T4": "t4",
}


def gpu_key(torch_device_name: str) -> str | None:
    """The PEAKS device key for a torch.cuda.get_device_name() string, or None if not in the table."""
    return GPU_NAMES.get(torch_device_name.strip())


def peak_flop_per_s(device_key: str, dtype: str) -> float:
    """Datasheet dense peak FLOP/s of `device_key` in `dtype`."""
    try:
        return PEAKS[(device_key, dtype)].value
    except KeyError:
        known = sorted({key for key, _ in PEAKS})
        if device_key not in known:
            raise ValueError(f"unknown device {device_key!r}; known devices: {', '.join(known)}") from None
        dtypes = [d for key, d in PEAKS if key == device_key]
        raise ValueError(f"no {dtype!r} peak for {device_key}; it has: {', '.join(dtypes)}") from None


def peak_bytes_per_s(device_key: str) -> float:
    """Datasheet peak memory bandwidth of `device_key` in bytes/s."""
    try:
        return MEMORY_BANDWIDTH[device_key].value
    except KeyError:
        raise ValueError(f"unknown device {device_key!r}; known: {', '.join(MEMORY_BANDWIDTH)}") from None


_TORCH_DTYPES: dict[str, torch.dtype] = {
    "fp32": torch.float32,
    "tf32": torch.float32,  # stored as fp32; the matmul runs on tf32 tensor cores (CUDA only)
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
}


@contextlib.contextmanager
def _cuda_matmul_precision(precision: str) -> Iterator[None]:
    """Set torch.backends.cuda.matmul.fp32_precision ("tf32" or "ieee") inside the block."""
    previous = torch.backends.cuda.matmul.fp32_precision
    torch.backends.cuda.matmul.fp32_precision = precision
    try:
        yield
    finally:
        torch.backends.cuda.matmul.fp32_precision = previous


def measure_matmul_flop_per_s(
    n: int, dtype: str = "fp32", device: str | None = None, *, min_run_time_s: float = 0.2
) -> float:
    """Measured FLOP/s of an (n, n) @ (n, n) matmul: 2n³ FLOPs over the median time."""
    if n <= 0:
        raise ValueError(f"n must be positive, got {n}")
    if dtype not in _TORCH_DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(_TORCH_DTYPES)}")
    device = device or detect_device()
    if dtype == "tf32" and torch.device(device).type != "cuda":
        raise ValueError("tf32 is a CUDA tensor-core mode; measure fp32 on this device instead")
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=generator).to(device=device, dtype=_TORCH_DTYPES[dtype])
    b = torch.randn(n, n, generator=generator).to(device=device, dtype=_TORCH_DTYPES[dtype])
    precision = "tf32" if dtype == "tf32" else "ieee"
    with _cuda_matmul_precision(precision) if torch.device(device).type == "cuda" else contextlib.nullcontext():
        timing = benchmark(lambda: a @ b, min_run_time_s=min_run_time_s)
    return matmul_flops(n, n, n) / timing.median_s


def measure_copy_bytes_per_s(n_bytes: int, device: str | None = None, *, min_run_time_s: float = 0.2) -> float:
    """Measured bandwidth of dst.copy_(src) on one device: 2·n_bytes moved (read + write) per copy."""
    # The STREAM convention (McCalpin 1995): a copy of n bytes reads n and writes n. Use n_bytes well
    # above the last-level cache (CPU: tens of MB; GPU L2: 50 MB) or the cache is measured instead.
    if n_bytes <= 0:
        raise ValueError(f"n_bytes must be positive, got {n_bytes}")
    device = device or detect_device()
    src = torch.ones(n_bytes, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    timing = benchmark(lambda: dst.copy_(src), min_run_time_s=min_run_time_s)
    return 2 * n_bytes / timing.median_s


@dataclass(frozen=True)
class Roofline:
    """Where a kernel sits on the roofline (Williams, Waterman and Patterson 2009)."""

    arithmetic_intensity_flop_per_byte: float  # FLOPs per byte moved to or from memory
    ridge_flop_per_byte: float  # intensity at which the two roofs meet: peak FLOP/s / bandwidth
    attainable_flop_per_s: float  # min(peak FLOP/s, intensity · bandwidth)
    bound: Literal["memory", "compute"]  # which roof limits it
    time_s: float  # lower bound on the kernel's time: max(FLOPs / peak, bytes / bandwidth)
    peak_flop_per_s: float  # the compute roof
    peak_bytes_per_s: float  # the slope of the memory roof


def _check_rates(peak_flop_per_s: float, peak_bytes_per_s: float) -> None:
    for name, rate in (("peak_flop_per_s", peak_flop_per_s), ("peak_bytes_per_s", peak_bytes_per_s)):
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"{name} must be positive and finite, got {rate}")


def arithmetic_intensity(flops: int, n_bytes: int) -> float:
    """FLOPs per byte moved."""
    if n_bytes <= 0:
        raise ValueError(f"n_bytes must be positive, got {n_bytes}")
    if flops < 0:
        raise ValueError(f"flops must be non-negative, got {flops}")
    return flops / n_bytes


def ridge_point(peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """The intensity (FLOP/byte) where the memory roof meets the compute roof: peak / bandwidth."""
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    return peak_flop_per_s / peak_bytes_per_s


def attainable_flop_per_s(intensity: float, peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """The roofline: min(peak FLOP/s, intensity · bandwidth)."""
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    if not intensity >= 0:
        raise ValueError(f"intensity must be non-negative, got {intensity}")
    return min(peak_flop_per_s, intensity * peak_bytes_per_s)


def roofline_time_s(flops: int, n_bytes: int, peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """Lower bound on a kernel's time: max(FLOPs / peak, bytes / bandwidth) (compute and traffic overlap)."""
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    if flops < 0 or n_bytes < 0:
        raise ValueError(f"flops and n_bytes must be non-negative, got {flops} and {n_bytes}")
    return max(flops / peak_flop_per_s, n_bytes / peak_bytes_per_s)


def roofline(flops: int, n_bytes: int, *, peak_flop_per_s: float, peak_bytes_per_s: float) -> Roofline:
    """The roofline of a kernel doing `flops` FLOPs over `n_bytes` of memory traffic."""
    intensity = arithmetic_intensity(flops, n_bytes)
    ridge = ridge_point(peak_flop_per_s, peak_bytes_per_s)
    return Roofline(
        arithmetic_intensity_flop_per_byte=intensity,
        ridge_flop_per_byte=ridge,
        attainable_flop_per_s=attainable_flop_per_s(intensity, peak_flop_per_s, peak_bytes_per_s),
        # at the ridge point both roofs are equal; call it compute-bound
        bound="memory" if intensity < ridge else "compute",
        time_s=roofline_time_s(flops, n_bytes, peak_flop_per_s, peak_bytes_per_s),
        peak_flop_per_s=peak_flop_per_s,
        peak_bytes_per_s=peak_bytes_per_s,
    )


# ---------------------------------------------------------------------------------------------
# CPU: the vector units of one core, and its clock (Linux /proc/cpuinfo and sysfs)


@dataclass(frozen=True)
class CpuVectorUnits:
    """What one core can issue per cycle, read off its instruction-set flags: a ceiling, not a prediction."""

    isa: str  # the widest floating-point vector extension found: "AVX-512", "AVX2+FMA", "AVX", "SSE2", "NEON"
    vector_bits: int  # width of one vector register
    fma: bool  # fused multiply-add instructions (2 FLOPs each) or separate multiply and add
    units: int  # vector FMA (or multiply + add) pipes per core assumed: the most cores of this ISA have
    flop_per_cycle_fp32: int  # units × (vector_bits / 32 lanes) × 2 FLOPs


# (flag, ISA, vector bits, fused multiply-add, pipes): the first flag present wins. Pipes: x86 cores with AVX2
# have two 256-bit FMA units; AVX-512 cores have two 512-bit units at most (some have one, and AMD Zen 4
# runs a 512-bit FMA as two halves on 256-bit units), so 2 × 16 lanes × 2 = 64 FLOP/cycle is a ceiling that
# such a core may reach or halve. Sources: Intel 64 and IA-32 Architectures Optimization Reference Manual;
# AMD Software Optimization Guide for the Zen 4 microarchitecture. aarch64: 128-bit NEON, 2 pipes assumed.
_VECTOR_FLAGS: tuple[tuple[str, str, int, bool, int], ...] = (
    ("avx512f", "AVX-512", 512, True, 2),
    ("fma", "AVX2+FMA", 256, True, 2),
    ("avx", "AVX", 256, False, 2),  # no FMA: one multiply pipe and one add pipe, 8 lanes each
    ("sse2", "SSE2", 128, False, 2),
    ("asimd", "NEON", 128, True, 2),
)


def cpu_vector_units(cpuinfo: str | None = None) -> CpuVectorUnits | None:
    """The vector units of this CPU from the flags in /proc/cpuinfo (or `cpuinfo` text); None where unknown."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
                cpuinfo = file.read()
        except OSError:
            return None
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 / aarch64
            flags.update(value.split())
            break
    for flag, isa, bits, fma, units in _VECTOR_FLAGS:
        if flag in flags:
            # an FMA is 2 FLOPs per lane; without FMA the multiply pipe and the add pipe do 1 each
            per_lane = 2 if fma else 1
            return CpuVectorUnits(isa, bits, fma, units, units * (bits // 32) * per_lane)
    return None


def cpu_clock_hz(sysfs: str = "/sys/devices/system/cpu", cpuinfo: str | None = None) -> tuple[float, str] | None:
    """The highest clock this CPU reports, and where it was read; None where neither source exists."""
    # cpufreq's cpuinfo_max_freq is the boost clock (kHz); virtual machines often have no cpufreq and report
    # only the nominal clock in /proc/cpuinfo's "cpu MHz", below what the core reaches under boost.
    freqs = []
    for path in glob.glob(os.path.join(sysfs, "cpu[0-9]*", "cpufreq", "cpuinfo_max_freq")):
        try:
            with open(path, encoding="ascii") as file:
                freqs.append(int(file.read().strip()) * 1e3)
        except (OSError, ValueError):
            continue
    if freqs:
        return max(freqs), "cpufreq cpuinfo_max_freq (the boost clock)"
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
                cpuinfo = file.read()
        except OSError:
            return None
    mhz = [float(v) for k, _, v in (ln.partition(":") for ln in cpuinfo.splitlines()) if k.strip() == "cpu MHz"]
    return (max(mhz) * 1e6, "/proc/cpuinfo cpu MHz (the clock reported now; boost may be higher)") if mhz else None


# ---------------------------------------------------------------------------------------------
# GPU: streaming multiprocessors, L2, and how a matmul's output tiles fill them


# SMs and L2 cache per device key. H100 SXM5 132 SMs, H100 PCIe 114 SMs, both 50 MB of L2 (NVIDIA H100
# PCIe product brief, and the Hopper architecture whitepaper's comparison tables:
# https://resources.nvidia.com/en-us-tensor-core/gtc22-whitepaper-hopper); A100 108 SMs and 40 MB of L2
# (NVIDIA Ampere GA100 whitepaper: https://images.nvidia.com/aem-dam/en-zz/Solutions/data-center/nvidia-ampere-architecture-whitepaper.pdf).
# Other devices: read torch.cuda.get_device_properties() on the GPU itself.
GPU_SMS: dict[str, int] = {"h100-sxm": 132, "h100-pcie": 114, "a100-sxm-80gb": 108}
GPU_L2_BYTES: dict[str, int] = {"h100-sxm": 50 * 2**20, "h100-pcie": 50 * 2**20, "a100-sxm-80gb": 40 * 2**20}


def gemm_tiles(m: int, n: int, tile_m: int = 128, tile_n: int = 128) -> int:
    """Output tiles of an (m, n) result cut into tile_m × tile_n blocks, each computed by one thread block."""
    if min(m, n, tile_m, tile_n) <= 0:
        raise ValueError(f"sizes must be positive, got m={m}, n={n}, tile {tile_m}x{tile_n}")
    return math.ceil(m / tile_m) * math.ceil(n / tile_n)


def tile_efficiency(m: int, n: int, tile_m: int = 128, tile_n: int = 128) -> float:
    """Share of the tiles' work that is useful: partial tiles at the edges waste the rest (tile quantization)."""
    return m * n / (gemm_tiles(m, n, tile_m, tile_n) * tile_m * tile_n)


def wave_efficiency(tiles: int, n_sms: int) -> float:
    """Share of SM-slots busy when `tiles` run one per SM in waves: a last partial wave idles the rest (wave quantization)."""
    if tiles <= 0 or n_sms <= 0:
        raise ValueError(f"tiles and n_sms must be positive, got {tiles} and {n_sms}")
    return tiles / (math.ceil(tiles / n_sms) * n_sms)
