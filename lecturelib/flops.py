"""FLOP formulas: pure functions over sizes that return an exact `int`.

Convention, unless a docstring says otherwise: one FLOP is one floating-point multiply or add, so a
multiply-add (MAC, FMA) counts 2. This is the convention of `torch.utils.flop_counter` and of
hardware peak figures; fvcore, thop and ptflops report MACs instead.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypeAlias, TypeVar, cast

from lecturelib.configs import ModelConfig
from lecturelib.params import kaplan_params, non_embedding_params

Formula = TypeVar("Formula", bound=Callable[..., int])
# A breakdown maps each part to a count or to a breakdown of its own; every "total" is a sum of parts.
Breakdown: TypeAlias = dict[str, "int | Breakdown"]

# The one registry: formula name (the function's name) -> formula.
FORMULAS: dict[str, Callable[..., int]] = {}


def register(formula: Formula) -> Formula:
    """Add `formula` to FORMULAS under its function name; a second formula of the same name is an error."""
    name = formula.__name__
    if name in FORMULAS:
        raise ValueError(f"duplicate registration of FLOP formula {name!r}")
    FORMULAS[name] = formula
    return formula


@register
def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of (m, k) @ (k, n): m·n outputs, each k multiplies and k adds (2·m·k·n)."""
    return 2 * m * k * n


@register
def matmul_flops_exact(m: int, k: int, n: int) -> int:
    """FLOPs of (m, k) @ (k, n) with no accumulator: k multiplies and k − 1 adds per output."""
    return m * n * (2 * k - 1)


@register
def linear_flops(input_shape: Sequence[int], d_out: int, *, count_bias: bool = False) -> int:
    """Forward FLOPs of nn.Linear on an input of any leading dims (bias adds only if count_bias)."""
    *leading, d_in = input_shape
    tokens = math.prod(leading)
    flops = matmul_flops(tokens, d_in, d_out)
    return flops + tokens * d_out if count_bias else flops


def _pair(value: int | Sequence[int]) -> tuple[int, int]:
    """(value, value) for an int, the two entries of a pair otherwise (nn.Conv2d's argument rule)."""
    if isinstance(value, int):
        return value, value
    first, second = value
    return first, second


