"""Inference accounting: the roofline time of prefill and decode, the critical batch, serving memory, TTFT and TPOT."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, cast

import torch
import torch.nn.functional as F

from lecturelib import hardware
from lecturelib.configs import MODELS, ModelConfig, from_name
from lecturelib.flops import attention_scores_flops, attention_weighted_sum_flops, forward_flops
from lecturelib.memory import kv_cache_bytes, tensor_bytes
from lecturelib.models import GPT, Block
from lecturelib.params import n_params, param_breakdown

Bound = Literal["memory", "compute"]

# Bytes per parameter of the weight formats the explorer and notebook 10 price. int8 and int4 are weight-only
# formats (the matmul runs in bf16 after the weight is converted) with one fp16 scale per group of 128 weights:
# 8 + 16/128 and 4 + 16/128 bits (notebook 07, quant.quantized_weight_bytes).
WEIGHT_BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "int8": (8 + 16 / 128) / 8,
    "int4": (4 + 16 / 128) / 8,
}


def _check_rates(peak_flop_per_s: float, peak_bytes_per_s: float) -> None:
    for name, rate in (("peak_flop_per_s", peak_flop_per_s), ("peak_bytes_per_s", peak_bytes_per_s)):
        if not math.isfinite(rate) or rate <= 0:
            raise ValueError(f"{name} must be positive and finite, got {rate}")


def _check_model(n_params: int, bytes_per_param: float) -> None:
    if n_params <= 0 or not bytes_per_param > 0:
        raise ValueError(f"n_params and bytes_per_param must be positive, got {n_params} and {bytes_per_param}")


# ---------------------------------------------------------------------------------------------
# What one step reads and computes


def decode_read_params(cfg: ModelConfig, *, tied_embeddings: bool | None = None) -> int:
    """Parameters a decode step reads in full: all but the position table and an untied token embedding."""
    # A step looks up one row per new token in the token and position tables (negligible); every other
    # parameter (the matmul weights, biases, norms, and the LM head, which is the token embedding when tied)
    # is read once per step, whatever the batch. tied_embeddings overrides the arch's default (see stored_params).
    tied = cfg.tied_embeddings if tied_embeddings is None else tied_embeddings
    parts = param_breakdown(cfg)
    stored = n_params(cfg) - (parts["lm_head"] if tied else 0)  # a tied head is the embedding, counted once
    return stored - parts["position_embedding"] - (0 if tied else parts["token_embedding"])


def decode_step_flops(cfg: ModelConfig, batch: int, context: int) -> int:
    """FLOPs of one decode step: `batch` new tokens through every matmul, each attending to `context` positions."""
    # the matmuls of a one-token forward (FlopCounterMode's convention), with the attention of that forward
    # (one query over one key) replaced by one query over `context` cached keys
    if batch <= 0 or context <= 0:
        raise ValueError(f"batch and context must be positive, got {batch} and {context}")
    one_token = forward_flops(cfg, batch, 1)
    attention = (batch, cfg.n_head, 1)
    itself = attention_scores_flops(*attention, 1, cfg.head_dim) + attention_weighted_sum_flops(*attention, 1, cfg.head_dim)
    cached = (attention_scores_flops(*attention, context, cfg.head_dim)
              + attention_weighted_sum_flops(*attention, context, cfg.head_dim))
    return one_token + cfg.n_layer * (cached - itself)


# ---------------------------------------------------------------------------------------------
# The roofline of serving: prefill, decode, and the batch at which decode stops being memory-bound


def decode_seconds(n_params: int, bytes_per_param: float, kv_bytes: int, batch: int,
                   peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """Roofline time of one decode step of `batch` sequences: max(2·N·B / peak, (N·bytes + KV) / bandwidth)."""
    # every weight is read once for the whole batch (and reused by its B tokens); every sequence's KV cache
    # is read once (kv_bytes: the whole batch's); compute and memory traffic overlap
    _check_model(n_params, bytes_per_param)
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    if kv_bytes < 0 or batch <= 0:
        raise ValueError(f"kv_bytes must be >= 0 and batch positive, got {kv_bytes} and {batch}")
    compute_s = 2 * n_params * batch / peak_flop_per_s
    memory_s = (n_params * bytes_per_param + kv_bytes) / peak_bytes_per_s
    return max(compute_s, memory_s)


def decode_bound(n_params: int, bytes_per_param: float, kv_bytes: int, batch: int,
                 peak_flop_per_s: float, peak_bytes_per_s: float) -> Bound:
    """Which roof decode_seconds takes: "compute" where the FLOPs take at least as long as the bytes, else "memory"."""
    _check_model(n_params, bytes_per_param)
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    compute_s = 2 * n_params * batch / peak_flop_per_s
    memory_s = (n_params * bytes_per_param + kv_bytes) / peak_bytes_per_s
    return "compute" if compute_s >= memory_s else "memory"


def prefill_seconds(n_params: int, bytes_per_param: float, tokens: int, peak_flop_per_s: float,
                    peak_bytes_per_s: float, *, attention_flops: int = 0) -> float:
    """Roofline time of a prefill of `tokens` tokens (all sequences): max((2·N·tokens + attention) / peak, N·bytes / bandwidth)."""
    # the weights are read once for all the prompt's tokens: far above the ridge point, compute-bound;
    # writing the KV cache (tokens × its bytes per token) is left out: small next to the FLOPs
    _check_model(n_params, bytes_per_param)
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    if tokens <= 0 or attention_flops < 0:
        raise ValueError(f"tokens must be positive and attention_flops >= 0, got {tokens} and {attention_flops}")
    return max((2 * n_params * tokens + attention_flops) / peak_flop_per_s, n_params * bytes_per_param / peak_bytes_per_s)


def critical_batch(peak_flop_per_s: float, peak_bytes_per_s: float, bytes_per_param: float) -> float:
    """The batch at which decode's two roofs meet, KV cache ignored: peak · bytes_per_param / (2 · bandwidth)."""
    # 2·N·B / peak = N·bytes / bandwidth  ⇔  B = ridge point · bytes / 2 (2 FLOPs per weight per sequence)
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    if not bytes_per_param > 0:
        raise ValueError(f"bytes_per_param must be positive, got {bytes_per_param}")
    return peak_flop_per_s * bytes_per_param / (2 * peak_bytes_per_s)


