"""Tests for lecturelib.flops: published counts, FlopCounterMode as the oracle, and invariants."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import model_configs
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from lecturelib.configs import MODELS, ModelConfig, from_name
from lecturelib.counter import count_flops
from lecturelib.flops import (
    FORMULAS,
    Breakdown,
    attention_core_breakdown,
    attention_core_flops,
    attention_scores_flops,
    attention_weighted_sum_flops,
    causal_pairs,
    conv2d_flops,
    forward_breakdown,
    forward_flops,
    forward_flops_per_token,
    SPLIT_PARTS,
    forward_split_per_token,
    kaplan_forward_flops_per_token,
    layernorm_flops,
    linear_flops,
    matmul_flops,
    matmul_flops_exact,
    register,
    rmsnorm_flops,
    softmax_breakdown,
    softmax_flops,
    softmax_flops_exact,
    train_flops_per_token,
)
from lecturelib.models import GPT


def pytorch_flops(fn: Callable[[], object]) -> int:
    """The oracle: torch.utils.flop_counter's own count of fn()."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return counter.get_total_flops()


def test_matmul_flops_matches_flopcountermode() -> None:
    a, b = torch.randn(2, 3), torch.randn(3, 4)
    assert matmul_flops(2, 3, 4) == pytorch_flops(lambda: a @ b) == 48  # 2·2·3·4
    assert matmul_flops_exact(2, 3, 4) == 40  # 2·4 outputs, each 3 multiplies and 2 adds


@pytest.mark.parametrize("bias", [False, True])
def test_linear_flops_leading_dims_matches_flopcountermode(bias: bool) -> None:
    layer, x = nn.Linear(8, 5, bias=bias), torch.randn(2, 3, 7, 8)
    assert linear_flops(x.shape, 5) == pytorch_flops(lambda: layer(x)) == 3_360  # 2·(2·3·7)·8·5
    assert linear_flops(x.shape, 5, count_bias=True) == 3_360 + 210  # + one add per output, 42·5


CONV_CASES = [
    # (input shape, out_channels, kernel_size, keyword arguments)
    ((2, 3, 9, 9), 4, 3, {}),
    ((1, 4, 10, 7), 6, (3, 2), {"stride": 2, "padding": 1}),
    ((2, 4, 11, 11), 8, 3, {"stride": (2, 3), "padding": (2, 0), "dilation": 2}),
    ((1, 6, 8, 8), 9, 3, {"groups": 3, "padding": 1}),
    ((1, 4, 8, 8), 4, 3, {"groups": 4, "padding": "same", "dilation": 2}),  # depthwise
    ((1, 2, 8, 6), 3, (2, 3), {"padding": "valid", "stride": 3}),
    ((3, 7, 7), 5, 1, {}),  # unbatched (C, H, W)
]


@pytest.mark.parametrize(("shape", "out_channels", "kernel_size", "kwargs"), CONV_CASES)
def test_conv2d_flops_matches_flopcountermode(
    shape: tuple[int, ...], out_channels: int, kernel_size: int | tuple[int, int], kwargs: dict[str, object]
) -> None:
    conv = nn.Conv2d(shape[-3], out_channels, kernel_size, **kwargs)  # type: ignore[arg-type]
    x = torch.randn(shape)
    expected = pytorch_flops(lambda: conv(x))
    assert conv2d_flops(shape, out_channels, kernel_size, **kwargs) == expected  # type: ignore[arg-type]


