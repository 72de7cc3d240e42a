"""Notebook 07: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex7_1", label="the range not widened to include 0 (the notes' linear_quantize_complete)", source='''
def affine_qparams(x_min: float, x_max: float, qmin: int, qmax: int) -> tuple[float, int]:
    """Scale and zero point of the affine map of [x_min, x_max] (0 included) onto the integers [qmin, qmax]."""
    scale = (x_max - x_min) / (qmax - qmin)  # the data's own range: 0 may lie outside it
    zero_point = qmin - round(x_min / scale)
    return scale, min(max(zero_point, qmin), qmax)
''', teaches="the range was not widened to include 0"),
    Wrong(cell="ex7_3", label="the zero point added before rounding: round(x / s + z)", source='''
def quantize(x: torch.Tensor, scale: float | torch.Tensor, zero_point: int | torch.Tensor, qmin: int, qmax: int) -> torch.Tensor:
    """x on the integer grid of (scale, zero_point), rounded half to even and clamped to [qmin, qmax]."""
    return torch.round(x / scale + zero_point).clamp(qmin, qmax).to(torch.int32)


def dequantize(q: torch.Tensor, scale: float | torch.Tensor, zero_point: int | torch.Tensor) -> torch.Tensor:
    """The real values the integers q stand for, as float32."""
    return ((q.to(torch.int32) - zero_point) * scale).to(torch.float32)
''', teaches="the zero point was added before rounding, not after"),
    Wrong(cell="ex7_4", label="min-max: the range of the data, nothing searched", source='''
import torch


def best_clip_range(x: torch.Tensor, bits: int, steps: int) -> float:
    """The clipping range, of `steps` evenly spaced candidates, whose symmetric quantization of x errs least."""
    return float(x.abs().max())  # the last candidate, whatever the others would have done
''', teaches="the candidate with the smallest mean squared error was not the one returned"),
    Wrong(cell="ex7_4", label="a closed form: clip at three standard deviations", source='''
import torch


def best_clip_range(x: torch.Tensor, bits: int, steps: int) -> float:
    """The clipping range, of `steps` evenly spaced candidates, whose symmetric quantization of x errs least."""
    return min(float(x.abs().max()), 3 * float(x.float().std()))  # the Gaussian rule of thumb, for any data
''', teaches="the candidate with the smallest mean squared error was not the one returned"),
    Wrong(cell="ex7_5", label="the channels always taken along the rows: axis ignored", source='''
def per_channel_qparams(w: torch.Tensor, axis: int, qmin: int, qmax: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One (scale, zero point) per index along `axis`, from the min and max of that slice (0 included)."""
    channels = w.detach().double().reshape(w.shape[0], -1)  # (rows, everything else), whatever axis says
    x_min = channels.amin(dim=1).clamp(max=0.0)
    x_max = channels.amax(dim=1).clamp(min=0.0)
    scales = (x_max - x_min) / (qmax - qmin)
    zero_points = (qmin - torch.round(x_min / scales)).clamp(qmin, qmax).to(torch.int64)
    return scales.to(torch.float32), zero_points
''', teaches="the channels must be taken along the axis asked for"),
    Wrong(cell="ex7_6", label="the codes multiplied in float32: the integer accumulation skipped", source='''
def int8_matmul(a_q: torch.Tensor, a_scale: float, a_zp: int, b_q: torch.Tensor, b_scale: float, b_zp: int) -> torch.Tensor:
    """The product of the two real matrices that the quantized ones stand for, as float32."""
    a = a_q.float() - a_zp  # the codes as float32: exact, but their sums are not
    b = b_q.float() - b_zp
    return (a @ b) * (a_scale * b_scale)
''', teaches="the integer sums were not accumulated exactly in int32 (float32 sums of many products round)"),
    Wrong(cell="ex7_7", label="the int32 sums cast to x's dtype before the rescale (the old reference: inf in fp16)",
          source='''
import torch


def int8_matmul_outliers(x: torch.Tensor, w: torch.Tensor, threshold: float) -> torch.Tensor:
    """x @ w with LLM.int8()'s decomposition: outlier feature columns in floating point, the rest in int8."""
    outlier = (x.abs() > threshold).any(dim=0)
    high = x[:, outlier] @ w[outlier, :]
    x_rest, w_rest = x[:, ~outlier], w[~outlier, :]
    if x_rest.shape[1] == 0:
        return high
    x_scale = x_rest.abs().amax(dim=1, keepdim=True) / 127
    w_scale = w_rest.abs().amax(dim=0, keepdim=True) / 127
    x_scale = torch.where(x_scale == 0, torch.ones_like(x_scale), x_scale)
    w_scale = torch.where(w_scale == 0, torch.ones_like(w_scale), w_scale)
    x_q = torch.round(x_rest / x_scale).clamp(-127, 127).to(torch.int32)
    w_q = torch.round(w_rest / w_scale).clamp(-127, 127).to(torch.int32)
    return high + (x_q @ w_q).to(x.dtype) * (x_scale * w_scale)  # the int32 sums cast to x's dtype, then scaled
''', teaches="in fp16 the int32 sums must be rescaled in float32 before the result is rounded to fp16 (they exceed its range)"),
    Wrong(cell="ex7_7", label="x @ w in floating point: nothing quantized", source='''
import torch


def int8_matmul_outliers(x: torch.Tensor, w: torch.Tensor, threshold: float) -> torch.Tensor:
    """x @ w with LLM.int8()'s decomposition: outlier feature columns in floating point, the rest in int8."""
    return x @ w  # all of it in floating point: nothing quantized
''', teaches="the codes must be multiplied with exact integer accumulation (float32 sums of many products round)"),
    Wrong(cell="ex7_8", label="one code per byte: nothing packed", source='''
import torch


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """The codes as one continuous stream of `bits`-bit fields in a uint8 tensor of ceil(n·bits/8) bytes."""
    return codes.flatten().to(torch.uint8)  # a byte per code, whatever its width


def unpack_codes(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The first n `bits`-bit codes stored in `packed` by pack_codes, as an int64 tensor."""
    return packed[:n].to(torch.int64)
''', teaches="the codes must take ⌈n·bits/8⌉ bytes, not a byte each"),
    Wrong(cell="ex7_8", label="whole codes per byte: a code never straddles two bytes", source='''
import torch


def pack_codes(codes: torch.Tensor, bits: int) -> torch.Tensor:
    """The codes as one continuous stream of `bits`-bit fields in a uint8 tensor of ceil(n·bits/8) bytes."""
    per_byte = 8 // bits  # 3-bit codes: two per byte, two bits wasted
    flat = codes.flatten().to(torch.int64)
    out = torch.zeros(-(-flat.numel() // per_byte), dtype=torch.int64)
    for j in range(per_byte):
        part = flat[j::per_byte]
        out[:part.numel()] |= part << (j * bits)
    return out.to(torch.uint8)


def unpack_codes(packed: torch.Tensor, bits: int, n: int) -> torch.Tensor:
    """The first n `bits`-bit codes stored in `packed` by pack_codes, as an int64 tensor."""
    per_byte = 8 // bits
    stream = packed.to(torch.int64)
    index = torch.arange(n)
    return (stream[index // per_byte] >> (index % per_byte * bits)) & (2**bits - 1)
''', teaches="the codes are not one continuous stream of bits, least significant bit first (3 bits straddle bytes)"),
]
