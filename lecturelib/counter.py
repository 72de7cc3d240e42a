"""A measured FLOP count of real PyTorch code: FlopCounterMode plus the operators it misses."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from lecturelib.flops import SOFTMAX_STABLE_FLOPS_PER_ELEMENT, softmax_flops

aten = torch.ops.aten

# FLOPs per element of the softmax kernels, counted only with count_flops(..., softmax=True).
# Forward: lecturelib.flops.softmax_flops, stable (max, subtract, exp, sum, divide), which is what
# PyTorch's kernels compute. Backward, dx = y * (dy - sum(dy * y)): multiply, sum, subtract, multiply.
SOFTMAX_FORWARD_FLOPS_PER_ELEMENT = SOFTMAX_STABLE_FLOPS_PER_ELEMENT
SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT = 4


@dataclass(frozen=True)
class FlopCount:
    """FLOPs of one call: the total and its split by aten operator ("aten.mm", "aten.bmm", ...)."""

    total: int
    by_operator: dict[str, int]


# Formulas receive shapes (torch.Size) in the operator's argument order; out_shape is the output's.
def cpu_sdpa_flop(query_shape: torch.Size, key_shape: torch.Size, value_shape: torch.Size, *args: Any,
                  out_shape: Any = None, **kwargs: Any) -> int:
    """CPU flash attention forward, as PyTorch counts the CUDA kernels: Q K^T and P V in full (causal not halved)."""
    # sdpa_flop_count takes k/v with fewer heads than q (grouped-query attention) and counts per query head
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def cpu_sdpa_backward_flop(grad_out_shape: torch.Size, query_shape: torch.Size, key_shape: torch.Size,
                           value_shape: torch.Size, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """CPU flash attention backward, as PyTorch counts the CUDA kernels: five matmuls (scores recomputed)."""
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


def softmax_flop(input_shape: torch.Size, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Softmax forward: lecturelib.flops.softmax_flops of the input, stable (5 per element)."""
    return softmax_flops(input_shape, stable=True)


def softmax_backward_flop(grad_output_shape: torch.Size, *args: Any, out_shape: Any = None, **kwargs: Any) -> int:
    """Softmax backward: SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT per element of the gradient."""
    return SOFTMAX_BACKWARD_FLOPS_PER_ELEMENT * math.prod(grad_output_shape)


# What torch 2.13's FlopCounterMode counts as 0: on CPU, F.scaled_dot_product_attention dispatches
# to these fused operators (MHA and GQA alike), which are not in its registry and do not decompose.
ATTENTION_FORMULAS: dict[Any, Callable[..., int]] = {
    aten._scaled_dot_product_flash_attention_for_cpu: cpu_sdpa_flop,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: cpu_sdpa_backward_flop,
}
# Explicit softmax calls (F.softmax, tensor.softmax); the softmax inside a fused attention kernel
# is not counted. aten._safe_softmax is what the math attention path (e.g. on meta tensors) calls.
SOFTMAX_FORMULAS: dict[Any, Callable[..., int]] = {
    aten._softmax: softmax_flop,
    aten._safe_softmax: softmax_flop,
    aten._softmax_backward_data: softmax_backward_flop,
}


def count_flops(fn: Callable[[], object], *, softmax: bool = False) -> FlopCount:
    """FLOPs of running fn() (with any backward in it): FlopCounterMode's count plus CPU and GQA attention."""
    mapping = {**ATTENTION_FORMULAS, **(SOFTMAX_FORMULAS if softmax else {})}
    with FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        fn()
    # keys are OpOverloadPackets; str() gives the readable "aten.mm"
    by_operator = {str(op): flops for op, flops in counter.get_flop_counts().get("Global", {}).items()}
    return FlopCount(total=sum(by_operator.values()), by_operator=by_operator)
