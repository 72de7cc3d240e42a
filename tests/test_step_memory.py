"""Tests of lecturelib.step_memory: the predicted peak of a training step against PyTorch's own count."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from lecturelib.configs import MODELS, ModelConfig
from lecturelib.memory import RECIPES, model_states
from lecturelib.models import GPT
from lecturelib.profiler import tensor_peak_memory
from lecturelib.step_memory import (
    StepMemory,
    block_activations,
    saved_activations,
    step_memory,
    step_phases,
    training_step,
)

TRAINING_RECIPES = [name for name, recipe in RECIPES.items() if recipe.activation_dtype is not None]


@pytest.fixture(autouse=True)
def _one_thread():
    # bytes, not speed, are tested: one thread keeps the steps quick when CI runs two test workers on two cores
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
AUTOCAST = {"fp32-adamw": None, "bf16-autocast-adamw": torch.bfloat16}


def small(arch: str, *, n_kv_head: int = 4, vocab_size: int = 16, d_model: int = 64) -> ModelConfig:
    """A model whose activations dominate its parameters (64 wide, 4 heads, 2 layers)."""
    return ModelConfig(name=f"small-{arch}", arch=arch, n_layer=2, n_head=4, n_kv_head=n_kv_head,  # type: ignore[arg-type]
                       d_model=d_model, d_ff=4 * d_model, vocab_size=vocab_size, n_ctx=256)


def measured_step_peak(cfg: ModelConfig, recipe: str, batch: int, seq_len: int, *, attention: str = "sdpa",
                       recompute: str = "none") -> int:
    """Most tensor bytes alive during a second training_step (the first creates AdamW's state)."""
    torch.manual_seed(0)
    model = GPT(cfg, attention=attention, recompute=recompute)  # type: ignore[arg-type]
    optimizer = torch.optim.AdamW(model.parameters(), fused=True)
    idx, targets = (torch.randint(cfg.vocab_size, (batch, seq_len)) for _ in "xy")
    step = lambda: training_step(model, optimizer, idx, targets, autocast_dtype=AUTOCAST[recipe])  # noqa: E731
    step()
    existing = [*model.parameters(), *(s for state in optimizer.state.values() for s in state.values()), idx, targets]
    return tensor_peak_memory(step, existing=existing).peak_bytes - idx.nbytes - targets.nbytes


def saved_tensor_bytes(cfg: ModelConfig, recipe: str, batch: int, seq_len: int, attention: str) -> int:
    """Bytes of the distinct storages autograd saves in one forward pass, weights and token ids excluded."""
    torch.manual_seed(0)
    model = GPT(cfg, attention=attention)  # type: ignore[arg-type]
    idx = torch.randint(cfg.vocab_size, (batch, seq_len))
    weights = {p.data_ptr() for p in model.parameters()} | {idx.data_ptr()}
    # autocast's bf16 weight copies have a weight's shape, or its transpose (lm_head keeps Wᵀ)
    shapes = {tuple(p.shape) for p in model.parameters()} | {tuple(p.shape)[::-1] for p in model.parameters()}
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in weights and not (t.dtype == torch.bfloat16 and tuple(t.shape) in shapes):
            storages[ptr] = t.untyped_storage().nbytes()
        return t

    dtype = AUTOCAST[recipe]
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), \
            torch.autocast("cpu", dtype=dtype or torch.bfloat16, enabled=dtype is not None):
        model(idx)
    return sum(storages.values())


# --- what autograd saves: PyTorch's saved-tensor hooks as the oracle --------------------------------------

@pytest.mark.parametrize(("arch", "n_kv_head"), [("gpt2", 4), ("llama", 4), ("llama", 2)])
@pytest.mark.parametrize("recipe", ["fp32-adamw", "bf16-autocast-adamw"])
@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_saved_activations_equal_autograd_saved_tensors(arch: str, n_kv_head: int, recipe: str, attention: str) -> None:
    cfg = small(arch, n_kv_head=n_kv_head)
    predicted = saved_activations(cfg, recipe, 2, 48, attention=attention, device="cpu")  # type: ignore[arg-type]
    assert predicted["total"] == saved_tensor_bytes(cfg, recipe, 2, 48, attention)