def test_conv2d_flops_value() -> None:
    # 2·7·7 outputs per channel, 4 channels, each 3·3·3 multiply-adds
    assert conv2d_flops((2, 3, 9, 9), 4, 3) == 21_168  # 2·(2·7·7)·(3·3·3)·4


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        (((1, 3, 8, 8), 4, 3), {"groups": 2}, "groups"),
        (((1, 3, 2, 2), 4, 3), {}, "kernel larger"),
        (((1, 3, 8, 8), 4, 3), {"padding": "same", "stride": 2}, "stride 1"),
    ],
)
def test_conv2d_flops_invalid_raises(args: tuple, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        conv2d_flops(*args, **kwargs)  # type: ignore[arg-type]


def test_softmax_flops_conventions() -> None:
    assert softmax_flops((4, 6)) == 72  # 3·24: exp, sum, divide
    assert softmax_flops((4, 6), stable=True) == 120  # 5·24: max, subtract, exp, sum, divide


def counted_stable_softmax(rows: list[list[float]]) -> tuple[list[list[float]], dict[str, int]]:
    """A reference: stable softmax in plain Python, counting each operation it performs."""
    counts = dict.fromkeys(("max", "sub", "exp", "add", "div"), 0)
    out = []
    for row in rows:
        top = row[0]
        for value in row[1:]:
            top = value if value > top else top
            counts["max"] += 1
        exps = [math.exp(value - top) for value in row]
        counts["sub"] += len(row)
        counts["exp"] += len(row)
        total = exps[0]
        for value in exps[1:]:
            total += value
            counts["add"] += 1
        out.append([value / total for value in exps])
        counts["div"] += len(row)
    return out, counts


@pytest.mark.parametrize("shape", [(1, 1), (4, 6), (3, 1, 7), (2, 2, 2, 5)])
def test_softmax_breakdown_matches_an_operation_counting_loop(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, dtype=torch.float64)
    probs, counts = counted_stable_softmax(x.reshape(-1, shape[-1]).tolist())
    torch.testing.assert_close(torch.tensor(probs, dtype=x.dtype).reshape(shape), x.softmax(dim=-1))  # the loop is a softmax
    breakdown = softmax_breakdown(shape, stable=True)
    assert {part: breakdown[part] for part in counts} == counts
    assert softmax_flops_exact(shape, stable=True) == sum(counts.values())


def test_softmax_flops_exact_values() -> None:
    # one 1024 × 1024 score matrix: 1024 rows of n = 1024
    assert softmax_flops_exact((1024, 1024)) == 3_144_704  # 1024·(3·1024 − 1) = 3·1024² − 1024
    assert softmax_flops_exact((1024, 1024), stable=True) == 5_240_832  # 1024·(5·1024 − 2)
    assert softmax_breakdown((4, 6))["max"] == softmax_breakdown((4, 6))["sub"] == 0  # naive: no max, no shift


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 50), st.integers(1, 50), st.booleans())
def test_softmax_flops_exact_is_convention_minus_one_op_per_reduction(rows: int, n: int, stable: bool) -> None:
    # each row reduction (sum; and max if stable) combines n values with n − 1 ops, not n
    reductions = 2 if stable else 1
    assert softmax_flops((rows, n), stable=stable) - softmax_flops_exact((rows, n), stable=stable) == reductions * rows


def test_attention_core_breakdown_sums_its_steps() -> None:
    parts = attention_core_breakdown(2, 3, 5, 7, 4)
    assert parts["scores"] == parts["weighted_sum"] == 1_680  # 2·2·3·5·7·4
    assert parts["softmax"] == 1_050  # 5·(2·3·5·7): stable, per element
    assert parts["total"] == attention_core_flops(2, 3, 5, 7, 4) == 4_410  # (4·4 + 5)·210 pairs


def test_attention_core_flops_matches_count_flops_of_explicit_attention() -> None:
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)  # (B, nh, T, hs)
    counted = count_flops(lambda: (q @ k.transpose(-2, -1)).softmax(dim=-1) @ v, softmax=True)
    assert counted.by_operator == {"aten.bmm": 3_360, "aten._softmax": 1_050}  # 2·1,680 and 5·210
    assert counted.total == attention_core_flops(2, 3, 5, 7, 4)


def test_attention_core_flops_causal_counts_unmasked_pairs() -> None:
    # T = 1024, head_dim 64: 524,800 of the 1,048,576 pairs, each 4·64 + 5 = 261 FLOPs
    assert attention_core_flops(1, 12, 1024, 1024, 64, causal=True) == 1_643_673_600  # 12·524,800·261
    assert attention_core_flops(1, 12, 1024, 1024, 64) == 3_284_140_032  # 12·1,048,576·261


def test_norm_flops_conventions() -> None:
    assert layernorm_flops((2, 3, 8)) == 336  # 7·48: mean, subtract, square, sum, scale, γ, β
    assert layernorm_flops((2, 3, 8), affine=False) == 240  # 5·48
    assert rmsnorm_flops((2, 3, 8)) == 192  # 4·48: square, sum, scale, γ


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 12), st.integers(0, 12))
def test_causal_pairs_matches_mask(q_len: int, kv_len: int) -> None:
    # bottom-right aligned: query i (position kv_len − q_len + i) keeps keys j <= kv_len − q_len + i
    mask = torch.ones(q_len, kv_len).tril(diagonal=kv_len - q_len)
    assert causal_pairs(q_len, kv_len) == int(mask.sum())


