"""Tests for lecturelib.params: published counts, and PyTorch's own count of models.GPT as the oracle."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from strategies import model_configs

from lecturelib.configs import MODELS, ModelConfig, from_name
from lecturelib.models import GPT
from lecturelib.params import kaplan_params, n_params, non_embedding_params, param_breakdown


def pytorch_param_count(cfg: ModelConfig) -> int:
    """The oracle: PyTorch's count of a GPT built on the meta device (no memory; tied weights once)."""
    with torch.device("meta"):
        model = GPT(cfg)
    return sum(p.numel() for p in model.parameters())


def test_n_params_gpt2_small_published() -> None:
    # sum(p.numel()) of HF transformers GPT2LMHeadModel "gpt2"; nanoGPT prints 123.65M = this − 1024·768 (wpe)
    assert n_params(from_name("gpt2-small")) == 124_439_808
    # Kaplan et al. 2020's N: 124,439,808 − 50,257·768 (token) − 1,024·768 (position) = 85,056,000
    assert non_embedding_params(from_name("gpt2-small")) == 85_056_000


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # HF transformers model.num_parameters() of the released checkpoints
        ("gpt2-medium", 354_823_168),
        ("gpt2-large", 774_030_080),
        ("gpt2-xl", 1_557_611_200),
        # meta-llama/Llama-2-7b-hf: 32·202,383,360 per block + 2·32,000·4,096 + 4,096 = 6,738,415,616
        ("llama2-7b", 6_738_415_616),
        # meta-llama/Llama-2-70b-hf: 80·855,654,400 per block + 2·32,000·8,192 + 8,192 = 68,976,648,192
        ("llama2-70b", 68_976_648_192),
    ],
)
def test_n_params_published(name: str, expected: int) -> None:
    assert n_params(MODELS[name]) == expected


def test_non_embedding_params_llama_keeps_untied_head() -> None:
    # Llama has no position embedding and an untied head: only the 32,000·4,096 token table is dropped
    assert non_embedding_params(from_name("llama2-7b")) == 6_738_415_616 - 32_000 * 4_096


def test_kaplan_params_leaves_out_any_lm_head() -> None:
    # GPT-2's head is tied (the token embedding): Kaplan's N is the non-embedding count
    assert kaplan_params(from_name("gpt2-small")) == 85_056_000
    # Llama's untied head is a vocabulary matrix too (Kaplan Table 1: de-embedding not in N)
    assert kaplan_params(from_name("llama2-7b")) == 6_738_415_616 - 2 * 32_000 * 4_096  # 6,476,271,616


@pytest.mark.parametrize("name", list(MODELS))
def test_n_params_matches_pytorch(name: str) -> None:
    assert n_params(MODELS[name]) == pytorch_param_count(MODELS[name])


@settings(max_examples=40, deadline=None)
@given(model_configs())
def test_n_params_matches_pytorch_custom(cfg: ModelConfig) -> None:
    assert n_params(cfg) == pytorch_param_count(cfg)


@settings(max_examples=40, deadline=None)
@given(model_configs())
def test_param_breakdown_parts_sum_to_total(cfg: ModelConfig) -> None:
    parts = param_breakdown(cfg)
    total = parts.pop("total")
    assert total == sum(parts.values())
    assert non_embedding_params(cfg) == total - parts["token_embedding"] - parts["position_embedding"]
    assert kaplan_params(cfg) == non_embedding_params(cfg) - parts["lm_head"]


def test_param_breakdown_gpt2_small_parts() -> None:
    assert param_breakdown(from_name("gpt2-small")) == {
        "token_embedding": 38_597_376,  # 50,257·768
        "position_embedding": 786_432,  # 1,024·768
        "attention": 28_348_416,  # 12·(768·2,304 + 2,304 + 768·768 + 768)
        "mlp": 56_669_184,  # 12·(768·3,072 + 3,072 + 3,072·768 + 768)
        "norms": 38_400,  # (2·12 + 1)·2·768
        "lm_head": 0,  # tied to the token embedding
        "total": 124_439_808,
    }
