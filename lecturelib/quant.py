"""Quantization: affine integer mappings built by hand, their error, an int8 matmul, and the torchao path.

An affine (asymmetric) mapping stores a real x as an integer q with x ≈ scale · (q − zero_point); a symmetric
one fixes zero_point = 0. Rounding is half to even (``torch.round``), as in torchao's ``quantize_affine``.
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import logging
import math
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType

import torch
from torch import nn
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from lecturelib.hardware import cpu_flags  # re-exported: notebook 07 reads the flags from here
from lecturelib.profiler import Timing, benchmark

FLOAT32_EPS = torch.finfo(torch.float32).eps  # the smallest scale MinMaxObserver and torchao allow (2**-23)


def int_range(bits: int, signed: bool = True) -> tuple[int, int]:
    """(qmin, qmax) of a `bits`-bit integer: [−2^(b−1), 2^(b−1) − 1] signed, [0, 2^b − 1] unsigned."""
    if isinstance(bits, bool) or not isinstance(bits, int) or not 1 <= bits <= 32:
        raise ValueError(f"bits must be an int in [1, 32], got {bits!r}")
    if signed:
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def _check_range(qmin: int, qmax: int) -> None:
    if not qmin < qmax:
        raise ValueError(f"need qmin < qmax, got [{qmin}, {qmax}]")


# ---------------------------------------------------------------------------------------------
# Quantization parameters


def affine_qparams(x_min: float, x_max: float, qmin: int, qmax: int) -> tuple[float, int]:
    """(scale, zero_point) mapping [x_min, x_max], widened to include 0, onto the integers [qmin, qmax]."""
    _check_range(qmin, qmax)
    if x_min > x_max:
        raise ValueError(f"need x_min <= x_max, got {x_min} > {x_max}")
    x_min, x_max = min(x_min, 0.0), max(x_max, 0.0)  # 0 must be representable exactly (padding, ReLU zeros)
    scale = max((x_max - x_min) / (qmax - qmin), FLOAT32_EPS)  # real units per integer step
    zero_point = qmin - round(x_min / scale)  # the integer that stands for 0.0; round() is half to even
    return scale, min(max(zero_point, qmin), qmax)


def symmetric_scale(abs_max: float, qmax: int) -> float:
    """Scale of the symmetric mapping of [−abs_max, abs_max] onto [−qmax, qmax] (zero point 0)."""
    if abs_max < 0 or qmax <= 0:
        raise ValueError(f"need abs_max >= 0 and qmax > 0, got {abs_max}, {qmax}")
    return max(abs_max / qmax, FLOAT32_EPS)


def _channel_view(values: torch.Tensor, ndim: int, axis: int) -> torch.Tensor:
    """Per-channel values (C,) reshaped to broadcast along `axis` of an ndim tensor: (1, .., C, .., 1)."""
    shape = [1] * ndim
    shape[axis] = -1
    return values.reshape(shape)


def _min_max_per_channel(w: torch.Tensor, axis: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Min and max over every dim but `axis`: two (C,) tensors."""
    channels = w.movedim(axis, 0).reshape(w.shape[axis], -1)  # (C, everything else)
    return channels.amin(dim=1), channels.amax(dim=1)