def test_attention_flops_match_flopcountermode() -> None:
    q, k, v = torch.randn(2, 3, 5, 4), torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 4)  # (B, nh, T, hs)
    scores = q @ k.transpose(-2, -1)  # (B, nh, 5, 7)
    expected = pytorch_flops(lambda: q @ k.transpose(-2, -1))
    assert attention_scores_flops(2, 3, 5, 7, 4) == expected == 1_680  # 2·2·3·5·7·4
    assert attention_weighted_sum_flops(2, 3, 5, 7, 4) == pytorch_flops(lambda: scores @ v) == 1_680


def test_attention_flops_causal_counts_unmasked_pairs() -> None:
    # T = 1024: 1024·1025/2 = 524,800 of the 1,048,576 pairs are unmasked, each a 64-long dot product
    assert attention_scores_flops(1, 12, 1024, 1024, 64, causal=True) == 806_092_800  # 12·524,800·2·64
    assert attention_weighted_sum_flops(1, 12, 1024, 1024, 64, causal=True) == 806_092_800
    assert attention_scores_flops(1, 12, 1024, 1024, 64) == 1_610_612_736  # 12·1,048,576·2·64


def test_forward_breakdown_gpt2_small_published() -> None:
    parts = forward_breakdown(from_name("gpt2-small"), 1, 1024)
    assert parts["lm_head"] == 79_047_426_048  # 2·1024·768·50,257
    # per layer: qkv 2·1024·768·2304 + scores and weighted sum 2·(2·12·1024·1024·64) + proj 2·1024·768·768
    # + MLP 2·(2·1024·768·3072) = 17,716,740,096; 12 layers + LM head = 291,648,307,200
    assert parts["total"] == 291_648_307_200


def test_forward_flops_gpt2_small_matches_counter_on_meta() -> None:
    # FlopCounterMode on meta tensors: the real forward's operators and shapes, no arithmetic done
    with torch.device("meta"):
        model = GPT(from_name("gpt2-small"))
        idx = torch.zeros(1, 1024, dtype=torch.long)
    assert count_flops(lambda: model(idx)).total == forward_flops(from_name("gpt2-small"), 1, 1024) == 291_648_307_200


@pytest.mark.parametrize("name", list(MODELS))
def test_forward_flops_matches_counter_on_meta(name: str) -> None:
    cfg = MODELS[name]
    with torch.device("meta"):
        model = GPT(dataclasses.replace(cfg, n_layer=2))  # every layer counts the same: 2 suffice
        idx = torch.zeros(2, 64, dtype=torch.long)
    assert count_flops(lambda: model(idx)).total == forward_flops(dataclasses.replace(cfg, n_layer=2), 2, 64)


@settings(max_examples=10, deadline=None)
@given(model_configs(), st.integers(1, 3), st.data())
def test_forward_flops_matches_counter_on_cpu(cfg: ModelConfig, batch: int, data: st.DataObject) -> None:
    seq_len = data.draw(st.integers(1, cfg.n_ctx))
    torch.manual_seed(0)
    model, idx = GPT(cfg), torch.randint(cfg.vocab_size, (batch, seq_len))
    with torch.no_grad():
        assert count_flops(lambda: model(idx)).total == forward_flops(cfg, batch, seq_len)


@settings(max_examples=50, deadline=None)
@given(model_configs(), st.integers(1, 64), st.data())
def test_forward_flops_linear_in_batch(cfg: ModelConfig, batch: int, data: st.DataObject) -> None:
    seq_len = data.draw(st.integers(1, cfg.n_ctx))
    assert forward_flops(cfg, batch, seq_len) == batch * forward_flops(cfg, 1, seq_len)


def assert_parts_sum_to_total(breakdown: Breakdown) -> None:
    parts = {name: part for name, part in breakdown.items() if name != "total"}
    for part in parts.values():
        if isinstance(part, dict):
            assert_parts_sum_to_total(part)
    assert breakdown["total"] == sum(part if isinstance(part, int) else part["total"] for part in parts.values())


@settings(max_examples=50, deadline=None)
@given(model_configs(), st.integers(1, 4), st.data())
def test_forward_breakdown_parts_sum_to_total(cfg: ModelConfig, batch: int, data: st.DataObject) -> None:
    assert_parts_sum_to_total(forward_breakdown(cfg, batch, data.draw(st.integers(1, cfg.n_ctx))))


def test_forward_breakdown_gqa_kv_projections_smaller() -> None:
    attention = forward_breakdown(from_name("llama2-70b"), 1, 4096)["attention"]
    assert isinstance(attention, dict)
    assert attention["k_proj"] == attention["v_proj"] == attention["q_proj"] // 8  # 8 KV heads for 64 query heads
    assert attention["scores"] == 80 * 2 * 64 * 4096 * 4096 * 128  # every query head scores every key


