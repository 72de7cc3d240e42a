"""Tests of lecturelib.inference: the decode and prefill roofline, the critical batch, serving, and the timed workloads."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lecturelib import hardware, inference
from lecturelib.configs import ModelConfig, from_name
from lecturelib.counter import count_flops
from lecturelib.inference import (
    LLAMA_3_2_1B,
    SERVING_DEVICES,
    WEIGHT_BYTES_PER_PARAM,
    critical_batch,
    critical_batch_with_kv,
    decode_bound,
    decode_read_params,
    decode_seconds,
    decode_step_flops,
    decode_step_fn,
    max_batch,
    prefill_fn,
    prefill_seconds,
    serve,
    stored_params,
)
from lecturelib.memory import kv_cache_bytes
from lecturelib.models import GPT
from lecturelib.params import n_params
from lecturelib.quant import quantized_weight_bytes

H100_BF16 = hardware.peak_flop_per_s("h100-sxm", "bf16")  # 989.5e12
H100_BW = hardware.peak_bytes_per_s("h100-sxm")  # 3.35e12
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

GPT2_TOY = ModelConfig(name="toy", arch="gpt2", n_layer=2, n_head=4, n_kv_head=4, d_model=32, d_ff=128, vocab_size=50,
                       n_ctx=64)
LLAMA_GQA_TOY = ModelConfig(name="toy-gqa", arch="llama", n_layer=2, n_head=4, n_kv_head=2, d_model=32, d_ff=96,
                            vocab_size=50, n_ctx=64)


# --- what a step reads and computes ------------------------------------------------------------------------


def test_decode_read_params_leaves_out_the_tables_a_step_only_indexes() -> None:
    small = from_name("gpt2-small")
    assert decode_read_params(small) == n_params(small) - 1024 * 768  # the tied head is read; the positions are not
    llama = from_name("llama2-7b")
    assert decode_read_params(llama) == n_params(llama) - 32000 * 4096  # the untied embedding: one row per token


@pytest.mark.parametrize("cfg", [GPT2_TOY, LLAMA_GQA_TOY], ids=lambda c: c.name)
def test_decode_read_params_matches_the_parameters_pytorch_holds(cfg: ModelConfig) -> None:
    model = GPT(cfg)
    skipped = {"position_embedding.weight"} | (set() if cfg.tied_embeddings else {"token_embedding.weight"})
    read = sum(p.numel() for name, p in model.named_parameters() if name not in skipped)  # a tied matrix once
    assert decode_read_params(cfg) == read


def test_llama_3_2_1b_has_its_published_parameter_count() -> None:
    # embedding 128,256 · 2,048 + 16 layers · (q 2048² + k, v 2 · 2048 · 512 + o 2048² + MLP 3 · 2048 · 8192)
    # + 33 RMSNorm weights of 2,048 = 262,668,288 + 973,078,528 + 67,584 (HF model card: 1.24B)
    assert stored_params(LLAMA_3_2_1B, tied_embeddings=True) == 1_235_814_400
    assert decode_read_params(LLAMA_3_2_1B, tied_embeddings=True) == 1_235_814_400  # the head is the embedding
    assert stored_params(LLAMA_3_2_1B) == 1_235_814_400 + 128256 * 2048  # untied by default, as the arch says


@pytest.mark.parametrize("cfg", [GPT2_TOY, LLAMA_GQA_TOY], ids=lambda c: c.name)
@pytest.mark.parametrize(("batch", "context"), [(1, 1), (1, 17), (3, 40)])
def test_decode_step_flops_is_what_flop_counter_mode_counts(cfg: ModelConfig, batch: int, context: int) -> None:
    torch.manual_seed(0)
    step = decode_step_fn(GPT(cfg).eval(), batch, context)
    assert count_flops(step).total == decode_step_flops(cfg, batch, context)


def test_decode_step_flops_grow_by_the_attention_per_cached_position() -> None:
    cfg = from_name("llama2-7b")
    # one more cached position: q·k and p·v of one more key, 2 · 2 · n_head · head_dim per layer and sequence
    assert decode_step_flops(cfg, 2, 101) - decode_step_flops(cfg, 2, 100) == 2 * 32 * 4 * 32 * 128


def test_decode_step_fn_returns_logits_of_the_new_tokens() -> None:
    out = decode_step_fn(GPT(LLAMA_GQA_TOY), 3, 5)()
    assert out.shape == (3, 1, LLAMA_GQA_TOY.vocab_size) and not out.requires_grad


def test_prefill_fn_runs_the_whole_prompts() -> None:
    out = prefill_fn(GPT(GPT2_TOY), 2, 7)()
    assert out.shape == (2, 7, GPT2_TOY.vocab_size)


def test_workloads_reject_empty_sizes() -> None:
    with pytest.raises(ValueError):
        decode_step_fn(GPT(GPT2_TOY), 0, 4)
    with pytest.raises(ValueError):
        prefill_fn(GPT(GPT2_TOY), 1, 0)


def test_weight_bytes_of_counts_a_tied_matrix_once() -> None:
    assert inference.weight_bytes_of(GPT(GPT2_TOY)) == 4 * n_params(GPT2_TOY)


def test_step_read_bytes_is_weights_plus_kv_cache() -> None:
    cfg = from_name("llama2-7b")
    assert inference.step_read_bytes(cfg, 2, 100, "bf16") == 2 * decode_read_params(cfg) + kv_cache_bytes(cfg, 2, 100, "bf16")


# --- the roofline of a decode step -------------------------------------------------------------------------


def test_decode_seconds_batch_1_reads_the_weights() -> None:
    # 7e9 weights · 2 bytes / 3.35e12 B/s = 4.179 ms; compute 2 · 7e9 / 989.5e12 = 14 µs
    assert decode_seconds(7 * 10**9, 2, 0, 1, H100_BF16, H100_BW) == pytest.approx(14e9 / 3.35e12, rel=1e-12)


def test_decode_seconds_large_batch_is_compute_bound() -> None:
    # batch 512: 2 · 7e9 · 512 / 989.5e12 = 7.244 ms > 4.179 ms of weights
    assert decode_seconds(7 * 10**9, 2, 0, 512, H100_BF16, H100_BW) == pytest.approx(2 * 7e9 * 512 / 989.5e12, rel=1e-12)
    assert decode_bound(7 * 10**9, 2, 0, 512, H100_BF16, H100_BW) == "compute"
    assert decode_bound(7 * 10**9, 2, 0, 1, H100_BF16, H100_BW) == "memory"


def test_decode_seconds_adds_the_kv_cache_to_the_bytes() -> None:
    kv = 10**9
    assert decode_seconds(1000, 2, kv, 1, 1e12, 1e9) == pytest.approx((2000 + kv) / 1e9)


@given(st.integers(1, 10**11), st.sampled_from([0.5, 1.0, 2.0, 4.0]), st.integers(0, 10**11), st.integers(1, 4096))
def test_decode_seconds_is_the_larger_roof_and_grows_with_batch_and_kv(n: int, b: float, kv: int, batch: int) -> None:
    t = decode_seconds(n, b, kv, batch, H100_BF16, H100_BW)
    assert t == max(2 * n * batch / H100_BF16, (n * b + kv) / H100_BW)
    assert decode_seconds(n, b, kv, batch + 1, H100_BF16, H100_BW) >= t
    assert decode_seconds(n, b, kv + 1, batch, H100_BF16, H100_BW) >= t


@pytest.mark.parametrize("bad", [dict(n_params=0), dict(batch=0), dict(kv_bytes=-1), dict(peak_flop_per_s=0.0),
                                 dict(peak_bytes_per_s=math.inf), dict(bytes_per_param=0.0)])
def test_decode_seconds_rejects_bad_input(bad: dict[str, float]) -> None:
    args = dict(n_params=10, bytes_per_param=2.0, kv_bytes=0, batch=1, peak_flop_per_s=1e12, peak_bytes_per_s=1e9)
    with pytest.raises(ValueError):
        decode_seconds(**{**args, **bad})  # type: ignore[arg-type]


def test_critical_batch_h100_bf16_is_about_300() -> None:
    # 989.5e12 · 2 / (2 · 3.35e12) = 295.37
    assert critical_batch(H100_BF16, H100_BW, 2) == pytest.approx(295.3731343283582, rel=1e-12)
    assert critical_batch(H100_BF16, H100_BW, 0.5) == pytest.approx(295.3731343283582 / 4, rel=1e-12)  # int4


@given(st.floats(1e9, 1e16), st.floats(1e8, 1e13), st.sampled_from([0.5, 1.0, 2.0, 4.0]))
def test_critical_batch_is_where_the_roofs_meet(peak: float, bandwidth: float, b: float) -> None:
    n = 10**9
    batch = critical_batch(peak, bandwidth, b)
    assert 2 * n * batch / peak == pytest.approx(n * b / bandwidth, rel=1e-9)


def test_critical_batch_with_kv_without_kv_is_critical_batch() -> None:
    assert critical_batch_with_kv(7 * 10**9, 2, 0, H100_BF16, H100_BW) == pytest.approx(critical_batch(H100_BF16, H100_BW, 2))


def test_critical_batch_with_kv_grows_then_becomes_infinite() -> None:
    llama = from_name("llama2-7b")
    n = decode_read_params(llama)
    short = critical_batch_with_kv(n, 2, kv_cache_bytes(llama, 1, 16, "bf16"), H100_BF16, H100_BW)
    assert critical_batch(H100_BF16, H100_BW, 2) < short < math.inf
    # 4,096 tokens: 2 GiB of cache per sequence takes 0.64 ms to read, its 2N FLOPs 13 µs: never compute-bound
    assert critical_batch_with_kv(n, 2, kv_cache_bytes(llama, 1, 4096, "bf16"), H100_BF16, H100_BW) == math.inf


@given(st.integers(10**6, 10**11), st.integers(0, 10**7))
def test_critical_batch_with_kv_is_where_the_roofs_meet(n: int, kv: int) -> None:
    batch = critical_batch_with_kv(n, 2, kv, H100_BF16, H100_BW)
    if math.isfinite(batch):
        assert 2 * n * batch / H100_BF16 == pytest.approx((2 * n + batch * kv) / H100_BW, rel=1e-9)
    else:
        assert kv / H100_BW >= 2 * n / H100_BF16


def test_max_batch_is_whole_sequences_beside_the_weights() -> None:
    # (80e9 − 13.48e9) // 2 GiB = 30
    assert max_batch(80 * 10**9, 13_476_831_232, 2**31) == 30
    assert max_batch(10, 20, 1) == 0  # the weights alone do not fit
    with pytest.raises(ValueError):
        max_batch(10, 1, 0)


def test_prefill_seconds_is_compute_bound_for_a_long_prompt() -> None:
    # 4,096 tokens of a 7e9 model: 2 · 7e9 · 4096 / 989.5e12 = 57.95 ms against 4.2 ms of weights
    assert prefill_seconds(7 * 10**9, 2, 4096, H100_BF16, H100_BW) == pytest.approx(2 * 7e9 * 4096 / H100_BF16)
    assert prefill_seconds(7 * 10**9, 2, 1, H100_BF16, H100_BW) == pytest.approx(14e9 / H100_BW)


# --- devices and the serving account ----------------------------------------------------------------------


def test_weight_formats_match_the_quantization_notebook() -> None:
    n = 6_738_415_616  # Llama-2-7B; int4 and int8 with one fp16 scale per group of 128
    assert WEIGHT_BYTES_PER_PARAM["int4"] * n == quantized_weight_bytes(n, 4, 128, 2)
    assert WEIGHT_BYTES_PER_PARAM["int8"] * n == quantized_weight_bytes(n, 8, 128, 2)


def test_phone_bandwidth_is_four_16_bit_channels_at_4800_mhz() -> None:
    # 4 channels · 2 bytes · 4.8e9 clocks/s · 2 transfers per clock (DDR) = 76.8 GB/s
    assert SERVING_DEVICES["phone"].peak_bytes_per_s == 76.8e9
    assert SERVING_DEVICES["h100-sxm"].peak_bytes_per_s == H100_BW and SERVING_DEVICES["h100-sxm"].memory_bytes == 80 * 10**9


def test_serve_llama_7b_on_h100_batch_1() -> None:
    llama, h100 = from_name("llama2-7b"), SERVING_DEVICES["h100-sxm"]
    s = serve(llama, "bf16", "bf16", 1, 2048, 256, h100)
    n = decode_read_params(llama)
    # mean step: weights + the cache of 2,048 + 127.5 positions on average, read at 3.35 TB/s
    mean_kv = sum(kv_cache_bytes(llama, 1, 2048 + i, "bf16") for i in range(256)) / 256
    assert s.tpot_s == pytest.approx((2 * n + mean_kv) / H100_BW, rel=1e-9)
    assert s.tokens_per_s_per_user == s.tokens_per_s_total == pytest.approx(1 / s.tpot_s)
    assert (s.prefill_bound, s.decode_bound, s.fits, s.critical_batch) == ("compute", "memory", True, math.inf)
    assert s.weight_bytes == 2 * n_params(llama) and s.kv_bytes == kv_cache_bytes(llama, 1, 2304, "bf16")


def test_serve_batch_raises_throughput_and_memory() -> None:
    llama, h100 = from_name("llama2-7b"), SERVING_DEVICES["h100-sxm"]
    one = serve(llama, "bf16", "bf16", 1, 512, 64, h100)
    many = serve(llama, "bf16", "bf16", 64, 512, 64, h100)
    assert many.tokens_per_s_total > 10 * one.tokens_per_s_total and many.tpot_s > one.tpot_s
    assert not serve(llama, "bf16", "bf16", 64, 4096, 64, h100).fits  # 64 × 2.1 GB of cache


def test_serve_on_the_phone_needs_small_weights() -> None:
    llama, phone = from_name("llama2-7b"), SERVING_DEVICES["phone"]
    assert not serve(llama, "bf16", "bf16", 1, 512, 64, phone).fits  # 13.5 GB of weights, 12 GB of memory
    assert serve(llama, "int4", "bf16", 1, 512, 64, phone).fits
    distilled = serve(LLAMA_3_2_1B, "int4", "bf16", 1, 512, 64, phone, tied_embeddings=True)
    assert distilled.tokens_per_s_per_user > 4 * serve(llama, "int4", "bf16", 1, 512, 64, phone).tokens_per_s_per_user


def test_serve_rejects_bad_input() -> None:
    with pytest.raises(ValueError):
        serve(from_name("gpt2-small"), "int3", "bf16", 1, 8, 8, SERVING_DEVICES["l4"])
    with pytest.raises(ValueError):
        serve(from_name("gpt2-small"), "bf16", "bf16", 0, 8, 8, SERVING_DEVICES["l4"])


def test_explorer_models_include_the_distilled_model() -> None:
    names = inference.explorer_models()
    assert "llama2-7b" in names and LLAMA_3_2_1B.name in names
    assert inference.explorer_model(LLAMA_3_2_1B.name) == (LLAMA_3_2_1B, True)
    assert inference.explorer_model("gpt2-small") == (from_name("gpt2-small"), None)


def test_decode_roofs_are_decode_seconds_terms() -> None:
    llama, h100 = from_name("llama2-7b"), SERVING_DEVICES["h100-sxm"]
    compute, memory = inference.decode_roofs(llama, "int8", "fp8", 8, 1000, h100)
    n = decode_read_params(llama)
    assert max(compute, memory) == pytest.approx(
        decode_seconds(n, WEIGHT_BYTES_PER_PARAM["int8"], kv_cache_bytes(llama, 8, 1000, "fp8"), 8, H100_BF16, H100_BW))


def test_cuda_graphed_needs_cuda() -> None:
    if torch.cuda.is_available():
        pytest.skip("CUDA present: see test_cuda_graphed_replays_the_same_result")
    with pytest.raises(RuntimeError):
        inference.cuda_graphed(lambda: torch.zeros(1))


@needs_cuda
def test_cuda_graphed_replays_the_same_result() -> None:
    torch.manual_seed(0)
    model = GPT(dataclasses.replace(LLAMA_GQA_TOY)).cuda().eval()
    step = decode_step_fn(model, 2, 9)
    expected = step().clone()
    assert torch.allclose(inference.cuda_graphed(step)(), expected)
