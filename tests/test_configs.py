"""Tests for lecturelib.configs: the published shapes and the JSON loader's validation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from lecturelib.configs import MODELS, ModelConfig, from_json, from_name


def write_json(tmp_path: Path, data: object, name: str = "custom.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_models_names_are_keys() -> None:
    assert {name: cfg.name for name, cfg in MODELS.items()} == {name: name for name in MODELS}
    assert set(MODELS) == {"gpt2-small", "gpt2-medium", "gpt2-large", "gpt2-xl", "llama2-7b", "llama2-70b", "gpt-tiny"}


def test_from_name_gpt2_small_fields() -> None:
    cfg = from_name("gpt2-small")
    assert (cfg.arch, cfg.n_layer, cfg.n_head, cfg.n_kv_head) == ("gpt2", 12, 12, 12)
    assert (cfg.d_model, cfg.d_ff, cfg.vocab_size, cfg.n_ctx) == (768, 3072, 50257, 1024)  # d_ff = 4 * 768
    assert cfg.head_dim == 64  # 768 / 12


def test_from_name_llama2_fields() -> None:
    llama_7b, llama_70b = from_name("llama2-7b"), from_name("llama2-70b")
    assert (llama_7b.n_layer, llama_7b.d_model, llama_7b.n_head, llama_7b.n_kv_head) == (32, 4096, 32, 32)
    assert (llama_7b.d_ff, llama_7b.vocab_size, llama_7b.n_ctx, llama_7b.head_dim) == (11008, 32000, 4096, 128)
    assert (llama_70b.n_layer, llama_70b.d_model, llama_70b.n_head, llama_70b.n_kv_head) == (80, 8192, 64, 8)
    assert (llama_70b.d_ff, llama_70b.head_dim, llama_70b.kv_dim) == (28672, 128, 1024)  # kv_dim = 8 * 128


def test_from_name_unknown_lists_known() -> None:
    with pytest.raises(ValueError, match="unknown model 'gpt5'.*gpt2-small.*llama2-70b"):
        from_name("gpt5")


def test_model_config_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        from_name("gpt2-small").n_layer = 1  # type: ignore[misc]


@pytest.mark.parametrize("name", list(MODELS))
def test_from_json_round_trip(tmp_path: Path, name: str) -> None:
    cfg = MODELS[name]
    assert from_json(write_json(tmp_path, dataclasses.asdict(cfg))) == cfg


def test_from_json_optional_fields_default(tmp_path: Path) -> None:
    data = {"arch": "llama", "n_layer": 2, "n_head": 4, "d_model": 32, "d_ff": 64, "vocab_size": 100, "n_ctx": 16}
    cfg = from_json(write_json(tmp_path, data, name="my-shape.json"))
    assert (cfg.name, cfg.n_kv_head) == ("my-shape", 4)  # the file's stem; multi-head attention


GOOD = {"name": "x", "arch": "gpt2", "n_layer": 2, "n_head": 4, "n_kv_head": 2, "d_model": 32,
        "d_ff": 128, "vocab_size": 100, "n_ctx": 16}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"colour": "red"}, r"unknown fields \['colour'\]"),
        ({"d_model": None}, "d_model must be an int, got None"),
        ({"n_layer": 0}, "n_layer must be positive, got 0"),
        ({"vocab_size": -5}, "vocab_size must be positive, got -5"),
        ({"d_model": 32.0}, "d_model must be an int, got 32.0"),
        ({"n_ctx": "16"}, "n_ctx must be an int"),
        ({"n_layer": True}, "n_layer must be an int, got True"),
        ({"n_head": 5}, r"n_head \(5\) must divide d_model \(32\)"),
        ({"n_kv_head": 3}, r"n_kv_head \(3\) must divide n_head \(4\)"),
        ({"arch": "bert"}, "arch must be one of 'gpt2', 'llama', got 'bert'"),
        ({"arch": "llama", "n_head": 32, "n_kv_head": 32}, "even head_dim"),  # head_dim = 32 / 32 = 1
    ],
)
def test_from_json_invalid_raises(tmp_path: Path, change: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        from_json(write_json(tmp_path, {**GOOD, **change}))


def test_from_json_missing_fields_raises(tmp_path: Path) -> None:
    data = {key: value for key, value in GOOD.items() if key not in {"d_ff", "vocab_size"}}
    with pytest.raises(ValueError, match=r"missing fields \['d_ff', 'vocab_size'\]"):
        from_json(write_json(tmp_path, data))


@pytest.mark.parametrize(("text", "message"), [("[1, 2]", "expected a JSON object"), ("{n_layer: 2", "not valid JSON")])
def test_from_json_not_an_object_raises(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        from_json(path)


def test_model_config_validates_directly() -> None:
    with pytest.raises(ValueError, match=r"n_kv_head \(3\) must divide n_head \(4\)"):
        ModelConfig(**{**GOOD, "n_kv_head": 3})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"n_layer must be positive"):
        dataclasses.replace(from_name("gpt2-small"), n_layer=0)