def test_block_activations_total_is_sum_and_gpt2_fp32_is_16_sbh() -> None:
    cfg = small("gpt2")
    block = block_activations(cfg, "fp32-adamw", 2, 48)
    assert block["total"] == sum(v for k, v in block.items() if k != "total")
    sbh = 2 * 48 * 64
    # Korthikanti's 16 sbh elements (with the block's output for the LayerNorm input it counts), 4 bytes each,
    # plus two LayerNorms' mean and 1/std and the attention kernel's log-sum-exp
    assert block["total"] == 16 * sbh * 4 + 2 * (2 * 96 * 4) + 4 * 96 * 4


# --- the peak of a real step: the live-tensor count of lecturelib.profiler as the oracle ----------------------

GRID = [
    (arch, recipe, attention, recompute)
    for arch, recipe, attention, recompute in itertools.product(
        ["gpt2", "llama"], ["fp32-adamw", "bf16-autocast-adamw"], ["sdpa", "eager"], ["none", "selective", "full"])
    if not (attention == "sdpa" and recompute == "selective")
]


@pytest.mark.parametrize(("arch", "recipe", "attention", "recompute"), GRID)
def test_step_memory_within_2_percent_of_measured_peak(arch: str, recipe: str, attention: str, recompute: str) -> None:
    cfg = small(arch)  # activations dominate: the block phases decide the peak
    predicted = step_memory(cfg, recipe, 4, 128, recompute, attention=attention, device="cpu")  # type: ignore[arg-type]
    measured = measured_step_peak(cfg, recipe, 4, 128, attention=attention, recompute=recompute)
    assert abs(predicted.total_bytes / measured - 1) < 0.02, (predicted.phase, predicted.total_bytes, measured)


@pytest.mark.parametrize(("arch", "batch", "seq_len", "vocab_size", "phase"), [
    ("gpt2", 4, 128, 2048, "loss backward"),  # a large vocabulary: the loss's (B·T, V) buffers decide
    ("llama", 4, 128, 2048, "loss backward"),
    ("gpt2", 1, 16, 4096, "embedding backward"),  # few tokens: the gradients decide, GPT-2's tied matrix thrice
    ("llama", 1, 16, 4096, "embedding backward"),
])
def test_step_memory_peak_phase(arch: str, batch: int, seq_len: int, vocab_size: int, phase: str) -> None:
    cfg = small(arch, vocab_size=vocab_size, d_model=128)
    for recipe in AUTOCAST:
        predicted = step_memory(cfg, recipe, batch, seq_len, device="cpu")
        measured = measured_step_peak(cfg, recipe, batch, seq_len)
        assert predicted.phase == phase
        assert abs(predicted.total_bytes / measured - 1) < 0.005, (recipe, predicted.total_bytes, measured)


def test_step_memory_llama_7b_width_on_fake_tensors() -> None:
    # Llama-2-7B's real widths (4096, 11008, a 32,000 vocabulary), two layers, on fake tensors: PyTorch runs
    # the step on shapes alone (no memory) and the live-tensor count sees every tensor it would allocate.
    from torch._subclasses.fake_tensor import FakeTensorMode

    cfg = dataclasses.replace(MODELS["llama2-7b"], n_layer=2)
    with FakeTensorMode():
        model = GPT(cfg)
        optimizer = torch.optim.AdamW(model.parameters(), fused=True)
        idx = torch.randint(cfg.vocab_size, (4, 2048))
        step = lambda: training_step(model, optimizer, idx, idx, autocast_dtype=torch.bfloat16)  # noqa: E731
        step()
        existing = [*model.parameters(), *(s for state in optimizer.state.values() for s in state.values())]
        measured = tensor_peak_memory(step, existing=existing).peak_bytes - idx.nbytes
    predicted = step_memory(cfg, "bf16-autocast-adamw", 4, 2048, device="cpu")
    assert predicted.phase == "loss backward"
    assert abs(predicted.total_bytes / measured - 1) < 1e-4


# --- structure ---------------------------------------------------------------------------------------------

