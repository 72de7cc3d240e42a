"""The peak memory of one training step of lecturelib.models.GPT, predicted tensor by tensor, phase by phase."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

from lecturelib.configs import ModelConfig
from lecturelib.memory import (RECOMPUTE_MODES, Breakdown, Recipe, Recompute, dtype_bits, model_states, recipe_from_name,
                               tensor_bytes)
from lecturelib.models import ATTENTION_IMPLS, GPT, AttentionImpl
from lecturelib.profiler import TensorPeak, peak_memory, release_free_heap, tensor_peak_memory
from lecturelib.params import attention_params, mlp_params, n_params, norm_params

# Where the step runs. The two differ only for the llama arch: CUDA's fused RMSNorm kernel keeps no
# normalized copy of its input, and CUDA's attention kernels return their output in a layout that
# needs no copy before the output projection. Everything else is the same on both.
Device = Literal["cpu", "cuda"]
DEVICES: tuple[str, ...] = ("cpu", "cuda")


def training_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    idx: torch.Tensor,
    targets: torch.Tensor,
    *,
    autocast_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """One optimizer step on (idx, targets): free the gradients, forward, cross-entropy, backward, update."""
    optimizer.zero_grad(set_to_none=True)  # gradients exist only from their backward to the update
    enabled = autocast_dtype is not None
    with torch.autocast(idx.device.type, dtype=autocast_dtype or torch.bfloat16, enabled=enabled):
        # the logits are not kept in a variable, so they are freed as soon as the loss has used them;
        # the loss is computed in fp32 whatever the model's dtype (.float() is a no-op on fp32 logits)
        logits = model(idx).flatten(0, 1).float()  # (B·T, V)
        loss = F.cross_entropy(logits, targets.flatten())
        del logits
    loss.backward()
    optimizer.step()  # AdamW(fused=True) updates in place: no temporary copies of the parameters
    return loss.detach()


def _bytes(recipe: Recipe) -> tuple[int, int, bool]:
    """(residual-stream bytes, matmul-output bytes, autocast?) per element under `recipe`."""
    if recipe.activation_dtype is None:
        raise ValueError(f"recipe {recipe.name!r} trains nothing: it has no activation dtype")
    # The residual stream, the embeddings and the norms run in the weights' dtype; the matmuls write
    # the activation dtype (under autocast: bf16 while the weights, and so the residual stream, are fp32).
    residual, matmul = dtype_bits(recipe.weight_dtype) // 8, dtype_bits(recipe.activation_dtype) // 8
    return residual, matmul, recipe.weight_copy_dtype is not None


def _norm_saved(
    cfg: ModelConfig, tokens: int, consumers: int, recipe: Recipe, device: Device, name: str
) -> dict[str, int]:
    """What one normalization keeps for backward (its input, the residual stream, is counted elsewhere)."""
    r, e, autocast = _bytes(recipe)
    nh = tokens * cfg.d_model
    saved: dict[str, int] = {}
    if cfg.arch == "gpt2":
        saved[f"{name} mean and 1/std"] = 2 * tokens * 4  # native_layer_norm: two fp32 values per token
    elif device == "cuda":
        saved[f"{name} 1/rms"] = tokens * 4  # the fused kernel (aten._fused_rms_norm): one fp32 per token
    else:
        # RMSNorm as PyTorch composes it on CPU: x · rsqrt(mean(x²) + eps) · weight; the last multiply
        # keeps the normalized x for the weight's gradient, the middle one keeps 1/rms
        saved[f"{name} 1/rms"] = tokens * r
        saved[f"{name} normalized"] = nh * r
    # The output feeds `consumers` matmuls. Without autocast it is stored once; autocast casts it to
    # bf16 once per matmul, each cast stored by its matmul, and the fp32 output itself is freed.
    saved[f"{name} output"] = consumers * nh * e if autocast else nh * r
    return saved


def block_activations(
    cfg: ModelConfig,
    recipe: Recipe | str,
    batch: int,
    seq_len: int,
    *,
    attention: AttentionImpl = "sdpa",
    recompute: Recompute = "none",
    device: Device = "cuda",
) -> dict[str, int]:
    """Bytes one block of lecturelib.models.GPT keeps for backward, tensor by tensor; "total" is their sum."""
    # Each entry is a tensor that autograd saves (or, for "block output", the next block saves), found by
    # reading lecturelib.models and checked against the saved tensors of a real step in the tests.
    # n = batch·seq_len tokens, h = d_model, f = d_ff, a = n_head.
    recipe = recipe_from_name(recipe) if isinstance(recipe, str) else recipe
    _check(cfg, batch, seq_len, attention, recompute, device)
    r, e, _ = _bytes(recipe)
    n = batch * seq_len
    nh, nkv, nf = n * cfg.d_model, n * cfg.kv_dim, n * cfg.d_ff
    scores = cfg.n_head * seq_len * seq_len * batch  # a·s²·b: one (T, T) matrix per head and sequence
    parts: dict[str, int] = {"block output": nh * r}  # the residual stream after the block: next block's input
    if recompute == "full":  # torch.utils.checkpoint keeps the block's input only (the previous entry)
        return {**parts, "total": sum(parts.values())}
    parts.update(_norm_saved(cfg, n, 3, recipe, device, "norm_1"))  # feeds q, k and v
    rope = cfg.arch == "llama"
    if rope:  # rotary(): cos and sin of (T, hs/2), computed for q and again for k, kept by the multiplies
        parts["rope cos and sin"] = 4 * seq_len * (cfg.head_dim // 2) * e
    if attention == "sdpa" or recompute == "selective":
        # q, k, v as projected (and rotated): kept by F.scaled_dot_product_attention, or by the
        # checkpoint around eager_attention (selective recompute). Rotation makes new q and k tensors.
        parts["q (rotated)" if rope else "q"] = nh * e
        parts["k (rotated)" if rope else "k"] = nkv * e
        parts["v"] = nkv * e
        if attention == "sdpa":
            parts["attention output"] = nh * e  # kept by the kernel's backward and by out_proj
            parts["attention log-sum-exp"] = cfg.n_head * n * 4  # fp32, one per row of scores
            if rope and device == "cpu":  # CPU kernel's output is (B, nh, T, hs): reshape copies it
                parts["attention output copy"] = nh * e
        else:  # the checkpointed core returns (B, nh, T, hs): the transpose-reshape copies it
            parts["attention output copy"] = nh * e
    else:  # eager, nothing recomputed: the (T, T) probabilities of every head are stored
        # the batched matmuls need q, kᵀ and v as (B·nh, T, hs): the projections' views are copied;
        # rotated q and k are already laid out so and kept as they are; under GQA, k and v are
        # repeated to n_head heads (copies, then kept)
        grouped = cfg.n_kv_head < cfg.n_head
        parts["q (rotated)" if rope else "q (copy for matmul)"] = nh * e
        if grouped:
            parts["k (repeated copy)"] = nh * e
        else:
            parts["k (rotated)" if rope else "k (copy for matmul)"] = nh * e
        parts["v (repeated copy)" if grouped else "v (copy for matmul)"] = nh * e
        parts["probabilities (fp32)"] = scores * 4  # softmax(..., dtype=float32): kept by its backward
        if e != 4:
            parts["probabilities (16-bit copy)"] = scores * e  # .to(q.dtype): kept by probs @ v
        parts["causal mask"] = seq_len * seq_len  # (T, T) bool, one byte each, kept by masked_fill
        parts["attention output copy"] = nh * e  # (B, nh, T, hs) -> (B, T, C) copies
    parts["residual after attention"] = nh * r  # x + attention(...): kept by norm_2
    if cfg.arch == "gpt2":
        parts.update(_norm_saved(cfg, n, 1, recipe, device, "norm_2"))  # feeds up
        parts["up output (GELU input)"] = nf * e
        parts["GELU output"] = nf * e  # down's input
    else:
        parts.update(_norm_saved(cfg, n, 2, recipe, device, "norm_2"))  # feeds gate and up
        parts["gate output (SiLU input)"] = nf * e
        parts["SiLU output"] = nf * e
        parts["up output"] = nf * e
        parts["SiLU · up"] = nf * e  # down's input
    return {**parts, "total": sum(parts.values())}


def _check(cfg: ModelConfig, batch: int, seq_len: int, attention: str, recompute: str, device: str) -> None:
    """Raise ValueError on a bad size or an unknown choice."""
    for size_name, size in (("batch", batch), ("seq_len", seq_len)):
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"{size_name} must be a positive int, got {size!r}")
    for name, choice, known in (("attention", attention, ATTENTION_IMPLS), ("recompute", recompute, RECOMPUTE_MODES),
                                ("device", device, DEVICES)):
        if choice not in known:
            raise ValueError(f"unknown {name} {choice!r}; known: {', '.join(known)}")


def saved_activations(
    cfg: ModelConfig,
    recipe: Recipe | str,
    batch: int,
    seq_len: int,
    *,
    attention: AttentionImpl = "sdpa",
    recompute: Recompute = "none",
    device: Device = "cuda",
) -> dict[str, int]:
    """Bytes kept for backward at the end of the forward pass, logits excluded; "total" is their sum."""
    recipe = recipe_from_name(recipe) if isinstance(recipe, str) else recipe
    block = block_activations(cfg, recipe, batch, seq_len, attention=attention, recompute=recompute, device=device)
    r, _, _ = _bytes(recipe)
    n = batch * seq_len
    parts = {"embedding output": n * cfg.d_model * r}  # the first block's input
    if cfg.arch == "gpt2":
        parts["position ids"] = seq_len * 8  # torch.arange(T), int64: kept by the position embedding
    parts["blocks"] = cfg.n_layer * block["total"]
    parts.update(_norm_saved(cfg, n, 1, recipe, device, "final norm"))  # feeds lm_head
    return {**parts, "total": sum(parts.values())}


@dataclass(frozen=True)
class StepMemory(Breakdown):
    """Bytes alive at one moment of a training step, by part; total_bytes is their sum."""

    phase: str  # the moment: "loss forward", "loss backward", "last block backward", ..., "optimizer step"
    weights_bytes: int  # the parameters (the model's own dtype)
    weight_copies_bytes: int  # autocast's 16-bit copies of the matmul weights, alive until their backward
    gradients_bytes: int  # parameter gradients computed so far
    master_weights_bytes: int  # fp32 master copy (16-bit mixed-precision recipes), else 0
    optimizer_bytes: int  # AdamW's m and v
    activations_bytes: int  # kept for backward (all blocks, embedding, final norm), incl. a recomputed block
    logits_bytes: int  # logits and the loss's (B·T, V) buffers
    workspace_bytes: int  # gradients of activations in flight and one layer's backward temporaries

    def labelled_parts(self) -> dict[str, int]:
        """The parts under readable names (PART_LABELS), for figures."""
        return {PART_LABELS[name]: n_bytes for name, n_bytes in self.parts().items()}


# StepMemory's parts as a figure's legend names them
PART_LABELS: dict[str, str] = {
    "weights_bytes": "weights",
    "weight_copies_bytes": "autocast weight copies",
    "gradients_bytes": "gradients",
    "master_weights_bytes": "fp32 master weights",
    "optimizer_bytes": "optimizer (m, v)",
    "activations_bytes": "activations",
    "logits_bytes": "logits and loss",
    "workspace_bytes": "backward workspace",
}


def _per_param(count: int, dtype: str | None) -> int:
    """Bytes of `count` values of `dtype` (0 for None)."""
    return 0 if dtype is None else tensor_bytes(count, dtype)


def step_phases(
    cfg: ModelConfig,
    recipe: Recipe | str,
    batch: int,
    seq_len: int,
    recompute: Recompute = "none",
    *,
    attention: AttentionImpl = "sdpa",
    device: Device = "cuda",
) -> list[StepMemory]:
    """What training_step holds at each moment that can be its peak, in order."""
    recipe = recipe_from_name(recipe) if isinstance(recipe, str) else recipe
    r, e, _ = _bytes(recipe)
    saved = saved_activations(cfg, recipe, batch, seq_len, attention=attention, recompute=recompute, device=device)
    block = block_activations(cfg, recipe, batch, seq_len, attention=attention, recompute=recompute, device=device)
    n = batch * seq_len
    nh, nv = n * cfg.d_model, n * cfg.vocab_size
    n_total = n_params(cfg)
    head_params = cfg.vocab_size * cfg.d_model  # lm_head's (V, C) weight (GPT-2: the token embedding)
    layer_params = attention_params(cfg) + mlp_params(cfg) + 2 * norm_params(cfg)
    matmul_params = attention_params(cfg) + mlp_params(cfg)  # what autocast copies in one block
    untied_head = 0 if cfg.tied_embeddings else head_params
    embedding_params = n_total - cfg.n_layer * layer_params - norm_params(cfg) - untied_head  # token (+ position)
    grad = lambda count: _per_param(count, recipe.grad_dtype)  # noqa: E731
    copy = lambda count: _per_param(count, recipe.weight_copy_dtype)  # noqa: E731
    model = model_states(n_total, recipe)  # the one account of what each parameter costs under the recipe
    states = dict(weights_bytes=model.weights_bytes, master_weights_bytes=model.master_weights_bytes,
                  optimizer_bytes=model.optimizer_bytes)
    # autocast caches one copy of every matmul weight while the forward pass runs; afterwards only
    # the copies that backward needs stay: all of them, or with full recompute the head's alone (each
    # block re-casts its weights when backward recomputes it)
    copies_forward = copy(cfg.n_layer * matmul_params + head_params)
    copies_backward = copy(head_params) if recompute == "full" else copies_forward
    full_block = block_activations(cfg, recipe, batch, seq_len, attention=attention, device=device)
    # in a block's backward: its saved tensors (recomputed first under full recompute), minus its output
    # (the next block's input, already freed by then)
    own = (full_block if recompute == "full" else block)["total"] - block["block output"]
    final_norm = saved["total"] - saved["blocks"] - saved["embedding output"] - saved.get("position ids", 0)
    before_blocks = saved["total"] - saved["blocks"] - final_norm  # embedding output (and position ids)
    head_grads = grad(head_params + norm_params(cfg))  # lm_head (GPT-2: its share of the tied matrix), final norm
    workspace, own_grads = _block_backward(cfg, recipe, batch, seq_len, attention, recompute, device)
    phases = [
        # log_softmax runs: the fp32 logits (a copy of 16-bit ones) and its output
        StepMemory("loss forward", weight_copies_bytes=copies_forward, gradients_bytes=0,
                   activations_bytes=saved["total"], logits_bytes=2 * nv * 4, workspace_bytes=0, **states),
        # log_softmax's backward runs: its saved output, the gradient nll_loss returns, the new gradient
        StepMemory("loss backward", weight_copies_bytes=copies_backward, gradients_bytes=0,
                   activations_bytes=saved["total"], logits_bytes=3 * nv * 4, workspace_bytes=0, **states),
        # lm_head's backward: the fp32 gradient of the logits (and its 16-bit copy), the head's weight
        # gradient (under autocast first in 16 bits), the gradient of its input
        StepMemory("head backward", weight_copies_bytes=copies_backward,
                   gradients_bytes=head_grads + copy(head_params), activations_bytes=saved["total"],
                   logits_bytes=nv * 4 + (nv * e if e != 4 else 0), workspace_bytes=nh * e, **states),
        # the last block's backward: every block's tensors are still kept, the head's gradients exist
        StepMemory("last block backward",
                   weight_copies_bytes=(copy(matmul_params) if recompute == "full"
                                        else copies_backward - copy(head_params)),
                   gradients_bytes=head_grads + own_grads,
                   activations_bytes=before_blocks + saved["blocks"] - block["total"] + own,
                   logits_bytes=0, workspace_bytes=workspace, **states),
        # the first block's backward: only its own tensors are left; every later gradient exists
        StepMemory("first block backward", weight_copies_bytes=copy(matmul_params),
                   gradients_bytes=head_grads + grad((cfg.n_layer - 1) * layer_params) + own_grads,
                   activations_bytes=before_blocks + own, logits_bytes=0, workspace_bytes=workspace, **states),
        # the embedding's backward: a (V, C) gradient for the token embedding, the incoming (B, T, C)
        # gradient; GPT-2's tied matrix then adds it to the head's share, out of place (the head's
        # share is a transposed, non-contiguous tensor): three (V, C) gradients at once
        StepMemory("embedding backward", weight_copies_bytes=0,
                   gradients_bytes=head_grads + grad(cfg.n_layer * layer_params + embedding_params)
                   + (grad(head_params) if cfg.tied_embeddings else 0),
                   activations_bytes=before_blocks, logits_bytes=0, workspace_bytes=nh * r, **states),
        # AdamW(fused=True) updates in place: parameters, gradients and states, nothing else
        StepMemory("optimizer step", weight_copies_bytes=0, gradients_bytes=grad(n_total), activations_bytes=0,
                   logits_bytes=0, workspace_bytes=0, **states),
    ]
    return phases


_MLP_SAVED = ("up output (GELU input)", "GELU output", "gate output (SiLU input)", "SiLU output", "up output",
              "SiLU · up")
# what eager attention stores beyond q, k, v as projected (or rotated): selective recompute makes these again
_EAGER_CORE = ("q (copy for matmul)", "k (copy for matmul)", "v (copy for matmul)", "k (repeated copy)",
               "v (repeated copy)", "probabilities (fp32)", "probabilities (16-bit copy)", "causal mask")
_V_COPIES = ("v (copy for matmul)", "v (repeated copy)")  # freed by the backward of probs @ v


def _block_backward(
    cfg: ModelConfig, recipe: Recipe, batch: int, seq_len: int, attention: AttentionImpl, recompute: Recompute,
    device: Device,
) -> tuple[int, int]:
    """At the peak of a block's backward: (bytes beyond its kept tensors, bytes of its parameter gradients)."""
    r, e, autocast = _bytes(recipe)
    n = batch * seq_len
    nh, nf = n * cfg.d_model, n * cfg.d_ff
    scores = cfg.n_head * seq_len * seq_len * batch  # a·s²·b
    # the block as its backward finds it (full recompute has just recomputed the whole block)
    block = block_activations(cfg, recipe, batch, seq_len, attention=attention,
                              recompute="none" if recompute == "full" else recompute, device=device)
    # the gradient of the block's output (residual dtype), under autocast also its 16-bit copy that the
    # matmuls' backward reads
    carry = nh * r + (nh * e if autocast else 0)
    # MLP backward, before any of its tensors are freed: GPT-2 holds the gradients of the GELU output
    # and input; Llama's multiply (SiLU · up) makes two (B, T, F) gradients at once
    mlp = carry + (1 if cfg.arch == "gpt2" else 2) * nf * e
    bias = cfg.arch == "gpt2"
    down_grad = _per_param(cfg.d_ff * cfg.d_model + (cfg.d_model if bias else 0), recipe.grad_dtype)  # made first
    if attention == "sdpa":
        return mlp, down_grad  # the attention kernel's backward makes dq, dk, dv after the MLP's tensors are freed
    # eager attention: softmax's backward holds the fp32 gradient of the probabilities and makes the
    # fp32 gradient of the scores (the softmax ran on an fp32 copy of them), with the gradients of the
    # residual after attention and of v waiting; by then the MLP's tensors, norm_2's, the residual after
    # attention, the output copy, the 16-bit probabilities and the v copy are freed. Selective recompute
    # first recomputes the core.
    freed = sum(size for name, size in block.items()
                if name.startswith("norm_2") or name in _MLP_SAVED
                or name in ("residual after attention", "attention output copy", "probabilities (16-bit copy)",
                            *_V_COPIES))
    core = 0
    if recompute == "selective":
        eager = block_activations(cfg, recipe, batch, seq_len, attention="eager", device=device)
        core = sum(size for name, size in eager.items() if name in _EAGER_CORE)
        freed += sum(eager.get(name, 0) for name in ("probabilities (16-bit copy)", *_V_COPIES))
    softmax = nh * r + nh * e + 2 * scores * 4 + core - freed
    # by then the MLP's, norm_2's and the output projection's gradients exist too
    out_proj = cfg.d_model * cfg.d_model + (cfg.d_model if bias else 0)
    later_grads = _per_param(mlp_params(cfg) + norm_params(cfg) + out_proj, recipe.grad_dtype)
    return max((mlp, down_grad), (softmax, later_grads), key=sum)


