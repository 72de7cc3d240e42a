"""Model shapes: a frozen dataclass per transformer, the published configurations, and a JSON loader."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Literal

Arch = Literal["gpt2", "llama"]
ARCHS: tuple[str, ...] = ("gpt2", "llama")

# The integer fields of ModelConfig, each a size that must be a positive int.
SIZE_FIELDS: tuple[str, ...] = (
    "n_layer", "n_head", "n_kv_head", "d_model", "d_ff", "vocab_size", "n_ctx",
)


@dataclass(frozen=True)
class ModelConfig:
    """The sizes that fix a decoder-only transformer's parameters and FLOPs."""

    # a label, e.g. "gpt2-small"; from_json defaults it to the file's stem
    name: str
    # "gpt2": learned positions, LayerNorm with bias, GELU MLP (2 biased matrices), biased
    #         qkv/proj, LM head tied to the token embedding (Radford et al. 2019).
    # "llama": RoPE (no position parameters), RMSNorm (weight only), SwiGLU MLP (3 matrices),
    #          no biases, untied LM head (Touvron et al. 2023).
    arch: Arch
    # number of transformer blocks (HF: n_layer / num_hidden_layers)
    n_layer: int
    # number of query heads (HF: n_head / num_attention_heads)
    n_head: int
    # number of key/value heads: == n_head for multi-head attention, fewer for grouped-query
    # attention (HF: num_key_value_heads); from_json defaults it to n_head
    n_kv_head: int
    # residual stream width (HF: n_embd / hidden_size)
    d_model: int
    # hidden width of the MLP (GPT-2: 4 * d_model; HF: n_inner / intermediate_size)
    d_ff: int
    # number of tokens in the vocabulary (HF: vocab_size)
    vocab_size: int
    # context length: the longest sequence trained on, and the size of GPT-2's learned
    # position table (HF: n_positions / max_position_embeddings)
    n_ctx: int

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name must be a non-empty string, got {self.name!r}")
        if self.arch not in ARCHS:
            raise ValueError(f"arch must be one of {', '.join(map(repr, ARCHS))}, got {self.arch!r}")
        for field in SIZE_FIELDS:
            value = getattr(self, field)
            # bool is an int subclass, and 768.0 is not a size: both are rejected
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"{field} must be an int, got {value!r} ({type(value).__name__})")
            if value <= 0:
                raise ValueError(f"{field} must be positive, got {value}")
        if self.d_model % self.n_head != 0:
            raise ValueError(f"n_head ({self.n_head}) must divide d_model ({self.d_model})")
        if self.n_head % self.n_kv_head != 0:
            raise ValueError(f"n_kv_head ({self.n_kv_head}) must divide n_head ({self.n_head})")
        if self.arch == "llama" and self.head_dim % 2 != 0:
            # RoPE rotates pairs of channels within each head
            raise ValueError(f"llama arch needs an even head_dim (RoPE), got {self.head_dim}")

    @property
    def head_dim(self) -> int:
        """Channels per attention head (d_model // n_head)."""
        return self.d_model // self.n_head

    @property
    def kv_dim(self) -> int:
        """Width of the key (and of the value) projection: n_kv_head * head_dim."""
        return self.n_kv_head * self.head_dim

    @property
    def tied_embeddings(self) -> bool:
        """Whether the LM head reuses the token embedding matrix (GPT-2 yes, Llama no)."""
        return self.arch == "gpt2"


def _gpt2(name: str, n_layer: int, n_head: int, d_model: int) -> ModelConfig:
    """A GPT-2 size: the sizes shared by all four checkpoints are fixed here."""
    return ModelConfig(
        name=name,
        arch="gpt2",
        n_layer=n_layer,
        n_head=n_head,
        n_kv_head=n_head,  # GPT-2 is multi-head attention
        d_model=d_model,
        d_ff=4 * d_model,  # HF config n_inner=None means 4 * n_embd
        vocab_size=50257,  # Radford et al. 2019, Sec. 2.3; HF config vocab_size
        n_ctx=1024,  # Radford et al. 2019, Sec. 2.3; HF config n_positions
    )


