"""Tests for lecturelib.counter: what FlopCounterMode misses on CPU, and that count_flops adds it right."""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from lecturelib.configs import ModelConfig
from lecturelib.counter import count_flops
from lecturelib.flops import attention_scores_flops, forward_breakdown, forward_flops
from lecturelib.models import GPT

B, H, T, D = 2, 4, 6, 8  # (B, nh, T, hs) of the attention tests


def qkv(n_kv_head: int = H, requires_grad: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    shapes = [(B, H, T, D), (B, n_kv_head, T, D), (B, n_kv_head, T, D)]
    return tuple(torch.randn(shape, requires_grad=requires_grad) for shape in shapes)  # type: ignore[return-value]


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal F.scaled_dot_product_attention, grouped-query when k/v have fewer heads than q."""
    return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=k.shape[1] < q.shape[1])


def explicit_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal attention with explicit matmuls; k/v heads repeated for grouped-query attention."""
    group = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # (B, nh, T, hs)
    scores = (q @ k.transpose(-2, -1)) / D**0.5  # (B, nh, T, T)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v  # (B, nh, T, hs)


def test_flopcountermode_cpu_sdpa_counts_zero() -> None:
    # the gap count_flops fills: on CPU, SDPA runs aten._scaled_dot_product_flash_attention_for_cpu,
    # which torch 2.13's FlopCounterMode neither knows nor decomposes
    q, k, v = qkv()
    with FlopCounterMode(display=False) as counter:
        fused_attention(q, k, v)
    assert counter.get_total_flops() == 0


@pytest.mark.parametrize("n_kv_head", [H, 2, 1], ids=["mha", "gqa", "mqa"])
def test_count_flops_cpu_sdpa_equals_explicit_matmuls(n_kv_head: int) -> None:
    q, k, v = qkv(n_kv_head)
    fused = count_flops(lambda: fused_attention(q, k, v))
    explicit = count_flops(lambda: explicit_attention(q, k, v))
    assert fused.total == explicit.total == 2 * attention_scores_flops(B, H, T, T, D) == 9_216  # 2·(2·2·4·6·6·8)
    torch.testing.assert_close(fused_attention(q, k, v), explicit_attention(q, k, v))


@pytest.mark.parametrize("n_kv_head", [H, 2], ids=["mha", "gqa"])
def test_count_flops_cpu_sdpa_backward_counted(n_kv_head: int) -> None:
    # PyTorch's fused-attention backward convention: 5 matmuls of the forward's size (scores recomputed)
    q, k, v = qkv(n_kv_head, requires_grad=True)
    count = count_flops(lambda: fused_attention(q, k, v).sum().backward())
    assert count.by_operator == {
        "aten._scaled_dot_product_flash_attention_for_cpu": 9_216,  # 2 matmuls of 2·2·4·6·6·8 = 4,608
        "aten._scaled_dot_product_flash_attention_for_cpu_backward": 23_040,  # 5·4,608
    }


def test_count_flops_softmax_option() -> None:
    x = torch.randn(4, 7, requires_grad=True)
    assert count_flops(lambda: x.softmax(dim=-1)).total == 0  # FlopCounterMode's convention: not counted
    count = count_flops(lambda: x.softmax(dim=-1).sum().backward(), softmax=True)
    assert count.by_operator == {"aten._softmax": 140, "aten._softmax_backward_data": 112}  # 5·28 and 4·28


TINY = ModelConfig(name="tiny", arch="llama", n_layer=2, n_head=4, n_kv_head=2, d_model=16, d_ff=24,
                   vocab_size=30, n_ctx=8)


@pytest.mark.parametrize("cfg", [TINY, dataclasses.replace(TINY, arch="gpt2", n_kv_head=4)], ids=["llama", "gpt2"])
def test_count_flops_forward_backward_three_times_forward(cfg: ModelConfig) -> None:
    torch.manual_seed(0)
    model, idx = GPT(cfg), torch.randint(cfg.vocab_size, (3, cfg.n_ctx))
    forward = count_flops(lambda: model(idx))
    both = count_flops(lambda: model(idx).sum().backward())
    assert forward.total == forward_flops(cfg, 3, cfg.n_ctx)
    # every linear layer's matmul is done again for the input's gradient and for the weight's
    matmuls = ("aten.mm", "aten.addmm")
    forward_matmuls = sum(forward.by_operator.get(op, 0) for op in matmuls)
    assert sum(both.by_operator.get(op, 0) for op in matmuls) == 3 * forward_matmuls
    # fused attention: 2 matmuls forward, 5 backward
    attention = forward_breakdown(cfg, 3, cfg.n_ctx)["attention"]
    assert isinstance(attention, dict)
    assert both.total - 3 * forward.total == (attention["scores"] + attention["weighted_sum"]) // 2


def test_flopcountermode_gpt_cpu_misses_attention() -> None:
    torch.manual_seed(0)
    model, idx = GPT(TINY), torch.randint(TINY.vocab_size, (2, 8))
    with FlopCounterMode(display=False) as counter:
        model(idx)
    attention = forward_breakdown(TINY, 2, 8)["attention"]
    assert isinstance(attention, dict)
    missed = attention["scores"] + attention["weighted_sum"]
    assert counter.get_total_flops() == forward_flops(TINY, 2, 8) - missed
    assert count_flops(lambda: model(idx)).total == forward_flops(TINY, 2, 8)


def test_count_flops_total_is_sum_and_keys_readable() -> None:
    torch.manual_seed(0)
    model, idx = GPT(TINY), torch.randint(TINY.vocab_size, (1, 8))
    count = count_flops(lambda: model(idx).sum().backward(), softmax=True)
    assert count.total == sum(count.by_operator.values())
    assert all(op.startswith("aten.") for op in count.by_operator)
    assert "aten.mm" in count.by_operator


def test_count_flops_matches_flopcountermode_without_attention() -> None:
    layer, x = torch.nn.Linear(8, 5), torch.randn(3, 8, requires_grad=True)
    with FlopCounterMode(display=False) as counter:
        layer(x).sum().backward()
    assert count_flops(lambda: layer(x).sum().backward()).total == counter.get_total_flops() == 720  # 3·2·3·8·5
