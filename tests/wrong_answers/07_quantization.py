"""Notebook 07: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex7_3", label="the zero point added before rounding: round(x / s + z)", source='''
def quantize(x: torch.Tensor, scale: float | torch.Tensor, zero_point: int | torch.Tensor, qmin: int, qmax: int) -> torch.Tensor:
    """x on the integer grid of (scale, zero_point), rounded half to even and clamped to [qmin, qmax]."""
    return torch.round(x / scale + zero_point).clamp(qmin, qmax).to(torch.int32)


def dequantize(q: torch.Tensor, scale: float | torch.Tensor, zero_point: int | torch.Tensor) -> torch.Tensor:
    """The real values the integers q stand for, as float32."""
    return ((q.to(torch.int32) - zero_point) * scale).to(torch.float32)
'''),
    Wrong(cell="ex7_6", label="each row's scale taken over the whole row, outlier columns included", source='''
def int8_matmul_outliers(x: torch.Tensor, w: torch.Tensor, threshold: float) -> torch.Tensor:
    """x @ w with LLM.int8()'s decomposition: outlier feature columns in floating point, the rest in int8."""
    outlier = (x.abs() > threshold).any(dim=0)
    high = x[:, outlier] @ w[outlier, :]
    x_rest, w_rest = x[:, ~outlier], w[~outlier, :]
    if x_rest.shape[1] == 0:
        return high
    x_scale = x.abs().amax(dim=1, keepdim=True) / 127  # the outliers set every row's scale
    w_scale = w_rest.abs().amax(dim=0, keepdim=True) / 127
    x_scale = torch.where(x_scale == 0, torch.ones_like(x_scale), x_scale)
    w_scale = torch.where(w_scale == 0, torch.ones_like(w_scale), w_scale)
    x_q = torch.round(x_rest / x_scale).clamp(-127, 127).to(torch.int32)
    w_q = torch.round(w_rest / w_scale).clamp(-127, 127).to(torch.int32)
    return high + (x_q @ w_q).to(x.dtype) * (x_scale * w_scale)
'''),
    Wrong(cell="ex7_6", label="the rounded codes multiplied in float32: sums of many products are rounded", source='''
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
    x_q = torch.round(x_rest / x_scale).clamp(-127, 127)  # integers, kept as floats
    w_q = torch.round(w_rest / w_scale).clamp(-127, 127)
    return high + (x_q @ w_q) * (x_scale * w_scale)  # a float32 matmul: its partial sums round above 2**24
'''),
]