def per_channel_qparams(w: torch.Tensor, axis: int, qmin: int, qmax: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One affine (scale, zero_point) per slice along `axis`: float32 scales (C,) and int64 zero points (C,)."""
    _check_range(qmin, qmax)
    axis = axis % w.dim()
    x_min, x_max = _min_max_per_channel(w.detach().double(), axis)
    pairs = [affine_qparams(lo, hi, qmin, qmax) for lo, hi in zip(x_min.tolist(), x_max.tolist())]
    scales = torch.tensor([s for s, _ in pairs], dtype=torch.float32)
    zero_points = torch.tensor([z for _, z in pairs], dtype=torch.int64)
    return scales, zero_points


def symmetric_per_channel_scales(w: torch.Tensor, axis: int, qmax: int) -> torch.Tensor:
    """One symmetric scale per slice along `axis`: its abs-max / qmax, float32 (C,)."""
    x_min, x_max = _min_max_per_channel(w.detach().double(), axis % w.dim())
    abs_max = torch.maximum(-x_min, x_max)
    return (abs_max / qmax).clamp(min=FLOAT32_EPS).float()


# ---------------------------------------------------------------------------------------------
# The mapping and its inverse


def quantize(
    x: torch.Tensor,
    scale: float | torch.Tensor,
    zero_point: int | torch.Tensor,
    qmin: int,
    qmax: int,
) -> torch.Tensor:
    """q = clamp(round(x / scale) + zero_point, qmin, qmax) as int32; round half to even."""
    _check_range(qmin, qmax)
    q = torch.round(x.float() / scale) + zero_point  # (x / scale) stays float32: scale broadcasts
    return q.clamp(qmin, qmax).to(torch.int32)


def dequantize(q: torch.Tensor, scale: float | torch.Tensor, zero_point: int | torch.Tensor) -> torch.Tensor:
    """x̂ = (q − zero_point) · scale, float32."""
    return ((q.to(torch.int32) - zero_point).float() * scale).float()


def quantize_per_channel(
    w: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor, axis: int, qmin: int, qmax: int
) -> torch.Tensor:
    """quantize() with one (scale, zero_point) per slice along `axis`."""
    axis = axis % w.dim()
    return quantize(w, _channel_view(scales, w.dim(), axis), _channel_view(zero_points, w.dim(), axis), qmin, qmax)


def dequantize_per_channel(q: torch.Tensor, scales: torch.Tensor, zero_points: torch.Tensor, axis: int) -> torch.Tensor:
    """dequantize() with one (scale, zero_point) per slice along `axis`."""
    axis = axis % q.dim()
    return dequantize(q, _channel_view(scales, q.dim(), axis), _channel_view(zero_points, q.dim(), axis))


def fake_quantize(
    x: torch.Tensor, bits: int, *, per_channel_axis: int | None = None, symmetric: bool = False
) -> torch.Tensor:
    """x quantized to `bits` and back (min-max ranges), per tensor or per slice along `per_channel_axis`."""
    qmin, qmax = int_range(bits, signed=True)
    if symmetric:
        qmin = -qmax  # the restricted range [−qmax, qmax]: zero sits in the middle
    if per_channel_axis is None:
        if symmetric:
            scale = symmetric_scale(float(x.abs().max()), qmax)
            return dequantize(quantize(x, scale, 0, qmin, qmax), scale, 0)
        scale, zero_point = affine_qparams(float(x.min()), float(x.max()), qmin, qmax)
        return dequantize(quantize(x, scale, zero_point, qmin, qmax), scale, zero_point)
    axis = per_channel_axis
    if symmetric:
        scales = symmetric_per_channel_scales(x, axis, qmax)
        zero_points = torch.zeros_like(scales, dtype=torch.int64)
    else:
        scales, zero_points = per_channel_qparams(x, axis, qmin, qmax)
    q = quantize_per_channel(x, scales, zero_points, axis, qmin, qmax)
    return dequantize_per_channel(q, scales, zero_points, axis)


# ---------------------------------------------------------------------------------------------
# Error metrics


def mse(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """Mean squared error between a tensor and its approximation (computed in float64)."""
    return float((x.double() - x_hat.double()).pow(2).mean())


def sqnr_db(x: torch.Tensor, x_hat: torch.Tensor) -> float:
    """Signal-to-quantization-noise ratio in dB: 10·log10(Σx² / Σ(x − x̂)²); inf if x̂ == x."""
    signal = float(x.double().pow(2).sum())
    noise = float((x.double() - x_hat.double()).pow(2).sum())
    if noise == 0.0:
        return math.inf
    return 10.0 * math.log10(signal / noise)


DB_PER_BIT = 20.0 * math.log10(2.0)  # one more bit halves the step: noise power / 4, i.e. 6.02 dB


def uniform_sqnr_db(bits: int, crest_factor: float) -> float:
    """SQNR of min-max rounding of a signal whose range is ±crest_factor·RMS: noise = step²/12."""
    step = 2.0 * crest_factor / (2**bits - 1)  # in units of the signal's RMS
    return 10.0 * math.log10(12.0 / step**2)


# ---------------------------------------------------------------------------------------------
# An int8 matmul: integer products, exact int32 sums, one float rescale


def int8_matmul(
    a_q: torch.Tensor,
    a_scale: float,
    a_zp: int,
    b_q: torch.Tensor,
    b_scale: float,
    b_zp: int,
) -> torch.Tensor:
    """(a_q − a_zp) @ (b_q − b_zp) accumulated exactly in int32, times a_scale·b_scale (float32)."""
    a = a_q.to(torch.int32) - a_zp  # widen before subtracting: 127 − (−128) does not fit in int8
    b = b_q.to(torch.int32) - b_zp
    k = a.shape[-1]
    # each product is at most 255² < 2^16: k of them sum below 2^31 for k < 2^15
    if k * (int(a.abs().max()) if a.numel() else 0) * (int(b.abs().max()) if b.numel() else 0) >= 2**31:
        raise OverflowError(f"an int32 accumulator could overflow with k = {k}")
    acc = a @ b  # int32 @ int32 -> int32 on the CPU: every partial sum exact
    return acc.float() * (a_scale * b_scale)


# ---------------------------------------------------------------------------------------------
# Storage


def quantized_weight_bytes(n_params: int, bits: int, group_size: int, scale_bytes: int) -> int:
    """Bytes of n_params weights packed at `bits` each, plus one `scale_bytes` scale per group."""
    if min(n_params, bits, group_size) <= 0 or scale_bytes < 0:
        raise ValueError("n_params, bits and group_size must be positive, scale_bytes non-negative")
    packed = -(-n_params * bits // 8)  # ceil: whole bytes
    groups = -(-n_params // group_size)  # ceil: a last, partial group has its own scale
    return packed + groups * scale_bytes


def stored_bytes(t: torch.Tensor) -> int:
    """Bytes a tensor holds, looking inside tensor subclasses (torchao's Int8Tensor: int8 data + scales)."""
    if is_traceable_wrapper_subclass(t):
        names, _ = t.__tensor_flatten__()
        return sum(stored_bytes(getattr(t, name)) for name in names if getattr(t, name) is not None)
    return t.numel() * t.element_size()


def module_bytes(module: nn.Module) -> int:
    """Bytes of a module's parameters and buffers (each shared tensor once)."""
    seen: set[int] = set()
    total = 0
    for t in [*module.parameters(), *module.buffers()]:
        if id(t) not in seen:
            seen.add(id(t))
            total += stored_bytes(t)
    return total


# ---------------------------------------------------------------------------------------------
# torchao: the library PyTorch now points to for quantization (torch.ao.quantization is deprecated)

TORCHAO_MODES: tuple[str, ...] = ("int8-weight-only", "int8-dynamic")
# What torchao 0.18 logs at import on a CPU-only machine: its CUDA kernels (mxfp8, CUTLASS sm90a) fail to
# load, and torch warns about an Enum registration. Neither matters on the CPU paths used here.
_IMPORT_LOGGERS = ("torchao", "torch.utils._pytree")


@contextlib.contextmanager
def _quiet_logs(names: Sequence[str]) -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def import_torchao() -> ModuleType:
    """torchao.quantization, imported without its import-time log lines about CUDA kernels."""
    with _quiet_logs(_IMPORT_LOGGERS):
        return importlib.import_module("torchao.quantization")


def torchao_config(mode: str) -> object:
    """The torchao config of a mode: int8 weight-only, or int8 dynamic activations with int8 weights."""
    ao = import_torchao()
    # set_inductor_config=False: no torch.compile here, so no need to import and tune inductor (seconds)
    if mode == "int8-weight-only":  # per-row symmetric int8 weights; activations stay float
        return ao.Int8WeightOnlyConfig(set_inductor_config=False)
    if mode == "int8-dynamic":  # + per-row int8 activations computed at run time, int8 matmul
        return ao.Int8DynamicActivationInt8WeightConfig(set_inductor_config=False)
    raise ValueError(f"unknown mode {mode!r}; known: {', '.join(TORCHAO_MODES)}")


def torchao_quantize(model: nn.Module, mode: str) -> nn.Module:
    """A quantized copy of `model`: every nn.Linear's weight replaced by torchao's int8 tensor."""
    config = torchao_config(mode)
    quantized = copy.deepcopy(model)
    with _quiet_logs(_IMPORT_LOGGERS):
        import_torchao().quantize_(quantized, config)
    return quantized


@dataclass(frozen=True)
class QuantizedRun:
    """One model variant measured: its bytes, its time per forward, and its output error."""

    mode: str  # "float" (the unquantized reference) or one of TORCHAO_MODES
    weight_bytes: int  # module_bytes(): parameters and buffers, int8 data and scales included
    timing: Timing  # one forward pass
    sqnr_db: float  # output against the reference model's output (inf for the reference)
    max_abs_error: float  # largest |output − reference output|
    top1_agreement: float  # fraction of positions whose argmax (next token) equals the reference's


@contextlib.contextmanager
def _torch_threads(num_threads: int | None) -> Iterator[None]:
    """Run with `num_threads` CPU threads (None: leave as is), then restore."""
    before = torch.get_num_threads()
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def compare_torchao(
    model: nn.Module,
    examples: Mapping[str, torch.Tensor],
    modes: Sequence[str] = TORCHAO_MODES,
    *,
    min_run_time_s: float = 0.2,
    num_threads: int | None = None,
) -> dict[str, list[QuantizedRun]]:
    """Per workload, `model` and a torchao-quantized copy per mode: bytes, latency, output error."""
    model = model.eval()
    runs: dict[str, list[QuantizedRun]] = {name: [] for name in examples}
    with torch.no_grad(), _torch_threads(num_threads):  # every forward on the same threads as the timing
        references = {name: model(example) for name, example in examples.items()}
        for mode in ("float", *modes):
            variant = model if mode == "float" else torchao_quantize(model, mode)
            n_bytes = module_bytes(variant)
            for name, example in examples.items():
                output, reference = variant(example), references[name]
                timing = benchmark(lambda: variant(example), min_run_time_s=min_run_time_s, num_threads=num_threads)
                error = float((output.double() - reference.double()).abs().max())
                agreement = float((output.argmax(dim=-1) == reference.argmax(dim=-1)).double().mean())
                runs[name].append(
                    QuantizedRun(mode, n_bytes, timing, sqnr_db(reference, output), error, agreement)
                )
    return runs


# ---------------------------------------------------------------------------------------------
# Which low-precision types a CPU computes in natively: its instruction-set flags

# Linux /proc/cpuinfo flag names, x86 then aarch64. fp16: AVX512-FP16 and AMX-FP16 multiply fp16 (F16C only converts
# fp16 <-> fp32); Arm's FEAT_FP16 ("fphp", "asimdhp"). bf16: AVX512-BF16 and AMX-BF16 dot products; Arm's FEAT_BF16.
# int8: dot products of int8 into int32 (AVX512-VNNI, AVX-VNNI, AMX-INT8; Arm's dot product and i8mm).
LOW_PRECISION_FLAGS: dict[str, tuple[str, ...]] = {
    "fp16": ("avx512_fp16", "amx_fp16", "fphp", "asimdhp"),
    "bf16": ("avx512_bf16", "amx_bf16", "bf16"),
    "int8": ("avx512_vnni", "avx_vnni", "amx_int8", "asimddp", "i8mm"),
}


def low_precision_isa(cpuinfo: str | None = None) -> dict[str, tuple[str, ...]] | None:
    """Per type ("fp16", "bf16", "int8"), the flags of LOW_PRECISION_FLAGS this CPU has; None where unreadable."""
    flags = cpu_flags(cpuinfo)
    if flags is None:
        return None
    return {dtype: tuple(f for f in names if f in flags) for dtype, names in LOW_PRECISION_FLAGS.items()}
