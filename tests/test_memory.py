"""Tests of lecturelib.memory: dtype sizes, recipes, Korthikanti activations, KV cache, the hierarchy."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib.configs import MODELS, ModelConfig
from lecturelib.memory import (
    DTYPE_BITS,
    MEMORY_HIERARCHY,
    RECIPES,
    RECOMPUTE_MODES,
    activation_bytes_per_layer,
    attention_scores_bytes,
    dtype_bits,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    model_states,
    recipe_from_name,
    tensor_bytes,
    training_memory,
)
from lecturelib.params import n_params

GPT2_SMALL = MODELS["gpt2-small"]
LLAMA2_7B = MODELS["llama2-7b"]
LLAMA2_70B = MODELS["llama2-70b"]

sizes = st.integers(min_value=1, max_value=4096)
models = st.sampled_from(list(MODELS.values()))
recipes = st.sampled_from(list(RECIPES))
recomputes = st.sampled_from(RECOMPUTE_MODES)


# --- dtypes -----------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("name", "torch_dtype"),
    [
        ("fp64", torch.float64),
        ("fp32", torch.float32),
        ("float32", torch.float32),
        ("bf16", torch.bfloat16),
        ("fp16", torch.float16),
        ("fp8", torch.float8_e4m3fn),
        ("int8", torch.int8),
    ],
)
def test_dtype_bits_match_torch_element_size(name: str, torch_dtype: torch.dtype) -> None:
    # PyTorch is the oracle: element_size() is bytes per element of a real tensor
    assert dtype_bits(name) == torch.empty(3, dtype=torch_dtype).element_size() * 8
    assert dtype_bits(torch_dtype) == dtype_bits(name)


def test_dtype_bits_tf32_is_stored_in_32_bits() -> None:
    assert dtype_bits("tf32") == 32


def test_tensor_bytes_int4_packs_two_per_byte() -> None:
    assert tensor_bytes(8, "int4") == 4  # 8 · 4 bits = 32 bits = 4 bytes
    assert tensor_bytes(7, "int4") == 4  # 7 · 4 = 28 bits, rounded up to 32 bits = 4 bytes
    assert tensor_bytes(7_000_000_000, "int4") == 3_500_000_000  # a 7B model at 4 bits: 3.5 GB


def test_tensor_bytes_matches_torch_nbytes() -> None:
    x = torch.empty(5, 7, dtype=torch.bfloat16)
    assert tensor_bytes(x.numel(), x.dtype) == x.nbytes  # 35 · 2 = 70


def test_dtype_bits_unknown_raises() -> None:
    with pytest.raises(ValueError, match="unknown dtype 'fp12'"):
        dtype_bits("fp12")


@given(n=st.integers(min_value=0, max_value=10**12), dtype=st.sampled_from(list(DTYPE_BITS)))
def test_tensor_bytes_is_ceil_of_bits(n: int, dtype: str) -> None:
    n_bytes = tensor_bytes(n, dtype)
    assert 8 * n_bytes >= n * DTYPE_BITS[dtype] > 8 * (n_bytes - 1)


# --- recipes and model states -----------------------------------------------------------------

@pytest.mark.parametrize(
    ("recipe", "bytes_per_param"),
    [
        ("fp32-adamw", 16),  # weights 4 + grads 4 + m 4 + v 4
        ("bf16-mixed-adamw", 16),  # weights 2 + grads 2 + master 4 + m 4 + v 4
        ("fp16-mixed-adamw", 16),  # same as bf16
        ("bf16-mixed-adamw8bit", 10),  # weights 2 + grads 2 + master 4 + m 1 + v 1
        ("bf16-inference", 2),  # weights only
    ],
)
def test_model_states_bytes_per_param(recipe: str, bytes_per_param: int) -> None:
    assert model_states(1000, recipe).total_bytes == 1000 * bytes_per_param


def test_model_states_zero_paper_7_5b() -> None:
    # Rajbhandari et al. 2020, "ZeRO", sec. 3.1: mixed-precision Adam keeps 2Ψ + 2Ψ + KΨ bytes with
    # K = 12 (fp32 params, momentum, variance); "a 7.5B parameter model ... requires 120 GB".
    states = model_states(7_500_000_000, "fp16-mixed-adamw")
    assert states.total_bytes == 120_000_000_000  # 7.5e9 · (2 + 2 + 4 + 4 + 4) = 120e9
    assert states.optimizer_bytes + states.master_weights_bytes == 90_000_000_000  # K·Ψ = 12 · 7.5e9


def test_model_states_8bit_optimizer_state_is_2_bytes_per_param() -> None:
    # Dettmers et al. 2022: 8-bit Adam keeps m and v in 1 byte each instead of 4
    assert model_states(1000, "bf16-mixed-adamw8bit").optimizer_bytes == 2000  # 1000 · 2 · 1


def test_recipe_from_name_unknown_raises() -> None:
    with pytest.raises(ValueError, match="known recipes: fp32-adamw"):
        recipe_from_name("fp64-sgd")


def test_recipe_unknown_dtype_raises() -> None:
    with pytest.raises(ValueError, match="unknown dtype"):
        dataclasses.replace(RECIPES["fp32-adamw"], weight_dtype="fp13")


# --- activations (Korthikanti et al. 2022) ------------------------------------------------------

def test_activation_bytes_per_layer_korthikanti_example() -> None:
    # s = 1024, b = 8, h = 768, a = 12: sbh = 6,291,456 and as²b = 12 · 1024² · 8 = 100,663,296
    # 34 · sbh + 5 · as²b = 213,909,504 + 503,316,480 = 717,225,984
    assert activation_bytes_per_layer(1024, 8, 768, 12) == 717_225_984
    assert activation_bytes_per_layer(1024, 8, 768, 12, recompute="selective") == 213_909_504  # 34 · sbh
    assert activation_bytes_per_layer(1024, 8, 768, 12, recompute="full") == 12_582_912  # 2 · sbh


def test_activation_bytes_per_layer_fp32_is_exact() -> None:
    # 4-byte activations: 4 · (16sbh + 2as²b) + (2sbh + as²b) = 66sbh + 9as²b
    # = 66 · 6,291,456 + 9 · 100,663,296 = 415,236,096 + 905,969,664 = 1,321,205,760
    assert activation_bytes_per_layer(1024, 8, 768, 12, activation_dtype="fp32") == 1_321_205_760


@given(s=sizes, b=st.integers(1, 64), heads=st.integers(1, 64), head_dim=st.integers(1, 256))
def test_activation_bytes_per_layer_is_korthikanti_formula(s: int, b: int, heads: int, head_dim: int) -> None:
    h = heads * head_dim
    # sbh · (34 + 5as/h), written without division
    assert activation_bytes_per_layer(s, b, h, heads) == 34 * s * b * h + 5 * heads * s * s * b
    assert activation_bytes_per_layer(s, b, h, heads, recompute="selective") == 34 * s * b * h
    assert activation_bytes_per_layer(s, b, h, heads, recompute="full") == 2 * s * b * h


def test_activation_bytes_per_layer_unknown_recompute_raises() -> None:
    with pytest.raises(ValueError, match="unknown recompute"):
        activation_bytes_per_layer(8, 1, 64, 4, recompute="some")  # type: ignore[arg-type]


# --- training memory ----------------------------------------------------------------------------

def test_training_memory_gpt2_small_bf16_exact() -> None:
    mem = training_memory(GPT2_SMALL, "bf16-mixed-adamw", batch=8, seq_len=1024)
    n = 124_439_808  # GPT-2 small parameters (tied head counted once)
    assert mem.weights_bytes == 248_879_616  # 2n
    assert mem.gradients_bytes == 248_879_616  # 2n
    assert mem.optimizer_bytes == 995_518_464  # 8n: fp32 m and v
    assert mem.master_weights_bytes == 497_759_232  # 4n
    assert mem.activations_bytes == 8_606_711_808  # 12 layers · 717,225,984 (see the example above)
    assert mem.total_bytes == 16 * n + 8_606_711_808  # 1,991,036,928 + 8,606,711,808 = 10,597,748,736


def test_training_memory_selective_recompute_gpt2_small() -> None:
    mem = training_memory(GPT2_SMALL, "bf16-mixed-adamw", batch=8, seq_len=1024, recompute="selective")
    assert mem.activations_bytes == 2_566_914_048  # 12 · 34 · 1024 · 8 · 768


def test_training_memory_inference_stores_only_weights() -> None:
    mem = training_memory(LLAMA2_7B, "bf16-inference", batch=4, seq_len=4096)
    assert mem.as_dict() == {
        "weights_bytes": 13_476_831_232,  # 2 · 6,738,415,616
        "gradients_bytes": 0,
        "optimizer_bytes": 0,
        "master_weights_bytes": 0,
        "activations_bytes": 0,
        "total_bytes": 13_476_831_232,
    }


@settings(max_examples=50)
@given(cfg=models, recipe=recipes, batch=st.integers(1, 64), seq_len=sizes, recompute=recomputes)
def test_training_memory_total_is_sum_of_parts(
    cfg: ModelConfig, recipe: str, batch: int, seq_len: int, recompute: str
) -> None:
    mem = training_memory(cfg, recipe, batch, seq_len, recompute)  # type: ignore[arg-type]
    assert mem.total_bytes == sum(mem.parts().values())
    assert mem.as_dict()["total_bytes"] == mem.total_bytes
    assert mem.weights_bytes == tensor_bytes(n_params(cfg), RECIPES[recipe].weight_dtype)


@settings(max_examples=50)
@given(cfg=models, recipe=recipes, batch=st.integers(1, 64), k=st.integers(2, 8), seq_len=sizes, recompute=recomputes)
def test_training_memory_activations_linear_in_batch(
    cfg: ModelConfig, recipe: str, batch: int, k: int, seq_len: int, recompute: str
) -> None:
    one = training_memory(cfg, recipe, batch, seq_len, recompute)  # type: ignore[arg-type]
    many = training_memory(cfg, recipe, k * batch, seq_len, recompute)  # type: ignore[arg-type]
    assert many.activations_bytes == k * one.activations_bytes
    assert many.weights_bytes == one.weights_bytes  # model states do not depend on the batch


@settings(max_examples=50)
@given(cfg=models, batch=st.integers(1, 16), seq_len=sizes)
def test_training_memory_recompute_never_increases_activations(cfg: ModelConfig, batch: int, seq_len: int) -> None:
    none, selective, full = (
        training_memory(cfg, "bf16-mixed-adamw", batch, seq_len, mode).activations_bytes  # type: ignore[arg-type]
        for mode in ("none", "selective", "full")
    )
    assert none > selective > full > 0


@pytest.mark.parametrize(("batch", "seq_len"), [(0, 8), (-1, 8), (1, 0), (1, -5)])
def test_training_memory_rejects_nonpositive_sizes(batch: int, seq_len: int) -> None:
    with pytest.raises(ValueError, match="must be a positive int"):
        training_memory(GPT2_SMALL, "fp32-adamw", batch, seq_len)


# --- KV cache -----------------------------------------------------------------------------------

def test_kv_cache_bytes_llama2_7b_published() -> None:
    # NVIDIA, "Mastering LLM Techniques: Inference Optimization" (2023): Llama 2 7B, 16-bit, batch 1,
    # 4096 tokens: 1 · 4096 · 2 · 32 · 4096 · 2 bytes ≈ 2 GB.
    # 2 (K, V) · 32 layers · 32 heads · 128 head_dim · 4096 tokens · 2 bytes = 2,147,483,648 = 2 GiB
    assert kv_cache_bytes(LLAMA2_7B, batch=1, seq_len=4096, dtype="fp16") == 2_147_483_648
    assert kv_cache_bytes_per_token(LLAMA2_7B, "fp16") == 524_288  # 2 · 32 · 32 · 128 · 2 = 0.5 MiB


def test_kv_cache_bytes_llama2_70b_gqa() -> None:
    # 8 KV heads instead of 64: 2 · 80 · 8 · 128 · 4096 · 2 = 1,342,177,280 bytes (1.25 GiB)
    assert kv_cache_bytes(LLAMA2_70B, batch=1, seq_len=4096, dtype="bf16") == 1_342_177_280


def test_kv_cache_bytes_matches_torch_tensors() -> None:
    # the cache as real tensors: per layer a K and a V of shape (B, n_kv_head, T, head_dim)
    cfg, batch, seq_len = GPT2_SMALL, 2, 16
    layer = [torch.empty(batch, cfg.n_kv_head, seq_len, cfg.head_dim, dtype=torch.float16) for _ in "kv"]
    assert kv_cache_bytes(cfg, batch, seq_len, "fp16") == cfg.n_layer * sum(t.nbytes for t in layer)


@given(cfg=models, batch=st.integers(1, 64), seq_len=sizes, dtype=st.sampled_from(list(DTYPE_BITS)))
def test_kv_cache_gqa_is_mha_times_kv_head_ratio(cfg: ModelConfig, batch: int, seq_len: int, dtype: str) -> None:
    mha = dataclasses.replace(cfg, n_kv_head=cfg.n_head)
    gqa_bytes, mha_bytes = kv_cache_bytes(cfg, batch, seq_len, dtype), kv_cache_bytes(mha, batch, seq_len, dtype)
    assert gqa_bytes * cfg.n_head == mha_bytes * cfg.n_kv_head  # GQA = MHA · n_kv_head / n_head


@given(cfg=models, batch=st.integers(1, 64), seq_len=sizes)
def test_kv_cache_bytes_is_per_token_times_tokens(cfg: ModelConfig, batch: int, seq_len: int) -> None:
    assert kv_cache_bytes(cfg, batch, seq_len, "bf16") == kv_cache_bytes_per_token(cfg, "bf16") * batch * seq_len


def test_kv_cache_bytes_rejects_zero_batch() -> None:
    with pytest.raises(ValueError, match="batch must be a positive int"):
        kv_cache_bytes(GPT2_SMALL, 0, 8, "fp16")


# --- memory hierarchy ---------------------------------------------------------------------------

def test_memory_hierarchy_every_tier_has_a_source() -> None:
    assert len({tier.name for tier in MEMORY_HIERARCHY}) == len(MEMORY_HIERARCHY)
    for tier in MEMORY_HIERARCHY:
        assert tier.source.startswith("https://"), tier.name
        assert tier.note, tier.name


def test_memory_hierarchy_gets_slower_down_the_table() -> None:
    bandwidths = [t.bandwidth_bytes_per_s for t in MEMORY_HIERARCHY if t.bandwidth_bytes_per_s is not None]
    latencies = [t.latency_cycles for t in MEMORY_HIERARCHY if t.latency_cycles is not None]
    assert bandwidths == sorted(bandwidths, reverse=True)
    assert latencies == sorted(latencies)


def test_memory_hierarchy_hbm_is_h100_datasheet() -> None:
    hbm = next(t for t in MEMORY_HIERARCHY if t.name.startswith("HBM"))
    assert hbm.bandwidth_bytes_per_s == 3.35e12  # H100 SXM datasheet: 3.35 TB/s


def test_memory_hierarchy_links_count_the_encoding() -> None:
    pcie = next(t for t in MEMORY_HIERARCHY if t.name.startswith("PCIe 5.0"))
    assert round(pcie.bandwidth_bytes_per_s / 1e9, 1) == 63.0  # 32 GT/s × 16 lanes / 8 × 128/130, per direction
    nvme = next(t for t in MEMORY_HIERARCHY if t.name.startswith("NVMe"))
    assert round(nvme.bandwidth_bytes_per_s / 1e9, 2) == 7.88  # 16 GT/s × 4 lanes / 8 × 128/130


# --- attention scores -----------------------------------------------------------------------------

def test_attention_scores_bytes_matches_a_materialized_tensor() -> None:
    q, k = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8)  # (B, nh, T, hs)
    scores = q @ k.transpose(-2, -1)  # (B, nh, 5, 7)
    assert attention_scores_bytes(2, 3, 5, 7, torch.float32) == scores.numel() * scores.element_size() == 840  # 2·3·5·7·4


def test_attention_scores_bytes_gpt2_small_layer() -> None:
    # one layer of GPT-2 small at T = 1024 in bf16: 12 heads of 1024 × 1024
    assert attention_scores_bytes(1, 12, 1024, 1024, "bf16") == 25_165_824  # 12·1024²·2 = 24 MiB


def test_attention_scores_bytes_rejects_zero_heads() -> None:
    with pytest.raises(ValueError, match="n_head"):
        attention_scores_bytes(1, 0, 8, 8, "fp32")


# --- Korthikanti's assumptions: eager vs fused attention, dropout or not (issue 6, item 8) --------------------

def test_activation_bytes_per_layer_fused_attention_stores_no_scores() -> None:
    # s = 1024, b = 8, h = 768, a = 12 (sbh = 6,291,456): a fused kernel keeps a fp32 log-sum-exp per row,
    # 4·a·s·b = 4 · 12 · 1024 · 8 = 393,216 bytes, instead of 5as²b = 503,316,480
    assert activation_bytes_per_layer(1024, 8, 768, 12, attention="fused") == 213_909_504 + 393_216  # 34sbh + 4asb
    assert activation_bytes_per_layer(1024, 8, 768, 12, attention="fused", dropout=False) == 201_326_592 + 393_216


def test_activation_bytes_per_layer_without_dropout() -> None:
    # no masks and one stored softmax output: 2 · (16sbh + as²b) = 32sbh + 2as²b
    assert activation_bytes_per_layer(1024, 8, 768, 12, dropout=False) == 32 * 6_291_456 + 2 * 100_663_296
    assert activation_bytes_per_layer(1024, 8, 768, 12, recompute="selective", dropout=False) == 32 * 6_291_456


@given(s=sizes, b=st.integers(1, 16), heads=st.integers(1, 32), head_dim=st.integers(1, 128), dropout=st.booleans())
def test_activation_bytes_per_layer_fused_ignores_selective(s: int, b: int, heads: int, head_dim: int,
                                                            dropout: bool) -> None:
    h = heads * head_dim
    fused = [activation_bytes_per_layer(s, b, h, heads, attention="fused", dropout=dropout, recompute=mode)
             for mode in ("none", "selective")]
    assert fused[0] == fused[1]  # the kernel already recomputes the attention core
    eager = activation_bytes_per_layer(s, b, h, heads, dropout=dropout)
    assert eager > fused[0] or s <= 2  # without dropout 2as²b > 4asb only from s = 3 on


def test_training_memory_llama_has_no_dropout_by_default() -> None:
    mem = training_memory(LLAMA2_7B, "bf16-mixed-adamw", batch=1, seq_len=4096)
    per_layer = activation_bytes_per_layer(4096, 1, 4096, 32, dropout=False)  # 32sbh + 2as²b
    assert mem.activations_bytes == 32 * per_layer == 51_539_607_552  # 32 · (32 · 16,777,216 + 2 · 536,870,912)


def test_recipe_bf16_autocast_keeps_fp32_states() -> None:
    recipe = RECIPES["bf16-autocast-adamw"]
    assert model_states(1000, recipe).total_bytes == 16_000  # 4 + 4 + 4 + 4 per parameter: the fp32 model is the master
    assert (recipe.weight_copy_dtype, recipe.activation_dtype, recipe.master_dtype) == ("bf16", "bf16", None)


# --- ZeRO (Rajbhandari et al. 2020, Figure 1) --------------------------------------------------------------

def test_zero_partition_paper_figure_1() -> None:
    from lecturelib.memory import zero_partition

    states = model_states(7_500_000_000, "fp16-mixed-adamw")  # Ψ = 7.5B, K = 12
    per_gpu = [zero_partition(states, stage, 64).total_bytes for stage in (0, 1, 2, 3)]
    # (2 + 2 + 12)Ψ, (2 + 2)Ψ + 12Ψ/64, 2Ψ + 14Ψ/64, 16Ψ/64: Figure 1's 120, 31.4, 16.6 and 1.9 GB
    assert per_gpu == [120_000_000_000, 31_406_250_000, 16_640_625_000, 1_875_000_000]


@given(cfg=models, recipe=st.sampled_from(["fp32-adamw", "bf16-mixed-adamw", "bf16-mixed-adamw8bit"]),
       gpus=st.integers(1, 1024))
def test_zero_partition_never_grows_and_keeps_activations(cfg: ModelConfig, recipe: str, gpus: int) -> None:
    from lecturelib.memory import zero_partition

    mem = training_memory(cfg, recipe, 2, 64)
    totals = [zero_partition(mem, stage, gpus).total_bytes for stage in (0, 1, 2, 3)]
    assert totals == sorted(totals, reverse=True)
    assert all(zero_partition(mem, stage, gpus).activations_bytes == mem.activations_bytes for stage in (1, 2, 3))
    assert zero_partition(mem, 3, 1) == mem  # one GPU: nothing to share


@pytest.mark.parametrize(("stage", "gpus"), [(4, 8), (-1, 8), (1, 0)])
def test_zero_partition_rejects_bad_input(stage: int, gpus: int) -> None:
    from lecturelib.memory import zero_partition

    with pytest.raises(ValueError):
        zero_partition(model_states(100, "fp32-adamw"), stage, gpus)