def step_memory(
    cfg: ModelConfig,
    recipe: Recipe | str,
    batch: int,
    seq_len: int,
    recompute: Recompute = "none",
    *,
    attention: AttentionImpl = "sdpa",
    device: Device = "cuda",
) -> StepMemory:
    """Predicted peak of training_step on lecturelib.models.GPT(cfg): its largest phase, by part."""
    phases = step_phases(cfg, recipe, batch, seq_len, recompute, attention=attention, device=device)
    return max(phases, key=lambda phase: phase.total_bytes)


# --- measuring a real step -----------------------------------------------------------------------------------

AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {
    "fp32-adamw": None,  # no autocast: everything in fp32
    "bf16-autocast-adamw": torch.bfloat16,  # torch.autocast(dtype=torch.bfloat16) around the fp32 model
}


@dataclass(frozen=True)
class StepMeasurement:
    """Two measured peaks of one training step: live tensor bytes, and what the device reports."""

    # most bytes in live tensors during the step (profiler.tensor_peak_memory), the token ids excluded
    tensor_peak_bytes: int
    op_at_peak: str  # the operator at which tensor_peak_bytes was reached
    device_peak_bytes: int  # CPU: peak RSS added by building and running it; CUDA: max_memory_allocated added
    device_method: str  # how device_peak_bytes was measured (profiler.peak_memory's description)
    loss: float  # the measured step's loss (a check that it ran: about ln(vocab_size) at random weights)