@settings(max_examples=40)
@given(cfg=st.sampled_from(list(MODELS.values())), recipe=st.sampled_from(TRAINING_RECIPES),
       batch=st.integers(1, 16), seq_len=st.integers(1, 1024), recompute=st.sampled_from(["none", "selective", "full"]),
       attention=st.sampled_from(["sdpa", "eager"]), device=st.sampled_from(["cpu", "cuda"]))
def test_step_memory_is_the_largest_phase_and_a_sum(cfg: ModelConfig, recipe: str, batch: int, seq_len: int,
                                                    recompute: str, attention: str, device: str) -> None:
    phases = step_phases(cfg, recipe, batch, seq_len, recompute, attention=attention, device=device)  # type: ignore[arg-type]
    peak = step_memory(cfg, recipe, batch, seq_len, recompute, attention=attention, device=device)  # type: ignore[arg-type]
    assert peak.total_bytes == max(p.total_bytes for p in phases) == sum(peak.parts().values())
    update = phases[-1]
    assert update.phase == "optimizer step"
    states = dataclasses.asdict(update)
    assert states["activations_bytes"] == states["logits_bytes"] == states["workspace_bytes"] == 0


@pytest.mark.parametrize("recipe", TRAINING_RECIPES)
def test_step_memory_optimizer_phase_is_the_model_states(recipe: str) -> None:
    from lecturelib.params import n_params

    cfg = MODELS["llama2-7b"]
    update = step_phases(cfg, recipe, 1, 128)[-1]
    states = model_states(n_params(cfg), recipe)
    assert update.total_bytes == states.total_bytes  # weights, gradients, master and m, v: nothing else


def test_step_memory_recompute_never_increases_the_peak() -> None:
    cfg = MODELS["gpt2-small"]
    peaks = [step_memory(cfg, "bf16-mixed-adamw", 8, 1024, mode, attention="eager").total_bytes
             for mode in ("none", "selective", "full")]
    assert peaks == sorted(peaks, reverse=True)


def test_step_memory_devices_differ_only_for_llama() -> None:
    gpt2, llama = MODELS["gpt2-small"], MODELS["llama2-7b"]
    assert step_memory(gpt2, "fp32-adamw", 2, 512, device="cpu") == step_memory(gpt2, "fp32-adamw", 2, 512, device="cuda")
    cpu = block_activations(llama, "bf16-autocast-adamw", 1, 4096, device="cpu")
    cuda = block_activations(llama, "bf16-autocast-adamw", 1, 4096, device="cuda")
    sbh = 4096 * 4096
    # CPU keeps each RMSNorm's normalized input (fp32 under autocast, two norms) and copies the attention
    # output (bf16); CUDA's fused kernels do neither: 2 · 4 sbh + 2 sbh bytes more on CPU
    assert cpu["total"] - cuda["total"] == 2 * 4 * sbh + 2 * sbh


def test_step_memory_rejects_inference_and_bad_input() -> None:
    cfg = MODELS["gpt2-small"]
    with pytest.raises(ValueError, match="trains nothing"):
        step_memory(cfg, "bf16-inference", 1, 8)
    with pytest.raises(ValueError, match="batch must be a positive int"):
        step_memory(cfg, "fp32-adamw", 0, 8)
    with pytest.raises(ValueError, match="unknown attention"):
        step_memory(cfg, "fp32-adamw", 1, 8, attention="flash")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown device"):
        step_memory(cfg, "fp32-adamw", 1, 8, device="tpu")  # type: ignore[arg-type]


def test_step_memory_as_dict_total_is_sum() -> None:
    peak = step_memory(MODELS["gpt2-small"], "bf16-autocast-adamw", 8, 1024)
    assert isinstance(peak, StepMemory)
    as_dict = peak.as_dict()
    assert as_dict["total_bytes"] == sum(v for k, v in as_dict.items() if k not in ("phase", "total_bytes"))


def test_step_memory_labelled_parts_name_every_part() -> None:
    from lecturelib.step_memory import PART_LABELS

    peak = step_memory(MODELS["llama2-7b"], "bf16-mixed-adamw", 1, 512)
    labelled = peak.labelled_parts()
    assert list(labelled) == [PART_LABELS[name] for name in peak.parts()]
    assert sum(labelled.values()) == peak.total_bytes
