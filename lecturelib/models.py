"""A minimal GPT-2 / Llama 2 in plain PyTorch (random weights), built from a ModelConfig for measurements."""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

from lecturelib.configs import ModelConfig

# How attention is computed: "sdpa" calls F.scaled_dot_product_attention (a fused kernel: flash or
# memory-efficient on CUDA, a flash-style kernel on CPU) that never stores the (T, T) score matrix;
# "eager" is the textbook softmax(q kᵀ / √hs) v, which materializes it per head.
AttentionImpl = Literal["sdpa", "eager"]
ATTENTION_IMPLS: tuple[str, ...] = ("sdpa", "eager")
# What the backward pass recomputes instead of storing (Korthikanti et al. 2022, sec. 5): "none";
# "selective": the attention core (scores, softmax), i.e. only what is O(T²); "full": each whole block,
# from its input (torch.utils.checkpoint). With "sdpa", selective is what the kernel already does.
RecomputeMode = Literal["none", "selective", "full"]
RECOMPUTE_CHOICES: tuple[str, ...] = ("none", "selective", "full")

# LayerNorm epsilon: HF gpt2 config layer_norm_epsilon; RMSNorm epsilon: HF Llama-2 config rms_norm_eps
GPT2_NORM_EPS = 1e-5
LLAMA_NORM_EPS = 1e-5
# RoPE base frequency: Su et al. 2021, Sec. 3.4.2 (theta_i = 10000^(-2i/d)); HF Llama-2 rope_theta
ROPE_BASE = 10000.0


def norm(cfg: ModelConfig) -> nn.Module:
    """The block's normalization: LayerNorm with bias (gpt2) or RMSNorm, weight only (llama)."""
    if cfg.arch == "gpt2":
        return nn.LayerNorm(cfg.d_model, eps=GPT2_NORM_EPS)
    return nn.RMSNorm(cfg.d_model, eps=LLAMA_NORM_EPS)


def rotary(x: torch.Tensor) -> torch.Tensor:
    """Rotate each pair of channels (2i, 2i+1) of x (B, nh, T, hs) by angle t * theta_i (RoPE)."""
    _, _, seq_len, head_dim = x.shape
    theta = ROPE_BASE ** (-torch.arange(0, head_dim, 2, device=x.device, dtype=torch.float32) / head_dim)  # (hs/2,)
    angle = torch.outer(torch.arange(seq_len, device=x.device, dtype=torch.float32), theta)  # (T, hs/2)
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    even, odd = x[..., 0::2], x[..., 1::2]  # (B, nh, T, hs/2) each
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)  # (B, nh, T, hs/2, 2)
    return rotated.flatten(-2)  # (B, nh, T, hs)


