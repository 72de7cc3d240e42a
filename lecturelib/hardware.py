"""Hardware: device detection, datasheet peaks per (device, dtype), measured peaks, and the roofline."""

from __future__ import annotations

import contextlib
import glob
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch

from lecturelib.flops import matmul_flops
from lecturelib.profiler import benchmark, time_each_call


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
# "H100 PCIe GPU Product Brief", PB-11133-001_v01 (September 2022), the version linked here, table of
# specifications (its v02 of November 2022 changed only the document template, by its own history table).
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


def cpu_flags(cpuinfo: str | None = None) -> frozenset[str] | None:
    """The instruction-set flags of this CPU from /proc/cpuinfo (or `cpuinfo` text); None where there is none."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
                cpuinfo = file.read()
        except OSError:
            return None
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):  # x86 / aarch64
            return frozenset(value.split())
    return None


def _cpuinfo_field(cpuinfo: str, name: str) -> str | None:
    """The first value of a /proc/cpuinfo field ("vendor_id", "cpu family"), or None."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == name:
            return value.strip()
    return None


def cpu_vector_units(cpuinfo: str | None = None) -> CpuVectorUnits | None:
    """The vector units of this CPU from the flags in /proc/cpuinfo (or `cpuinfo` text); None where unknown."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as file:
                cpuinfo = file.read()
        except OSError:
            return None
    flags = cpu_flags(cpuinfo) or frozenset()
    # AMD Zen 4 (family 25 = 0x19 with AVX-512) runs each 512-bit FMA as two halves on its 256-bit pipes: the
    # datapath, not the register, sets the rate (AMD Software Optimization Guide for Family 19h, section 2.11).
    zen4 = _cpuinfo_field(cpuinfo, "vendor_id") == "AuthenticAMD" and _cpuinfo_field(cpuinfo, "cpu family") == "25"
    for flag, isa, bits, fma, units in _VECTOR_FLAGS:
        if flag in flags:
            # an FMA is 2 FLOPs per lane; without FMA the multiply pipe and the add pipe do 1 each
            per_lane = 2 if fma else 1
            datapath = 256 if zen4 and bits == 512 else bits
            return CpuVectorUnits(isa, bits, fma, units, units * (datapath // 32) * per_lane)
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


# ---------------------------------------------------------------------------------------------
# Bytes moved: the other axis of the roofline (notebook 01)


def elementwise_bytes(n: int, n_inputs: int, element_bytes: int) -> int:
    """Minimum bytes of an elementwise op over n elements: n_inputs arrays read once, one array written."""
    # a + b in fp32: (2 + 1) · n · 4 bytes; caches can't help, since every element is touched once
    return (n_inputs + 1) * n * element_bytes


def matmul_bytes(m: int, k: int, n: int, element_bytes: int) -> int:
    """Minimum bytes of (m, k) @ (k, n): A and B read once, C written once (perfect reuse on chip)."""
    return (m * k + k * n + m * n) * element_bytes


def decode_seconds_per_token(n_params: int, element_bytes: int, bytes_per_s: float) -> float:
    """Lower bound on batch-1 decoding time per token: every weight read once from memory."""
    # memory-bound: a GEMV does 2 FLOPs per weight it reads, far below any ridge point; KV cache ignored
    return n_params * element_bytes / bytes_per_s


# bytes per stored element of the PEAKS dtypes (tf32 is stored as fp32)
_STORAGE_BYTES: dict[str, int] = {"fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
GEMV_D_MODEL = 4096  # Llama-2-7B's d_model: the (d, d) weight of the explorer's batched GEMV


def kernel_roofline(device_key: str, dtype: str, kernel: str, size: int, *, d_model: int = GEMV_D_MODEL) -> Roofline:
    """Datasheet roofline of a square matmul (size = n) or a batched GEMV (b, d) @ (d, d) (size = b)."""
    if size <= 0:
        raise ValueError(f"size must be positive, got {size}")
    element_bytes = _STORAGE_BYTES.get(dtype)
    if element_bytes is None:
        raise ValueError(f"unknown dtype {dtype!r}; known: {', '.join(_STORAGE_BYTES)}")
    if kernel == "matmul":
        m, k, n = size, size, size  # (n, n) @ (n, n): intensity 2n / (3 · bytes)
    elif kernel == "gemv":
        m, k, n = size, d_model, d_model  # b tokens through one (d, d) layer: intensity ≈ 2b / bytes for b ≪ d
    else:
        raise ValueError(f"unknown kernel {kernel!r}; known: matmul, gemv")
    return roofline(
        matmul_flops(m, k, n),
        matmul_bytes(m, k, n, element_bytes),
        peak_flop_per_s=peak_flop_per_s(device_key, dtype),
        peak_bytes_per_s=peak_bytes_per_s(device_key),
    )



# ---------------------------------------------------------------------------------------------
# This machine's memory hierarchy: cache sizes from Linux sysfs and a working-set bandwidth sweep

SYSFS_CPU0_CACHE = "/sys/devices/system/cpu/cpu0/cache"  # index0..N/{level,type,size}, Linux only
_SIZE_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}  # sysfs writes "32K", "1024K", "32768K"


@dataclass(frozen=True)
class CpuCaches:
    """Data-cache sizes of one core's view of the CPU, in bytes; None where unknown."""

    l1d_bytes: int | None  # level-1 data cache of one core
    l2_bytes: int | None  # level-2 cache (per core on current x86)
    l3_bytes: int | None  # level-3 cache shared by the core's group (the last level on most CPUs)

    def tiers(self) -> dict[str, int]:
        """The known caches, smallest first: {"L1d": bytes, "L2": bytes, "L3": bytes}."""
        named = {"L1d": self.l1d_bytes, "L2": self.l2_bytes, "L3": self.l3_bytes}
        return {name: size for name, size in named.items() if size is not None}


