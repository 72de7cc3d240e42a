"""Hypothesis strategies shared by the calculator tests: small ModelConfigs of both archs."""

from __future__ import annotations

from hypothesis import strategies as st

from lecturelib.configs import ModelConfig


@st.composite
def model_configs(draw: st.DrawFn) -> ModelConfig:
    """A small valid ModelConfig: gpt2 or llama, multi-head or grouped-query attention."""
    arch = draw(st.sampled_from(["gpt2", "llama"]))
    n_kv_head = draw(st.integers(1, 3))
    n_head = n_kv_head * draw(st.integers(1, 3))  # n_kv_head divides n_head
    head_dim = 2 * draw(st.integers(1, 4))  # even, as RoPE needs
    return ModelConfig(
        name="tiny",
        arch=arch,
        n_layer=draw(st.integers(1, 3)),
        n_head=n_head,
        n_kv_head=n_kv_head,
        d_model=n_head * head_dim,
        d_ff=draw(st.integers(1, 24)),
        vocab_size=draw(st.integers(1, 40)),
        n_ctx=draw(st.integers(1, 16)),
    )