@register
def conv2d_flops(
    input_shape: Sequence[int],
    out_channels: int,
    kernel_size: int | Sequence[int],
    *,
    stride: int | Sequence[int] = 1,
    padding: int | Sequence[int] | str = 0,
    dilation: int | Sequence[int] = 1,
    groups: int = 1,
) -> int:
    """Forward FLOPs of nn.Conv2d on (N, C, H, W) or (C, H, W), as FlopCounterMode counts it (bias not counted)."""
    *batch, in_channels, height, width = input_shape
    if len(batch) > 1:
        raise ValueError(f"conv2d input must be (N, C, H, W) or (C, H, W), got {tuple(input_shape)}")
    if in_channels % groups or out_channels % groups:
        raise ValueError(f"groups ({groups}) must divide in_channels ({in_channels}) and out_channels ({out_channels})")
    (k_h, k_w), (s_h, s_w), (d_h, d_w) = _pair(kernel_size), _pair(stride), _pair(dilation)
    if padding == "valid":
        padding = 0
    if padding == "same":
        if (s_h, s_w) != (1, 1):
            raise ValueError("padding='same' needs stride 1 (as in nn.Conv2d)")
        out_h, out_w = height, width
    elif isinstance(padding, str):
        raise ValueError(f"padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
    else:
        p_h, p_w = _pair(padding)
        # nn.Conv2d's output size: floor((H + 2p − d·(k − 1) − 1) / s) + 1
        out_h = (height + 2 * p_h - d_h * (k_h - 1) - 1) // s_h + 1
        out_w = (width + 2 * p_w - d_w * (k_w - 1) - 1) // s_w + 1
    if out_h <= 0 or out_w <= 0:
        raise ValueError(f"kernel larger than the padded input: output would be {out_h}x{out_w}")
    # im2col view: per group, (N·H_out·W_out, C_in/g·k_h·k_w) @ (C_in/g·k_h·k_w, C_out/g)
    positions = math.prod(batch) * out_h * out_w
    return groups * matmul_flops(positions, in_channels // groups * k_h * k_w, out_channels // groups)


# Softmax along the last dim. One FLOP per exp, add, subtract, divide and comparison. Per row of n
# elements the exact count is: naive  n exp + (n − 1) adds (the sum) + n divides             = 3n − 1;
#                               stable (n − 1) comparisons (the max) + n subtractions + naive = 5n − 2.
# The per-element convention rounds each reduction to one op per element: 3 (naive) and 5 (stable).
SOFTMAX_NAIVE_FLOPS_PER_ELEMENT = 3  # exp, sum, divide
SOFTMAX_STABLE_FLOPS_PER_ELEMENT = 5  # max, subtract the max, exp, sum, divide


@register
def softmax_flops(shape: Sequence[int], *, stable: bool = False) -> int:
    """FLOPs of softmax over a tensor of `shape`: 3 per element naive, 5 per element stable (max-subtracted)."""
    per_element = SOFTMAX_STABLE_FLOPS_PER_ELEMENT if stable else SOFTMAX_NAIVE_FLOPS_PER_ELEMENT
    return per_element * math.prod(shape)


def softmax_breakdown(shape: Sequence[int], *, stable: bool = False) -> Breakdown:
    """Exact operations of softmax over the last dim of `shape`, by kind: max, sub, exp, add, div, and total."""
    *leading, n = shape
    rows = math.prod(leading)
    reduce_ops = rows * max(n - 1, 0)  # combining n values takes n − 1 binary ops (none for an empty row)
    return with_total({
        "max": reduce_ops if stable else 0,  # comparisons for the row's max
        "sub": rows * n if stable else 0,  # x − max, before the exp
        "exp": rows * n,
        "add": reduce_ops,  # the row sum of the exps
        "div": rows * n,  # each exp divided by its row's sum
    })


@register
def softmax_flops_exact(shape: Sequence[int], *, stable: bool = False) -> int:
    """Exact FLOPs of softmax over the last dim: 3n − 1 per row of n naive, 5n − 2 stable."""
    return cast(int, softmax_breakdown(shape, stable=stable)["total"])


def causal_pairs(q_len: int, kv_len: int) -> int:
    """(query, key) pairs a causal mask keeps, bottom-right aligned: query i is position kv_len − q_len + i."""
    # query i sees keys 0 .. kv_len − q_len + i, i.e. max(0, kv_len − q_len + i + 1) keys: the queries are
    # the last q_len positions, as when decoding with a KV cache. (F.scaled_dot_product_attention's
    # is_causal aligns top-left instead; the two agree when q_len == kv_len.)
    offset = kv_len - q_len
    if offset >= 0:
        return q_len * offset + q_len * (q_len + 1) // 2  # q_len == kv_len == T: T(T + 1)/2
    return kv_len * (kv_len + 1) // 2  # the first q_len − kv_len queries see no key at all


def _attended_pairs(q_len: int, kv_len: int, causal: bool) -> int:
    """(query, key) pairs that get a score: all q_len·kv_len, or only the unmasked ones if causal."""
    return causal_pairs(q_len, kv_len) if causal else q_len * kv_len


@register
def attention_scores_flops(
    batch: int, n_head: int, q_len: int, kv_len: int, head_dim: int, *, causal: bool = False
) -> int:
    """FLOPs of Q K^T per head; causal=False counts the full matrix (FlopCounterMode), True only unmasked pairs."""
    # each scored pair is one dot product of length head_dim: a (pairs, hs) @ (hs, 1)
    return batch * n_head * matmul_flops(_attended_pairs(q_len, kv_len, causal), head_dim, 1)


@register
def attention_weighted_sum_flops(
    batch: int, n_head: int, q_len: int, kv_len: int, head_dim: int, *, causal: bool = False
) -> int:
    """FLOPs of P V per head; causal=False counts the full matrix (FlopCounterMode), True only unmasked pairs."""
    # each scored pair adds weight * value (head_dim multiply-adds) into its query's output
    return batch * n_head * matmul_flops(_attended_pairs(q_len, kv_len, causal), 1, head_dim)


def attention_core_breakdown(
    batch: int, n_head: int, q_len: int, kv_len: int, head_dim: int, *, causal: bool = False
) -> Breakdown:
    """FLOPs of softmax(Q K^T) V by step (projections excluded): scores, stable softmax, weighted sum, total."""
    # Korthikanti et al. 2022's "core attention". causal=True counts only the unmasked pairs, as a kernel
    # that skips masked blocks does; causal=False the full matrix, as FlopCounterMode does for both.
    args = (batch, n_head, q_len, kv_len, head_dim)
    scored = batch * n_head * _attended_pairs(q_len, kv_len, causal)  # elements of the score matrices
    return with_total({
        "scores": attention_scores_flops(*args, causal=causal),  # 2·head_dim per pair
        "softmax": softmax_flops((scored,), stable=True),  # 5 per pair: the per-element convention
        "weighted_sum": attention_weighted_sum_flops(*args, causal=causal),  # 2·head_dim per pair
    })


@register
def attention_core_flops(
    batch: int, n_head: int, q_len: int, kv_len: int, head_dim: int, *, causal: bool = False
) -> int:
    """Total of attention_core_breakdown: (4·head_dim + 5) FLOPs per scored (query, key) pair."""
    return cast(int, attention_core_breakdown(batch, n_head, q_len, kv_len, head_dim, causal=causal)["total"])


@register
def layernorm_flops(shape: Sequence[int], *, affine: bool = True) -> int:
    """FLOPs of LayerNorm over the last dim: 5 per element (mean, subtract, square, sum, times 1/σ), +2 if affine."""
    # the per-row work (divide by n, add ε, 1/sqrt) is a few FLOPs per row and is not counted
    per_element = 5 + (2 if affine else 0)  # affine: multiply by γ, add β
    return per_element * math.prod(shape)


@register
def rmsnorm_flops(shape: Sequence[int], *, affine: bool = True) -> int:
    """FLOPs of RMSNorm over the last dim: 3 per element (square, sum, scale by 1/rms), +1 if affine."""
    # as for layernorm_flops, the per-row 1/sqrt(mean + ε) is not counted
    per_element = 3 + (1 if affine else 0)  # affine: multiply by γ
    return per_element * math.prod(shape)


def with_total(parts: Mapping[str, int | Breakdown]) -> Breakdown:
    """`parts` plus "total": the sum of its counts and of its sub-breakdowns' totals."""
    total = sum(part if isinstance(part, int) else cast(int, part["total"]) for part in parts.values())
    return {**parts, "total": total}


def _check_sizes(cfg: ModelConfig, batch: int, seq_len: int) -> None:
    """Raise ValueError unless batch and seq_len are positive ints the model can run."""
    for name, value in (("batch", batch), ("seq_len", seq_len)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if cfg.arch == "gpt2" and seq_len > cfg.n_ctx:
        raise ValueError(f"seq_len {seq_len} exceeds {cfg.name}'s {cfg.n_ctx} learned positions")


def forward_breakdown(cfg: ModelConfig, batch: int, seq_len: int) -> Breakdown:
    """Forward FLOPs by part over all layers: every matmul, 2 per MAC, causal attention not halved (FlopCounterMode)."""
    _check_sizes(cfg, batch, seq_len)
    x = (batch, seq_len, cfg.d_model)  # the residual stream (B, T, C)
    attention_args = (batch, cfg.n_head, seq_len, seq_len, cfg.head_dim)
    attention = {
        "q_proj": linear_flops(x, cfg.d_model),
        # grouped-query attention: k and v are n_kv_head·head_dim wide, narrower than q
        "k_proj": linear_flops(x, cfg.kv_dim),
        "v_proj": linear_flops(x, cfg.kv_dim),
        # every query head scores every key: a shared k/v head is reused, not recomputed
        "scores": attention_scores_flops(*attention_args),
        "weighted_sum": attention_weighted_sum_flops(*attention_args),
        "out_proj": linear_flops(x, cfg.d_model),
    }
    hidden = (batch, seq_len, cfg.d_ff)
    mlp = {"up": linear_flops(x, cfg.d_ff), "down": linear_flops(hidden, cfg.d_model)}
    if cfg.arch == "llama":
        mlp = {"gate": linear_flops(x, cfg.d_ff), **mlp}  # SwiGLU's third matrix
    return with_total({
        "attention": with_total({part: cfg.n_layer * flops for part, flops in attention.items()}),
        "mlp": with_total({part: cfg.n_layer * flops for part, flops in mlp.items()}),
        "lm_head": linear_flops(x, cfg.vocab_size),
    })


def forward_flops(cfg: ModelConfig, batch: int, seq_len: int) -> int:
    """Total of forward_breakdown: FLOPs of every matmul in one forward over batch × seq_len tokens."""
    return cast(int, forward_breakdown(cfg, batch, seq_len)["total"])


def forward_flops_per_token(cfg: ModelConfig, seq_len: int) -> int:
    """forward_flops of one sequence divided by its seq_len tokens (exact: every part is a multiple of seq_len)."""
    return forward_flops(cfg, 1, seq_len) // seq_len


@register
def kaplan_forward_flops_per_token(cfg: ModelConfig, n_ctx: int) -> int:
    """Kaplan et al. 2020, Table 1: C_forward = 2N + 2·n_layer·n_ctx·d_model, N = kaplan_params (no LM head)."""
    # 2N: one multiply-add per weight of N. N leaves out every vocabulary matrix: the embedding, and the
    # de-embedding (LM head), tied (GPT-2) or not (Llama): Table 1 lists the de-embedding's 2·d_model·n_vocab
    # FLOPs but keeps them out of C_forward. N here is the exact count (biases and norm weights included),
    # not Table 1's 12·n_layer·d_model². 2·n_layer·n_ctx·d: Table 1's "Attention: Mask" row
    # (d_attn = d_model), half of the full-matrix scores + weighted sum (4·n_layer·n_ctx·d) that
    # forward_breakdown counts
    return 2 * kaplan_params(cfg) + 2 * cfg.n_layer * n_ctx * cfg.d_model


def matmul_params(cfg: ModelConfig) -> int:
    """N of the 6N rule, as nanoGPT's get_num_params(): non-embedding parameters plus the LM head's weights."""
    # an untied head (llama) is already non-embedding; a tied one (gpt2) is the token embedding
    tied_head = cfg.vocab_size * cfg.d_model if cfg.tied_embeddings else 0
    return non_embedding_params(cfg) + tied_head


@register
def train_flops_per_token(cfg: ModelConfig, seq_len: int) -> int:
    """Training FLOPs per token, 6N + 12·L·H·Q·T (PaLM, Chowdhery et al. 2022, App. B; nanoGPT estimate_mfu)."""
    # 6N: forward 2N, backward 4N (gradients for activations and for weights);
    # 12·L·H·Q·T: attention's two T-long matmuls per head (2·2·H·Q·T per layer forward), times 3
    n_layer, n_head, head_dim = cfg.n_layer, cfg.n_head, cfg.head_dim
    return 6 * matmul_params(cfg) + 12 * n_layer * n_head * head_dim * seq_len


# The parts of forward_split_per_token, in drawing order.
SPLIT_PARTS: tuple[str, ...] = ("attention_projections", "attention_scores", "mlp", "lm_head")


def forward_split_per_token(cfg: ModelConfig, seq_len: int) -> dict[str, int]:
    """Forward FLOPs per token of one seq_len sequence in four parts (SPLIT_PARTS) and their "total"."""
    # seq_len may exceed GPT-2's 1,024 learned positions: the FLOPs are those of the same model with a
    # longer position table (a lookup: it adds parameters, not FLOPs)
    cfg = dataclasses.replace(cfg, n_ctx=max(cfg.n_ctx, seq_len))
    parts = forward_breakdown(cfg, 1, seq_len)
    attention, mlp = cast(Breakdown, parts["attention"]), cast(Breakdown, parts["mlp"])
    projections = ("q_proj", "k_proj", "v_proj", "out_proj")  # d_model-wide matmuls: 8·d² per token per layer
    scores = ("scores", "weighted_sum")  # the two seq_len-long matmuls: 4·seq_len·d per token per layer
    split = {
        "attention_projections": sum(cast(int, attention[name]) for name in projections),
        "attention_scores": sum(cast(int, attention[name]) for name in scores),
        "mlp": cast(int, mlp["total"]),
        "lm_head": cast(int, parts["lm_head"]),
    }
    # every part is seq_len × its per-token count: the division is exact
    per_token = {name: flops // seq_len for name, flops in split.items()}
    return {**per_token, "total": sum(per_token.values())}