def eager_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Causal softmax(q kᵀ / √hs) v, materializing the (B, nh, T, T) scores; k, v may have fewer heads (GQA)."""
    _, n_head, seq_len, head_dim = q.shape  # (B, nh, T, hs)
    if k.shape[1] != n_head:  # grouped-query attention: each k/v head serves n_head // n_kv_head queries
        k = k.repeat_interleave(n_head // k.shape[1], dim=1)  # (B, nh, T, hs), a copy
        v = v.repeat_interleave(n_head // v.shape[1], dim=1)
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(head_dim))  # (B, nh, T, T)
    future = torch.ones(seq_len, seq_len, dtype=torch.bool, device=q.device).triu(1)  # (T, T): True above the diagonal
    scores = scores.masked_fill(future, float("-inf"))
    # softmax in fp32 whatever the input dtype, then back (as Hugging Face's eager attention does): the
    # same on CPU and CUDA, where autocast's policies for softmax differ
    probs = torch.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)  # (B, nh, T, T)
    return probs @ v  # (B, nh, T, hs)


class Attention(nn.Module):
    """Causal self-attention; with n_kv_head < n_head, groups of query heads share a key/value head."""

    def __init__(self, cfg: ModelConfig, attention: AttentionImpl = "sdpa", recompute_core: bool = False) -> None:
        super().__init__()
        if attention not in ATTENTION_IMPLS:
            raise ValueError(f"unknown attention {attention!r}; known: {', '.join(ATTENTION_IMPLS)}")
        bias = cfg.arch == "gpt2"
        self.cfg = cfg
        self.attention = attention
        self.recompute_core = recompute_core  # eager only: recompute scores and softmax in backward
        self.q_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=bias)
        self.k_proj = nn.Linear(cfg.d_model, cfg.kv_dim, bias=bias)
        self.v_proj = nn.Linear(cfg.d_model, cfg.kv_dim, bias=bias)
        self.out_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        batch, seq_len, _ = x.shape  # (B, T, C)
        q = self.q_proj(x).view(batch, seq_len, cfg.n_head, cfg.head_dim).transpose(1, 2)  # (B, nh, T, hs)
        k = self.k_proj(x).view(batch, seq_len, cfg.n_kv_head, cfg.head_dim).transpose(1, 2)  # (B, nkv, T, hs)
        v = self.v_proj(x).view(batch, seq_len, cfg.n_kv_head, cfg.head_dim).transpose(1, 2)  # (B, nkv, T, hs)
        if cfg.arch == "llama":
            q, k = rotary(q), rotary(k)
        if self.attention == "sdpa":
            # softmax(q k^T / sqrt(hs)) v, causal; enable_gqa shares each k/v head among n_head // n_kv_head queries
            grouped = cfg.n_kv_head < cfg.n_head
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=grouped)  # (B, nh, T, hs)
        elif self.recompute_core and torch.is_grad_enabled():
            # store q, k, v only; the backward pass recomputes the (T, T) scores and probabilities
            y = torch.utils.checkpoint.checkpoint(eager_attention, q, k, v, use_reentrant=False)
        else:
            y = eager_attention(q, k, v)  # (B, nh, T, hs)
        y = y.transpose(1, 2).reshape(batch, seq_len, cfg.d_model)  # (B, T, C): heads side by side
        return self.out_proj(y)


class MLP(nn.Module):
    """Position-wise MLP: GELU(x W_up) W_down (gpt2) or (SiLU(x W_gate) * x W_up) W_down (llama)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        bias = cfg.arch == "gpt2"
        self.arch = cfg.arch
        self.up = nn.Linear(cfg.d_model, cfg.d_ff, bias=bias)
        self.down = nn.Linear(cfg.d_ff, cfg.d_model, bias=bias)
        if cfg.arch == "llama":
            self.gate = nn.Linear(cfg.d_model, cfg.d_ff, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.arch == "gpt2":
            return self.down(F.gelu(self.up(x), approximate="tanh"))  # GPT-2 uses the tanh GELU
        return self.down(F.silu(self.gate(x)) * self.up(x))  # (B, T, ff) -> (B, T, C)


class Block(nn.Module):
    """One pre-norm transformer block: x + attention(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: ModelConfig, attention: AttentionImpl = "sdpa", recompute_core: bool = False) -> None:
        super().__init__()
        self.norm_1 = norm(cfg)
        self.attention = Attention(cfg, attention, recompute_core)
        self.norm_2 = norm(cfg)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.norm_1(x))  # (B, T, C)
        return x + self.mlp(self.norm_2(x))  # (B, T, C)


class GPT(nn.Module):
    """Token ids (B, T) -> logits (B, T, vocab_size), for either arch of ModelConfig."""

    def __init__(
        self, cfg: ModelConfig, *, attention: AttentionImpl = "sdpa", recompute: RecomputeMode = "none"
    ) -> None:
        super().__init__()
        if recompute not in RECOMPUTE_CHOICES:
            raise ValueError(f"unknown recompute {recompute!r}; known: {', '.join(RECOMPUTE_CHOICES)}")
        self.cfg = cfg
        # "full": each block runs under torch.utils.checkpoint while training (only its input is stored)
        self.recompute = recompute
        self.token_embedding = nn.Embedding(cfg.vocab_size, cfg.d_model)
        # learned positions (gpt2) or none: RoPE rotates q and k inside attention (llama)
        self.position_embedding = nn.Embedding(cfg.n_ctx, cfg.d_model) if cfg.arch == "gpt2" else None
        self.blocks = nn.ModuleList(Block(cfg, attention, recompute == "selective") for _ in range(cfg.n_layer))
        self.norm_f = norm(cfg)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        if cfg.tied_embeddings:
            # one shared (vocab, C) matrix; parameters() yields it once
            self.lm_head.weight = self.token_embedding.weight
        self.apply(init_weights)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        _, seq_len = idx.shape  # (B, T)
        if seq_len > self.cfg.n_ctx and self.position_embedding is not None:
            raise ValueError(f"sequence length {seq_len} exceeds n_ctx {self.cfg.n_ctx}")
        x = self.token_embedding(idx)  # (B, T, C)
        if self.position_embedding is not None:
            x = x + self.position_embedding(torch.arange(seq_len, device=idx.device))  # (T, C) broadcast
        checkpointed = self.recompute == "full" and torch.is_grad_enabled()
        for block in self.blocks:
            if checkpointed:  # keep only x; backward reruns the block's forward, then its backward
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)  # (B, T, C)
            else:
                x = block(x)  # (B, T, C)
        return self.lm_head(self.norm_f(x))  # (B, T, vocab_size)


def init_weights(module: nn.Module) -> None:
    """GPT-2's initialization: N(0, 0.02) for linear and embedding weights, zero biases."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
