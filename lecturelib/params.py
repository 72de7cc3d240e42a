"""Parameter counts of a ModelConfig: a breakdown by part, the total, and Kaplan's non-embedding count."""

from __future__ import annotations

from lecturelib.configs import ModelConfig


def linear_params(d_in: int, d_out: int, *, bias: bool) -> int:
    """Parameters of nn.Linear(d_in, d_out): the (d_out, d_in) weight, plus d_out biases if bias."""
    return d_in * d_out + (d_out if bias else 0)


def norm_params(cfg: ModelConfig) -> int:
    """Parameters of one normalization layer: LayerNorm weight and bias (gpt2), RMSNorm weight (llama)."""
    return 2 * cfg.d_model if cfg.arch == "gpt2" else cfg.d_model


def attention_params(cfg: ModelConfig) -> int:
    """Parameters of one attention layer: q, k, v and output projections (k, v narrower under GQA)."""
    bias = cfg.arch == "gpt2"
    q = linear_params(cfg.d_model, cfg.d_model, bias=bias)  # n_head * head_dim == d_model
    kv = 2 * linear_params(cfg.d_model, cfg.kv_dim, bias=bias)
    out = linear_params(cfg.d_model, cfg.d_model, bias=bias)
    return q + kv + out


def mlp_params(cfg: ModelConfig) -> int:
    """Parameters of one MLP: up and down (gpt2, GELU, biased) or gate, up and down (llama, SwiGLU)."""
    if cfg.arch == "gpt2":
        return linear_params(cfg.d_model, cfg.d_ff, bias=True) + linear_params(cfg.d_ff, cfg.d_model, bias=True)
    return 2 * linear_params(cfg.d_model, cfg.d_ff, bias=False) + linear_params(cfg.d_ff, cfg.d_model, bias=False)


def param_breakdown(cfg: ModelConfig) -> dict[str, int]:
    """Parameters by part, summed over layers; "total" is the sum of the parts (tied weights once)."""
    parts = {
        "token_embedding": cfg.vocab_size * cfg.d_model,
        # GPT-2 learns one vector per position; Llama's RoPE has no parameters
        "position_embedding": cfg.n_ctx * cfg.d_model if cfg.arch == "gpt2" else 0,
        "attention": cfg.n_layer * attention_params(cfg),
        "mlp": cfg.n_layer * mlp_params(cfg),
        # two norms per block (before attention, before the MLP) and a final one
        "norms": (2 * cfg.n_layer + 1) * norm_params(cfg),
        # GPT-2's head is the token embedding matrix, already counted above
        "lm_head": 0 if cfg.tied_embeddings else linear_params(cfg.d_model, cfg.vocab_size, bias=False),
    }
    return {**parts, "total": sum(parts.values())}


def n_params(cfg: ModelConfig) -> int:
    """Total parameters, as sum(p.numel() for p in model.parameters()) counts them (tied once)."""
    return param_breakdown(cfg)["total"]


def non_embedding_params(cfg: ModelConfig) -> int:
    """All parameters except the token and position embeddings (an untied LM head stays in: see kaplan_params)."""
    parts = param_breakdown(cfg)
    return parts["total"] - parts["token_embedding"] - parts["position_embedding"]


def kaplan_params(cfg: ModelConfig) -> int:
    """Kaplan et al. 2020's N: non-embedding parameters without any LM head (Table 1: the de-embedding is not in N)."""
    # Kaplan Sec. 1.3 leaves "all vocabulary and positional embeddings" out of N, and Table 1 lists the
    # de-embedding with no parameters of N. GPT-2's tied head is the token embedding (lm_head is 0);
    # Llama's untied (vocab, d_model) head is a vocabulary matrix too, so it is left out here.
    # Kaplan's N ≈ 12·n_layer·d_model² (Sec. 2.1, Eq. 2.1) also drops biases and norm weights ("biases and
    # other sub-leading terms"); this count keeps them: 85,056,000 for GPT-2 small against 12·12·768² = 84,934,656.
    return non_embedding_params(cfg) - param_breakdown(cfg)["lm_head"]