@pytest.mark.parametrize(("batch", "seq_len"), [(0, 8), (1, -1), (1, 1025), (1.5, 8)])
def test_forward_breakdown_invalid_sizes_raise(batch: int, seq_len: int) -> None:
    with pytest.raises(ValueError, match="batch|seq_len"):
        forward_breakdown(from_name("gpt2-small"), batch, seq_len)


def test_forward_flops_per_token_gpt2_small() -> None:
    assert forward_flops_per_token(from_name("gpt2-small"), 1024) == 284_812_800  # 291,648,307,200 / 1024


def test_kaplan_forward_flops_per_token_gpt2_small() -> None:
    # 2·85,056,000 + 2·12·1024·768 = 170,112,000 + 18,874,368
    assert kaplan_forward_flops_per_token(from_name("gpt2-small"), 1024) == 188_986_368


def test_kaplan_forward_flops_per_token_llama_leaves_out_untied_head() -> None:
    # Kaplan Table 1: the de-embedding is not in N. N = 6,738,415,616 − 2·32,000·4,096 (embedding and head)
    # = 6,476,271,616; 2N + 2·32·4,096·4,096 = 12,952,543,232 + 1,073,741,824
    assert kaplan_forward_flops_per_token(from_name("llama2-7b"), 4096) == 14_026_285_056


@settings(max_examples=50, deadline=None)
@given(model_configs(), st.integers(1, 4096))
def test_kaplan_forward_flops_per_token_has_no_vocab_term(cfg: ModelConfig, n_ctx: int) -> None:
    # neither the embedding nor the head (tied or not) is in Kaplan's C_forward: the vocabulary size drops out
    bigger_vocab = dataclasses.replace(cfg, vocab_size=cfg.vocab_size + 1000)
    assert kaplan_forward_flops_per_token(bigger_vocab, n_ctx) == kaplan_forward_flops_per_token(cfg, n_ctx)


def test_forward_split_per_token_gpt2_small() -> None:
    assert forward_split_per_token(from_name("gpt2-small"), 1024) == {
        "attention_projections": 56_623_104,  # 12·(2·768·2,304 + 2·768·768) = 12·8·768²
        "attention_scores": 37_748_736,  # 12·(2 + 2)·1,024·768: Q K^T and P V, the full T × T matrix
        "mlp": 113_246_208,  # 12·2·(2·768·3,072) = 12·16·768²
        "lm_head": 77_194_752,  # 2·768·50,257
        "total": 284_812_800,  # forward_flops_per_token(gpt2-small, 1024)
    }


def test_forward_split_per_token_beyond_learned_positions() -> None:
    # 32k tokens through GPT-2 small (a longer position table, same matmuls): scores grow with T, nothing else
    split = forward_split_per_token(from_name("gpt2-small"), 32_768)
    assert split["attention_scores"] == 1_207_959_552  # 12·4·32,768·768
    assert split["mlp"] == 113_246_208


@settings(max_examples=50, deadline=None)
@given(model_configs(), st.data())
def test_forward_split_per_token_sums_to_forward_flops_per_token(cfg: ModelConfig, data: st.DataObject) -> None:
    seq_len = data.draw(st.integers(1, cfg.n_ctx))
    split = forward_split_per_token(cfg, seq_len)
    assert list(split) == [*SPLIT_PARTS, "total"]
    assert split["total"] == sum(split[part] for part in SPLIT_PARTS) == forward_flops_per_token(cfg, seq_len)


def test_train_flops_per_token_gpt2_small() -> None:
    # nanoGPT estimate_mfu: N = get_num_params() = 124,439,808 − 786,432 (wpe) = 123,653,376
    # 6·123,653,376 + 12·12·12·64·1024 = 741,920,256 + 113,246,208
    assert train_flops_per_token(from_name("gpt2-small"), 1024) == 855_166_464
    # 3× the matmul forward per token, plus 6 per bias and norm weight: 3·284,812,800 + 6·(82,944 + 38,400)
    assert train_flops_per_token(from_name("gpt2-small"), 1024) == 3 * 284_812_800 + 6 * (82_944 + 38_400)


def test_register_rejects_duplicates() -> None:
    assert {"matmul_flops", "linear_flops", "conv2d_flops", "softmax_flops", "train_flops_per_token"} <= set(FORMULAS)

    def matmul_flops(m: int, k: int, n: int) -> int:
        return m * k * n

    with pytest.raises(ValueError, match="duplicate registration of FLOP formula 'matmul_flops'"):
        register(matmul_flops)
    assert FORMULAS["matmul_flops"] is not matmul_flops