def _cache_size_bytes(text: str) -> int | None:
    """A sysfs cache size ("32K", "1024K", "32M" or plain bytes) in bytes; None if unreadable."""
    text = text.strip()
    unit = _SIZE_UNITS.get(text[-1:].upper(), 1)
    digits = text[:-1] if unit != 1 else text
    return int(digits) * unit if digits.isdigit() and int(digits) > 0 else None


def cpu_caches(root: str | os.PathLike[str] = SYSFS_CPU0_CACHE) -> CpuCaches:
    """L1d, L2 and L3 sizes of CPU 0 from Linux sysfs (what `lscpu` reads); None where unknown."""
    found: dict[int, int] = {}
    for index in sorted(Path(root).glob("index*")):  # no such folder (macOS, Windows): nothing found
        try:
            level = int((index / "level").read_text().strip())
            kind = (index / "type").read_text().strip()  # "Data", "Instruction" or "Unified"
            size = _cache_size_bytes((index / "size").read_text())
        except (OSError, ValueError):
            continue
        if kind in ("Data", "Unified") and size is not None:
            found.setdefault(level, size)
    return CpuCaches(found.get(1), found.get(2), found.get(3))


def gpu_l2_bytes(device: int = 0) -> int | None:
    """L2 cache size of a CUDA device in bytes (H100 SXM: 50 MiB); None without CUDA."""
    if not torch.cuda.is_available():
        return None
    size = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)
    return int(size) if size else None


Op = Literal["read", "copy"]


@dataclass(frozen=True)
class BandwidthPoint:
    """One size of a bandwidth sweep: what a call moved and how long it took."""

    op: str  # "read" (a sum: loads only) or "copy" (loads and stores)
    working_set_bytes: int  # bytes the op keeps touching: the buffer (read), source + destination (copy)
    bytes_per_call: int  # bytes moved by one timed call, repetitions included (copy: read + write)
    best_s: float  # fastest timed call, seconds: the least disturbed by other processes
    median_s: float  # median over the timed calls, seconds

    @property
    def best_bytes_per_s(self) -> float:
        """Bandwidth of the fastest call."""
        return self.bytes_per_call / self.best_s

    @property
    def median_bytes_per_s(self) -> float:
        """Bandwidth of the median call."""
        return self.bytes_per_call / self.median_s


def working_set_sizes(lo_bytes: int, hi_bytes: int, step: int = 2) -> list[int]:
    """Sizes lo, lo·step, lo·step², ... up to hi (inclusive): a geometric sweep."""
    if lo_bytes <= 0 or hi_bytes < lo_bytes or step < 2:
        raise ValueError(f"need 0 < lo <= hi and step >= 2, got {lo_bytes}, {hi_bytes}, {step}")
    sizes = [lo_bytes]
    while sizes[-1] * step <= hi_bytes:
        sizes.append(sizes[-1] * step)
    return sizes