def measure_step(
    cfg: ModelConfig,
    recipe: str,
    batch: int,
    seq_len: int,
    recompute: Recompute = "none",
    *,
    attention: AttentionImpl = "sdpa",
    device: str = "cpu",
    seed: int = 0,
) -> StepMeasurement:
    """Build GPT(cfg) and AdamW on `device`, run one step (AdamW's state appears), then measure a second one."""
    if recipe not in AUTOCAST_DTYPES:
        raise ValueError(f"measure_step runs {', '.join(AUTOCAST_DTYPES)}; {recipe!r} needs an optimizer "
                         "that keeps fp32 master weights for 16-bit ones, which PyTorch does not ship")
    _check(cfg, batch, seq_len, attention, recompute, "cuda" if device == "cuda" else "cpu")
    autocast_dtype = AUTOCAST_DTYPES[recipe]
    found: list[TensorPeak | float] = []

    def build_and_run() -> None:
        # everything is made inside the measured call, on the device: on CPU the added resident memory is
        # this configuration's alone; freed when the call returns
        torch.manual_seed(seed)
        with torch.device(device):
            model = GPT(cfg, attention=attention, recompute=recompute)
            idx = torch.randint(cfg.vocab_size, (batch, seq_len))  # (B, T) synthetic token ids
            targets = torch.randint(cfg.vocab_size, (batch, seq_len))
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
        step = lambda: training_step(model, optimizer, idx, targets, autocast_dtype=autocast_dtype)  # noqa: E731
        step()  # the first step creates AdamW's m and v; the second is the steady state
        existing = [*model.parameters(), *(s for state in optimizer.state.values() for s in state.values()),
                    idx, targets]
        losses: list[torch.Tensor] = []
        tensors = tensor_peak_memory(lambda: losses.append(step()), existing=existing)
        found.extend([tensors, float(losses[0]), idx.nbytes + targets.nbytes])

    if device != "cuda":
        release_free_heap()  # freed memory of earlier calls back to the OS: this call's pages all count
    peak = peak_memory(build_and_run, device="cuda" if device == "cuda" else "cpu")
    tensors, loss, token_bytes = found
    assert isinstance(tensors, TensorPeak) and isinstance(loss, float) and isinstance(token_bytes, int)
    return StepMeasurement(tensor_peak_bytes=tensors.peak_bytes - token_bytes, op_at_peak=tensors.op_at_peak,
                           device_peak_bytes=peak.peak_bytes, device_method=peak.method, loss=loss)