MODELS: dict[str, ModelConfig] = {
    # layers, d_model: Radford et al. 2019, Table 2; heads: HF config.json of each checkpoint
    "gpt2-small": _gpt2("gpt2-small", n_layer=12, n_head=12, d_model=768),  # HF "gpt2"
    "gpt2-medium": _gpt2("gpt2-medium", n_layer=24, n_head=16, d_model=1024),  # HF "gpt2-medium"
    "gpt2-large": _gpt2("gpt2-large", n_layer=36, n_head=20, d_model=1280),  # HF "gpt2-large"
    "gpt2-xl": _gpt2("gpt2-xl", n_layer=48, n_head=25, d_model=1600),  # HF "gpt2-xl"
    # Touvron et al. 2023 (Llama 2), Table 1 (context 4k, GQA for 70B) and Sec. 2.2;
    # the sizes are HF meta-llama/Llama-2-7b-hf config.json
    "llama2-7b": ModelConfig(
        name="llama2-7b",
        arch="llama",
        n_layer=32,  # num_hidden_layers
        n_head=32,  # num_attention_heads
        n_kv_head=32,  # num_key_value_heads: 7B uses multi-head attention
        d_model=4096,  # hidden_size
        d_ff=11008,  # intermediate_size
        vocab_size=32000,  # vocab_size (Sec. 2.2: the Llama 1 tokenizer, 32k tokens)
        n_ctx=4096,  # max_position_embeddings (Table 1: context length 4k)
    ),
    # HF meta-llama/Llama-2-70b-hf config.json
    "llama2-70b": ModelConfig(
        name="llama2-70b",
        arch="llama",
        n_layer=80,  # num_hidden_layers
        n_head=64,  # num_attention_heads
        n_kv_head=8,  # num_key_value_heads: grouped-query attention, 8 query heads per KV head
        d_model=8192,  # hidden_size
        d_ff=28672,  # intermediate_size
        vocab_size=32000,  # vocab_size
        n_ctx=4096,  # max_position_embeddings
    ),
    # Not a published model: a GPT-2-shaped toy that trains in seconds on a laptop CPU
    # (lecturelib.training, notebook 08). 462,336 parameters.
    "gpt-tiny": ModelConfig(
        name="gpt-tiny",
        arch="gpt2",  # learned positions, LayerNorm, GELU MLP, tied LM head, as GPT-2
        n_layer=2,  # two blocks: attention can compose across layers, yet a step takes milliseconds
        n_head=4,  # 4 heads of head_dim 32
        n_kv_head=4,  # multi-head attention, as GPT-2
        d_model=128,  # residual width
        d_ff=512,  # 4 * d_model, as GPT-2
        vocab_size=256,  # byte-sized vocabulary: the embedding is 256 · 128 = 32,768 parameters
        n_ctx=256,  # longest sequence; the position table is 256 · 128 = 32,768 parameters
    ),
}


def from_name(name: str) -> ModelConfig:
    """The published configuration called `name` (a key of MODELS)."""
    try:
        return MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None


def from_json(path: str | os.PathLike[str]) -> ModelConfig:
    """A custom shape from a JSON object with ModelConfig's fields (name, n_kv_head optional)."""
    with open(path, encoding="utf-8") as file:
        try:
            data = json.load(file)
        except json.JSONDecodeError as error:
            raise ValueError(f"{os.fspath(path)}: not valid JSON ({error})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{os.fspath(path)}: expected a JSON object, got {type(data).__name__}")
    fields = [field.name for field in dataclasses.fields(ModelConfig)]
    optional = {"name", "n_kv_head"}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(f"{os.fspath(path)}: unknown fields {unknown}; allowed fields: {fields}")
    missing = [field for field in fields if field not in data and field not in optional]
    if missing:
        raise ValueError(f"{os.fspath(path)}: missing fields {missing}")
    defaults = {"name": os.path.splitext(os.path.basename(path))[0], "n_kv_head": data.get("n_head")}
    try:
        return ModelConfig(**{**defaults, **data})
    except ValueError as error:
        raise ValueError(f"{os.fspath(path)}: {error}") from None