def measure_bandwidth(
    working_set_bytes: int,
    op: Op = "read",
    device: str | None = None,
    *,
    bytes_per_call: int | None = None,
    min_run_time_s: float = 0.05,
    num_threads: int | None = None,
) -> BandwidthPoint:
    """Bytes/s of streaming over a working set of a given size, repeated so that small sets time reliably."""
    # read: the working set is one fp32 buffer x of n elements. x.expand(R, n) is a view that repeats
    # x R times without copying it (row stride 0), so one torch.sum(..., dim=1) kernel reads the same
    # n elements R times: the working set stays in whatever cache holds it, and one call moves
    # R · working_set bytes, enough to dwarf the per-call overhead (µs) even for a 1 KiB buffer.
    # copy: dst.copy_(src), the STREAM convention: 2 · n bytes per call (read + write), working set
    # src + dst. There is no way to repeat a copy inside one kernel, so small copies measure the
    # per-call overhead, not the cache.
    if working_set_bytes < 8 or working_set_bytes % 8:
        raise ValueError(f"working_set_bytes must be a positive multiple of 8, got {working_set_bytes}")
    if min_run_time_s <= 0:
        raise ValueError(f"min_run_time_s must be positive, got {min_run_time_s}")
    device = device or detect_device()
    if bytes_per_call is None:  # GPU: more per call, a kernel launch costs ~5 µs and HBM moves 3 TB/s
        bytes_per_call = 2**30 if torch.device(device).type == "cuda" else 2**25
    if op == "read":
        n = working_set_bytes // 4
        x = torch.ones(n, device=device)  # ones, not empty: untouched pages would all map one zero page
        repeats = max(1, -(-bytes_per_call // working_set_bytes))  # ceil
        rows = x.expand(repeats, n)  # (R, n), strides (0, 1): R views of the same buffer
        out = torch.empty(repeats, device=device)

        def fn() -> object:
            return torch.sum(rows, dim=1, out=out)

        moved = repeats * working_set_bytes
    elif op == "copy":
        n = working_set_bytes // 8  # src and dst: n fp32 elements each
        src = torch.ones(n, device=device)
        dst = torch.zeros(n, device=device)

        def fn() -> object:
            return dst.copy_(src)

        moved = 2 * 4 * n
    else:
        raise ValueError(f"unknown op {op!r}; known: read, copy")
    times = time_each_call(fn, min_run_time_s=min_run_time_s, num_threads=num_threads)
    return BandwidthPoint(op, working_set_bytes, moved, times.best_s, times.median_s)


def bandwidth_sweep(
    sizes_bytes: list[int],
    op: Op = "read",
    device: str | None = None,
    *,
    min_run_time_s: float = 0.05,
    num_threads: int | None = None,
) -> list[BandwidthPoint]:
    """measure_bandwidth at each working-set size, smallest first."""
    return [
        measure_bandwidth(size, op, device, min_run_time_s=min_run_time_s, num_threads=num_threads)
        for size in sorted(sizes_bytes)
    ]


def tier_bandwidths(
    points: list[BandwidthPoint],
    tiers: dict[str, int],
    memory_name: str = "DRAM",
    *,
    memory_from_bytes: int | None = None,
) -> dict[str, float]:
    """Best bandwidth seen in each tier: sizes that fit a cache but not the one before it, then memory."""
    # memory: working sets from memory_from_bytes up (where the sweep itself reached memory, see
    # memory_plateau_bytes); without it, sizes of at least 4x the last cache, so that only a sliver can still hit
    # in it. A cache size read from sysfs can be the whole socket's L3, shared with other cores and machines.
    result: dict[str, float] = {}
    below = 0
    limit = memory_from_bytes if memory_from_bytes is not None else math.inf
    for name, size in sorted(tiers.items(), key=lambda item: item[1]):
        inside = [p.best_bytes_per_s for p in points if below < p.working_set_bytes <= size and p.working_set_bytes < limit]
        if inside:
            result[name] = max(inside)
        below = size
    if memory_from_bytes is not None:
        beyond = [p for p in points if p.working_set_bytes >= memory_from_bytes]
    else:
        beyond = [p for p in points if p.working_set_bytes >= 4 * below] if below else points[-1:]
    if beyond:
        result[memory_name] = max(p.best_bytes_per_s for p in beyond)
    return result


def memory_plateau_bytes(points: list[BandwidthPoint], tolerance: float = 0.25) -> int:
    """The smallest working set from which no larger one streams more than (1 + tolerance) x the largest one's rate."""
    # Where the curve has come down to its last plateau: from there on the caches no longer help, whatever sysfs
    # says about their size. With a single point on the plateau (the largest size), that point is all we know.
    if not points:
        raise ValueError("need at least one BandwidthPoint")
    if not tolerance > 0:
        raise ValueError(f"tolerance must be positive, got {tolerance}")
    ordered = sorted(points, key=lambda p: p.working_set_bytes)
    last = ordered[-1].best_bytes_per_s
    start = ordered[-1].working_set_bytes
    for p in reversed(ordered[:-1]):
        if p.best_bytes_per_s > (1 + tolerance) * last:
            break
        start = p.working_set_bytes
    return start