def critical_batch_with_kv(n_params: int, bytes_per_param: float, kv_bytes_per_sequence: int,
                           peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """The batch at which decode turns compute-bound when each sequence adds its KV cache's bytes; inf if never."""
    # 2·N·B / P = (N·b + B·kv) / BW  ⇔  B · (2N/P − kv/BW) = N·b/BW: each sequence brings 2N FLOPs of
    # work but also kv bytes to read; once kv/BW ≥ 2N/P, a sequence adds more memory time than compute time
    _check_model(n_params, bytes_per_param)
    _check_rates(peak_flop_per_s, peak_bytes_per_s)
    if kv_bytes_per_sequence < 0:
        raise ValueError(f"kv_bytes_per_sequence must be >= 0, got {kv_bytes_per_sequence}")
    gain_s = 2 * n_params / peak_flop_per_s - kv_bytes_per_sequence / peak_bytes_per_s
    return n_params * bytes_per_param / peak_bytes_per_s / gain_s if gain_s > 0 else math.inf


def max_batch(memory_bytes: int, weight_bytes: int, kv_bytes_per_sequence: int) -> int:
    """Sequences whose KV caches fit beside the weights: floor((memory − weights) / KV per sequence), 0 if none."""
    # activations of a decode step (B × d_model numbers per layer) and the allocator's slack are left out
    if min(memory_bytes, weight_bytes) < 0 or kv_bytes_per_sequence <= 0:
        raise ValueError("memory_bytes and weight_bytes must be >= 0 and kv_bytes_per_sequence positive")
    return max(0, (memory_bytes - weight_bytes) // kv_bytes_per_sequence)


# ---------------------------------------------------------------------------------------------
# Devices a model is served on, and the account of one serving configuration


@dataclass(frozen=True)
class ServingDevice:
    """What bounds serving on one device: compute, memory bandwidth, memory capacity, board power."""

    name: str
    # the dense 16-bit matmul peak (weight-only int8/int4 weights are multiplied in 16 bits); the phone's is not one:
    # an NPU's "operations per second" of unstated precision (PHONE_NPU_OPS_PER_S), an order of magnitude only
    peak_flop_per_s: float
    peak_bytes_per_s: float  # memory bandwidth
    memory_bytes: int  # memory the weights and KV cache share
    power_w: float | None  # board power (TDP), the maximum, not the draw at a given load; None where none is published
    source: str  # where the figures come from


_GB = 10**9
# Samsung Galaxy S24 Ultra (launched 17 January 2024): 12 GB of LPDDR5X, Snapdragon 8 Gen 3 for Galaxy
_S24_ULTRA = "https://www.samsung.com/global/galaxy/galaxy-s24-ultra/specs/"
# Qualcomm, Snapdragon 8 Gen 3 (announced 24 October 2023): LPDDR5x up to 4,800 MHz; AnandTech's launch
# article of the same day ("Qualcomm Announces Snapdragon 8 Gen 3") lists its memory controller: 4 × 16-bit
# channels at 4,800 MHz, 76.8 GB/s
_SD8G3 = ("https://www.qualcomm.com/products/mobile/snapdragon/smartphones/snapdragon-8-series-mobile-platforms/"
          "snapdragon-8-gen-3-mobile-platform; AnandTech, 'Qualcomm Announces Snapdragon 8 Gen 3', 24 October 2023")
# Apple, "Apple unveils iPhone 15 Pro and iPhone 15 Pro Max" (12 September 2023): the A17 Pro's Neural Engine
# does "up to 35 trillion operations per second". Qualcomm publishes no such figure for the Snapdragon 8 Gen 3.
_A17_PRO = "https://www.apple.com/newsroom/2023/09/apple-unveils-iphone-15-pro-and-iphone-15-pro-max/"
PHONE_LPDDR5X_BYTES_PER_S = 4 * 16 // 8 * 4800e6 * 2  # 4 channels × 2 bytes × 4,800 MHz × 2 transfers per clock
# a phone NPU's order of magnitude (A17 Pro) in place of an unpublished figure: Apple states neither the precision nor
# the kind of its "operations", so it is no dense 16-bit FLOP/s peak; batch-1 decode does not depend on it
PHONE_NPU_OPS_PER_S = 35e12

SERVING_DEVICES: dict[str, ServingDevice] = {
    "h100-sxm": ServingDevice("H100 SXM 80 GB", hardware.peak_flop_per_s("h100-sxm", "bf16"),
                              hardware.peak_bytes_per_s("h100-sxm"), 80 * _GB, 700.0, hardware.PEAKS[("h100-sxm", "bf16")].source),
    "h200": ServingDevice("H200 SXM 141 GB", hardware.peak_flop_per_s("h200", "bf16"),
                          hardware.peak_bytes_per_s("h200"), 141 * _GB, 700.0, hardware.PEAKS[("h200", "bf16")].source),
    "a100-sxm-80gb": ServingDevice("A100 SXM 80 GB", hardware.peak_flop_per_s("a100-sxm-80gb", "bf16"),
                                   hardware.peak_bytes_per_s("a100-sxm-80gb"), 80 * _GB, 400.0,
                                   hardware.PEAKS[("a100-sxm-80gb", "bf16")].source),
    "l4": ServingDevice("L4 24 GB", hardware.peak_flop_per_s("l4", "bf16"), hardware.peak_bytes_per_s("l4"),
                        24 * _GB, 72.0, hardware.PEAKS[("l4", "bf16")].source),
    "phone": ServingDevice("phone: Snapdragon 8 Gen 3, 12 GB LPDDR5X", PHONE_NPU_OPS_PER_S, PHONE_LPDDR5X_BYTES_PER_S,
                           12 * _GB, None, f"{_S24_ULTRA}; {_SD8G3}; compute: {_A17_PRO}"),
}


# Meta's Llama 3.2 1B (25 September 2024), "pruned and distilled" from Llama 3.1 8B with the logits of Llama 3.1 8B
# and 70B as targets (https://ai.meta.com/blog/llama-3-2-connect-2024-vision-edge-mobile-devices/); shapes from the
# released config.json (https://huggingface.co/meta-llama/Llama-3.2-1B): its LM head is tied to the token
# embedding (tie_word_embeddings), which ModelConfig's "llama" arch does not assume: pass tied_embeddings=True.
LLAMA_3_2_1B = ModelConfig(
    name="llama3.2-1b",
    arch="llama",
    n_layer=16,  # num_hidden_layers
    n_head=32,  # num_attention_heads
    n_kv_head=8,  # num_key_value_heads: grouped-query attention, 4 query heads per KV head
    d_model=2048,  # hidden_size
    d_ff=8192,  # intermediate_size
    vocab_size=128256,  # vocab_size
    n_ctx=131072,  # max_position_embeddings
)


def stored_params(cfg: ModelConfig, *, tied_embeddings: bool | None = None) -> int:
    """Parameters as stored; tied_embeddings=True counts an untied arch's LM head once, with the embedding."""
    tied = cfg.tied_embeddings if tied_embeddings is None else tied_embeddings
    return n_params(cfg) - (param_breakdown(cfg)["lm_head"] if tied else 0)


def explorer_models() -> list[str]:
    """The models the serving explorer offers: the published configurations and Llama 3.2 1B."""
    return [name for name in MODELS if name != "gpt-tiny"] + [LLAMA_3_2_1B.name]


def explorer_model(name: str) -> tuple[ModelConfig, bool | None]:
    """A model of explorer_models() and its tied_embeddings argument (None: the arch's default)."""
    return (LLAMA_3_2_1B, True) if name == LLAMA_3_2_1B.name else (from_name(name), None)


@dataclass(frozen=True)
class Serving:
    """The roofline account of serving `batch` sequences: a prompt, then new tokens one step at a time."""

    ttft_s: float  # time to first token: the prefill of every prompt of the batch
    tpot_s: float  # time per output token: the mean decode step over the new tokens
    tokens_per_s_per_user: float  # 1 / tpot: what each sequence sees
    tokens_per_s_total: float  # batch / tpot: what the device delivers
    weight_bytes: int  # the weights as stored
    kv_bytes: int  # the whole batch's KV cache at the end of generation
    memory_bytes: int  # weights + KV cache
    fits: bool  # memory_bytes ≤ the device's memory
    prefill_bound: Bound  # the roof of the prefill
    decode_bound: Bound  # the roof of the last decode step (the longest context)
    critical_batch: float  # the batch at which decode turns compute-bound with this KV cache (inf: never)


def decode_roofs(cfg: ModelConfig, weight_dtype: str, kv_dtype: str, batch: int, context: int, device: ServingDevice,
                 *, tied_embeddings: bool | None = None) -> tuple[float, float]:
    """The two roofs of one decode step at `context` cached positions: (compute seconds, memory seconds)."""
    read = decode_read_params(cfg, tied_embeddings=tied_embeddings)
    bytes_per_param = WEIGHT_BYTES_PER_PARAM[weight_dtype]
    kv = kv_cache_bytes(cfg, batch, context, kv_dtype)
    return 2 * read * batch / device.peak_flop_per_s, (read * bytes_per_param + kv) / device.peak_bytes_per_s


def serve(cfg: ModelConfig, weight_dtype: str, kv_dtype: str, batch: int, prompt_tokens: int, new_tokens: int,
          device: ServingDevice, *, tied_embeddings: bool | None = None) -> Serving:
    """The roofline account of generating `new_tokens` after `prompt_tokens` for `batch` sequences on `device`."""
    if weight_dtype not in WEIGHT_BYTES_PER_PARAM:
        raise ValueError(f"unknown weight dtype {weight_dtype!r}; known: {', '.join(WEIGHT_BYTES_PER_PARAM)}")
    if min(batch, prompt_tokens, new_tokens) <= 0:
        raise ValueError(f"batch, prompt_tokens and new_tokens must be positive, got {batch}, {prompt_tokens}, {new_tokens}")
    bytes_per_param = WEIGHT_BYTES_PER_PARAM[weight_dtype]
    stored = stored_params(cfg, tied_embeddings=tied_embeddings)
    peak, bandwidth = device.peak_flop_per_s, device.peak_bytes_per_s
    read = decode_read_params(cfg, tied_embeddings=tied_embeddings)
    # prefill: the prompt's attention over itself (full matrix, as FlopCounterMode counts it)
    attention = cfg.n_layer * (attention_scores_flops(batch, cfg.n_head, prompt_tokens, prompt_tokens, cfg.head_dim)
                               + attention_weighted_sum_flops(batch, cfg.n_head, prompt_tokens, prompt_tokens, cfg.head_dim))
    ttft = prefill_seconds(read, bytes_per_param, batch * prompt_tokens, peak, bandwidth, attention_flops=attention)
    prefill_compute = (2 * read * batch * prompt_tokens + attention) / peak
    # decode: step i attends to the prompt and the i tokens generated before it (and its own key)
    steps = [decode_seconds(read, bytes_per_param, kv_cache_bytes(cfg, batch, prompt_tokens + i, kv_dtype), batch,
                            peak, bandwidth) for i in range(new_tokens)]
    tpot = sum(steps) / new_tokens
    weight_bytes = math.ceil(stored * bytes_per_param)
    kv_bytes = kv_cache_bytes(cfg, batch, prompt_tokens + new_tokens, kv_dtype)
    last_kv = kv_cache_bytes(cfg, batch, prompt_tokens + new_tokens - 1, kv_dtype)
    return Serving(
        ttft_s=ttft,
        tpot_s=tpot,
        tokens_per_s_per_user=1 / tpot,
        tokens_per_s_total=batch / tpot,
        weight_bytes=weight_bytes,
        kv_bytes=kv_bytes,
        memory_bytes=weight_bytes + kv_bytes,
        fits=weight_bytes + kv_bytes <= device.memory_bytes,
        prefill_bound="compute" if prefill_compute >= read * bytes_per_param / bandwidth else "memory",
        decode_bound=decode_bound(read, bytes_per_param, last_kv, batch, peak, bandwidth),
        critical_batch=critical_batch_with_kv(read, bytes_per_param,
                                              kv_cache_bytes(cfg, 1, prompt_tokens + new_tokens, kv_dtype), peak, bandwidth),
    )


# ---------------------------------------------------------------------------------------------
# Measuring: the work of one decode step and of a prefill, as no-argument callables for the timers


def decode_step_fn(model: GPT, batch: int, context: int) -> Callable[[], torch.Tensor]:
    """One decode step's work on `model`: `batch` new tokens through every layer, attending to `context` cached positions."""
    # What a generation loop with a KV cache does per step, minus its bookkeeping: every weight is used once
    # for the B new tokens, and each new query attends to a (B, n_kv_head, context, head_dim) key and value
    # cache per layer. The caches hold a constant (a dense kernel's time does not depend on the values), the
    # new keys and values are computed but not appended, and Llama's rotation of q and k is left out (a few
    # elementwise operations per token): timings at a fixed context, without a prefill first.
    cfg = model.cfg
    if batch <= 0 or context <= 0:
        raise ValueError(f"batch and context must be positive, got {batch} and {context}")
    weight = model.lm_head.weight
    device, dtype = weight.device, weight.dtype
    tokens = torch.arange(batch, device=device).remainder(cfg.vocab_size).view(batch, 1)  # (B, 1)
    shape = (batch, cfg.n_kv_head, context, cfg.head_dim)
    caches = [(torch.full(shape, 0.02, device=device, dtype=dtype), torch.full(shape, 0.02, device=device, dtype=dtype))
              for _ in range(cfg.n_layer)]
    position = torch.tensor([min(context, cfg.n_ctx - 1)], device=device)
    grouped = cfg.n_kv_head < cfg.n_head
    blocks = [cast(Block, block) for block in model.blocks]

    @torch.no_grad()
    def step() -> torch.Tensor:
        x = model.token_embedding(tokens)  # (B, 1, C)
        if model.position_embedding is not None:
            x = x + model.position_embedding(position)  # (1, C) broadcast
        for block, (k_cache, v_cache) in zip(blocks, caches):
            attention = block.attention
            h = block.norm_1(x)  # (B, 1, C)
            q = attention.q_proj(h).view(batch, 1, cfg.n_head, cfg.head_dim).transpose(1, 2)  # (B, nh, 1, hs)
            attention.k_proj(h), attention.v_proj(h)  # the new key and value (a real step appends them)
            # one query per sequence over every cached position: no mask needed
            y = F.scaled_dot_product_attention(q, k_cache, v_cache, enable_gqa=grouped)  # (B, nh, 1, hs)
            x = x + attention.out_proj(y.transpose(1, 2).reshape(batch, 1, cfg.d_model))
            x = x + block.mlp(block.norm_2(x))
        return model.lm_head(model.norm_f(x))  # (B, 1, vocab_size)

    return step


def prefill_fn(model: GPT, batch: int, prompt_tokens: int) -> Callable[[], torch.Tensor]:
    """A prefill's work on `model`: one forward pass over `batch` prompts of `prompt_tokens` tokens."""
    cfg = model.cfg
    if batch <= 0 or prompt_tokens <= 0:
        raise ValueError(f"batch and prompt_tokens must be positive, got {batch} and {prompt_tokens}")
    device = model.lm_head.weight.device
    tokens = torch.arange(batch * prompt_tokens, device=device).remainder(cfg.vocab_size).view(batch, prompt_tokens)

    @torch.no_grad()
    def forward() -> torch.Tensor:
        return model(tokens)  # (B, T, vocab_size); a server keeps only the last position's logits

    return forward


def cuda_graphed(fn: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
    """fn captured once into a CUDA graph: each call replays all its kernels with one launch (CUDA only)."""
    # An eager decode step launches a few dozen small kernels per layer; at batch 1 the CPU's launch time
    # (microseconds each) can exceed the GPU's work. A graph replays the recorded kernels on fixed buffers,
    # which a decode step of fixed shapes allows (the pattern of torch.cuda.graphs' documentation).
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA graphs need a CUDA device")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream: lazy initialization stays out of the graph
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn()

    def replay() -> torch.Tensor:
        graph.replay()
        return out

    return replay


def weight_bytes_of(model: torch.nn.Module) -> int:
    """Bytes of the distinct parameter storages of a model (a tied matrix once)."""
    storages = {p.untyped_storage().data_ptr(): p.untyped_storage().nbytes() for p in model.parameters()}
    return sum(storages.values())


def step_read_bytes(cfg: ModelConfig, batch: int, context: int, dtype: str | torch.dtype) -> int:
    """Bytes a decode step must read at least: its weights (decode_read_params) and the batch's KV cache."""
    return tensor_bytes(decode_read_params(cfg), dtype) + kv_cache_bytes(cfg, batch, context, dtype)
