"""Tests for lecturelib.models: shapes, causality, tied weights, grouped-query attention and RoPE."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given, settings
from strategies import model_configs

from lecturelib.configs import MODELS, ModelConfig
from lecturelib.models import GPT, rotary

TINY_GPT2 = ModelConfig(name="tiny-gpt2", arch="gpt2", n_layer=2, n_head=4, n_kv_head=4, d_model=16,
                        d_ff=64, vocab_size=50, n_ctx=12)
TINY_LLAMA = dataclasses.replace(TINY_GPT2, name="tiny-llama", arch="llama", n_kv_head=2, d_ff=40)


def tokens(cfg: ModelConfig, batch: int, seq_len: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(cfg.vocab_size, (batch, seq_len), generator=torch.Generator().manual_seed(seed))


@settings(max_examples=10, deadline=None)
@given(model_configs())
def test_gpt_logits_shape(cfg: ModelConfig) -> None:
    torch.manual_seed(0)
    logits = GPT(cfg)(tokens(cfg, 2, cfg.n_ctx))
    assert logits.shape == (2, cfg.n_ctx, cfg.vocab_size)


@pytest.mark.parametrize("cfg", [TINY_GPT2, TINY_LLAMA], ids=lambda cfg: cfg.name)
def test_gpt_causal(cfg: ModelConfig) -> None:
    torch.manual_seed(0)
    model = GPT(cfg).eval()
    idx = tokens(cfg, 1, 10)
    changed = idx.clone()
    changed[0, 6:] = (changed[0, 6:] + 1) % cfg.vocab_size  # change only the tokens from position 6 on
    with torch.no_grad():
        before, after = model(idx), model(changed)
    torch.testing.assert_close(before[:, :6], after[:, :6])
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_gpt_tied_weights() -> None:
    gpt2, llama = GPT(TINY_GPT2), GPT(TINY_LLAMA)
    assert gpt2.lm_head.weight is gpt2.token_embedding.weight
    assert llama.lm_head.weight is not llama.token_embedding.weight


def test_gpt_grouped_query_equals_repeated_heads() -> None:
    # GQA shares k/v head h // (n_head / n_kv_head) with query head h: an MHA model whose k/v weights
    # repeat each GQA head that many times computes the same logits
    torch.manual_seed(0)
    gqa = GPT(TINY_LLAMA).eval()
    mha = GPT(dataclasses.replace(TINY_LLAMA, n_kv_head=TINY_LLAMA.n_head)).eval()
    group, head_dim = TINY_LLAMA.n_head // TINY_LLAMA.n_kv_head, TINY_LLAMA.head_dim
    state = gqa.state_dict()
    for key, weight in state.items():
        if key.endswith(("k_proj.weight", "v_proj.weight")):  # (n_kv_head·hs, C)
            state[key] = weight.view(TINY_LLAMA.n_kv_head, head_dim, -1).repeat_interleave(group, dim=0).flatten(0, 1)
    mha.load_state_dict(state)
    idx = tokens(TINY_LLAMA, 2, 9)
    with torch.no_grad():
        torch.testing.assert_close(gqa(idx), mha(idx))


def test_gpt_sequence_beyond_context_raises() -> None:
    with pytest.raises(ValueError, match="exceeds n_ctx 12"):
        GPT(TINY_GPT2)(tokens(TINY_GPT2, 1, 13))


@pytest.mark.parametrize("name", ["gpt2-small", "llama2-70b"])
def test_gpt_meta_device_logits_shape(name: str) -> None:
    cfg = dataclasses.replace(MODELS[name], n_layer=2)  # full width, two blocks: the shapes are what is tested
    with torch.device("meta"):
        model = GPT(cfg)
        logits = model(torch.zeros(2, 8, dtype=torch.long))
    assert all(p.is_meta for p in model.parameters())
    assert logits.shape == (2, 8, cfg.vocab_size)


def test_rotary_scores_depend_on_offset_only() -> None:
    # the same q and k at every position: after RoPE, q_i · k_j depends only on i − j
    torch.manual_seed(0)
    q = rotary(torch.randn(1, 1, 1, 8).expand(1, 1, 6, 8))  # (B, nh, T, hs)
    k = rotary(torch.randn(1, 1, 1, 8).expand(1, 1, 6, 8))
    scores = (q @ k.transpose(-2, -1))[0, 0]  # (T, T)
    for offset in range(-5, 6):
        diagonal = scores.diagonal(offset)
        torch.testing.assert_close(diagonal, diagonal[:1].expand_as(diagonal))
    torch.testing.assert_close(q.norm(dim=-1), q[..., :1, :].norm(dim=-1).expand(1, 1, 6))  # a rotation


# --- eager attention and recomputation --------------------------------------------------------------------

@pytest.mark.parametrize("cfg", [TINY_GPT2, TINY_LLAMA], ids=lambda cfg: cfg.name)
def test_eager_attention_equals_sdpa(cfg: ModelConfig) -> None:
    # the textbook softmax(q kᵀ/√hs) v against PyTorch's fused kernel, GQA included (TINY_LLAMA: 2 KV heads)
    from lecturelib.models import eager_attention

    torch.manual_seed(0)
    q = torch.randn(2, cfg.n_head, 7, cfg.head_dim, dtype=torch.float64)
    k, v = (torch.randn(2, cfg.n_kv_head, 7, cfg.head_dim, dtype=torch.float64) for _ in "kv")
    fused = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, is_causal=True, enable_gqa=cfg.n_kv_head < cfg.n_head)
    torch.testing.assert_close(eager_attention(q, k, v), fused)


@pytest.mark.parametrize("cfg", [TINY_GPT2, TINY_LLAMA], ids=lambda cfg: cfg.name)
@pytest.mark.parametrize(("attention", "recompute"), [("eager", "none"), ("eager", "selective"),
                                                      ("sdpa", "full"), ("eager", "full")])
def test_gpt_attention_and_recompute_keep_logits_and_gradients(cfg: ModelConfig, attention: str, recompute: str) -> None:
    # recomputation changes what is stored, never what is computed
    idx = tokens(cfg, 2, 9)
    torch.manual_seed(0)
    reference = GPT(cfg).double()
    torch.manual_seed(0)
    other = GPT(cfg, attention=attention, recompute=recompute).double()  # type: ignore[arg-type]
    for model in (reference, other):
        model(idx).square().mean().backward()
    torch.testing.assert_close(other(idx), reference(idx))
    for (name, p), q in zip(reference.named_parameters(), other.parameters()):
        torch.testing.assert_close(q.grad, p.grad, msg=name)


def test_gpt_rejects_unknown_attention_and_recompute() -> None:
    with pytest.raises(ValueError, match="unknown attention 'flash'"):
        GPT(TINY_GPT2, attention="flash")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown recompute 'some'"):
        GPT(TINY_GPT2, recompute="some")  # type: ignore[arg-type]
