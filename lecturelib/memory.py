"""Memory accounting: bytes per dtype, precision recipes, training memory, KV cache, the memory hierarchy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

import torch

from lecturelib.configs import ModelConfig
from lecturelib.params import n_params

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

# Storage bits per element. Bits, not bytes, so that int4 (half a byte) stays an exact int.
# tf32 is a compute mode of the tensor cores: a tf32 tensor is stored as a 32-bit float.
DTYPE_BITS: dict[str, int] = {
    "fp64": 64,
    "float64": 64,
    "fp32": 32,
    "float32": 32,
    "tf32": 32,  # stored in 32 bits; the tensor cores read 19 of them (1 sign, 8 exponent, 10 mantissa)
    "bf16": 16,
    "bfloat16": 16,
    "fp16": 16,
    "float16": 16,
    "fp8": 8,  # e4m3 or e5m2 (torch.float8_e4m3fn, torch.float8_e5m2)
    "int8": 8,
    "int4": 4,  # two values packed per byte (as in bitsandbytes and torchao)
}

Recompute = Literal["none", "selective", "full"]
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "full")


def dtype_bits(dtype: str | torch.dtype) -> int:
    """Storage bits of one element of `dtype` (a DTYPE_BITS name or a torch.dtype)."""
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize * 8
    try:
        return DTYPE_BITS[dtype]
    except KeyError:
        raise ValueError(f"unknown dtype {dtype!r}; known dtypes: {', '.join(DTYPE_BITS)}") from None


def tensor_bytes(n_elements: int, dtype: str | torch.dtype) -> int:
    """Bytes to store `n_elements` of `dtype`, packed, rounded up to a whole byte (int4: 2 per byte)."""
    if n_elements < 0:
        raise ValueError(f"n_elements must be >= 0, got {n_elements}")
    return -(-n_elements * dtype_bits(dtype) // 8)  # ceil(n·bits / 8) in exact integer arithmetic


@dataclass(frozen=True)
class Recipe:
    """What is stored per parameter and per activation in one precision recipe."""

    # the name used by RECIPES and the CLI, e.g. "bf16-mixed-adamw"
    name: str
    # dtype of the weights that the forward and backward passes read
    weight_dtype: str
    # dtype of the gradients; None for inference (no backward pass)
    grad_dtype: str | None
    # dtype of each optimizer state tensor, one per state: AdamW keeps two (first and second moment)
    optimizer_state_dtypes: tuple[str, ...]
    # dtype of a separate master copy of the weights that the optimizer updates (mixed precision
    # keeps it in fp32); None when the weights themselves are the master copy
    master_dtype: str | None
    # dtype of the activations saved for the backward pass; None for inference (nothing is saved)
    activation_dtype: str | None
    # torch.autocast only: dtype of the copies of the matmul weights (and biases) that autocast makes on
    # the fly; they live from their first use in forward until their matmul's backward. None otherwise
    weight_copy_dtype: str | None = None

    def __post_init__(self) -> None:
        for dtype in (self.weight_dtype, self.grad_dtype, self.master_dtype, self.activation_dtype,
                      self.weight_copy_dtype, *self.optimizer_state_dtypes):
            if dtype is not None:
                dtype_bits(dtype)  # raises ValueError on an unknown dtype name


RECIPES: dict[str, Recipe] = {
    # everything in fp32; AdamW's m and v in fp32: 4 + 4 + 2·4 = 16 bytes per parameter
    "fp32-adamw": Recipe("fp32-adamw", "fp32", "fp32", ("fp32", "fp32"), None, "fp32"),
    # Micikevicius et al. 2018 mixed precision, as in ZeRO (Rajbhandari et al. 2020, sec. 3.1):
    # 16-bit weights and gradients, fp32 master weights, fp32 m and v: 2 + 2 + 4 + 4 + 4 = 16 bytes
    "bf16-mixed-adamw": Recipe("bf16-mixed-adamw", "bf16", "bf16", ("fp32", "fp32"), "fp32", "bf16"),
    "fp16-mixed-adamw": Recipe("fp16-mixed-adamw", "fp16", "fp16", ("fp32", "fp32"), "fp32", "fp16"),
    # PyTorch's automatic mixed precision (torch.autocast(dtype=torch.bfloat16) around an fp32 model):
    # the fp32 weights are the master copy, gradients and m, v are fp32: 4 + 4 + 4 + 4 = 16 bytes per
    # parameter, plus bf16 copies of the matmul weights during the step (weight_copy_dtype); matmul
    # outputs are bf16, the residual stream, norms and the loss stay fp32
    "bf16-autocast-adamw": Recipe("bf16-autocast-adamw", "fp32", "fp32", ("fp32", "fp32"), None, "bf16", "bf16"),
    # Dettmers et al. 2022, "8-bit Optimizers via Block-wise Quantization" (bitsandbytes AdamW8bit):
    # m and v in 8 bits, 2 + 2 + 4 + 1 + 1 = 10 bytes per parameter. Not counted: one fp32 absmax per
    # 2048-value block and state, 2·4/2048 ≈ 0.004 bytes per parameter.
    "bf16-mixed-adamw8bit": Recipe("bf16-mixed-adamw8bit", "bf16", "bf16", ("int8", "int8"), "fp32", "bf16"),
    # inference: bf16 weights only, no gradients, no optimizer, no saved activations (2 bytes/param)
    "bf16-inference": Recipe("bf16-inference", "bf16", None, (), None, None),
}


def recipe_from_name(name: str) -> Recipe:
    """The recipe called `name` (a key of RECIPES)."""
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown recipe {name!r}; known recipes: {', '.join(RECIPES)}") from None


def _check_positive(**sizes: int) -> None:
    """Raise ValueError unless every size is a positive int."""
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(f"{name} must be a positive int, got {value!r}")


AttentionKernel = Literal["eager", "fused"]
ATTENTION_KERNELS: tuple[str, ...] = ("eager", "fused")


def activation_bytes_per_layer(
    seq_len: int,
    batch: int,
    d_model: int,
    n_head: int,
    *,
    activation_dtype: str | torch.dtype = "bf16",
    recompute: Recompute = "none",
    attention: AttentionKernel = "eager",
    dropout: bool = True,
) -> int:
    """Bytes saved for backward by one GPT-style block (Korthikanti et al. 2022, sec. 4.1 and Table 2)."""
    # Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
    # (https://arxiv.org/abs/2205.05198), sec. 4.1, no tensor or sequence parallelism: with 16-bit
    # activations and 1-byte dropout masks one layer stores s·b·h·(34 + 5·a·s/h) bytes.
    # s = seq_len, b = batch, h = d_model, a = n_head. The block is GPT's: LayerNorm → attention →
    # dropout, LayerNorm → MLP (4h, GeLU) → dropout. Elements stored, each of the activation dtype:
    #   attention: LayerNorm output (QKV input) sbh, Q and K 2sbh, V sbh, output-projection input sbh,
    #              softmax output as²b, attention-dropout output as²b          → 5sbh + 2as²b
    #   MLP:       LayerNorm output sbh, GeLU input 4sbh, GeLU output 4sbh      → 9sbh
    #   LayerNorm inputs (two per layer)                                       → 2sbh
    #   total                                                                  → 16sbh + 2as²b
    # Dropout masks, 1 byte per element: attention dropout as²b, two residual dropouts 2sbh.
    # At 2 bytes per element: 2·(16sbh + 2as²b) + 2sbh + as²b = 34sbh + 5as²b.
    # The 5as²b term has two assumptions, both visible in the arguments:
    # * attention="eager": the (s, s) softmax output of every head is stored. A fused kernel
    #   (FlashAttention, Dao et al. 2022, sec. 3.1; torch's scaled_dot_product_attention) stores no s²
    #   tensor: it keeps Q, K, V, its output (all in the 16sbh) and the softmax's log-sum-exp, a·s·b
    #   fp32 values, and recomputes the scores in backward (and the dropout mask, from the RNG state).
    # * dropout=True: GPT-2 trains with dropout; Llama has none. Without dropout there are no masks and
    #   the softmax output is the tensor both backward steps use: 16sbh + as²b elements.
    # Recompute (Korthikanti sec. 5, Table 2): "selective" recomputes the attention core (softmax,
    # dropout) from Q, K, V, dropping every as²b term: 34sbh at 16 bits, 32sbh without dropout; with a
    # fused kernel that is what "none" already does. "full" keeps only the block's input, sbh elements
    # (2sbh at 16 bits), and recomputes the whole block in backward.
    # Llama blocks (SwiGLU, RMSNorm, RoPE) are counted with this GPT formula: an approximation;
    # step_memory() below counts lecturelib.models.GPT of either arch tensor by tensor.
    _check_positive(seq_len=seq_len, batch=batch, d_model=d_model, n_head=n_head)
    if attention not in ATTENTION_KERNELS:
        raise ValueError(f"unknown attention {attention!r}; known: {', '.join(ATTENTION_KERNELS)}")
    sbh = seq_len * batch * d_model
    as2b = n_head * seq_len * seq_len * batch
    lse_bytes = 4 * n_head * seq_len * batch  # fused kernels: one fp32 log-sum-exp per row of scores
    residual_masks = 2 * sbh if dropout else 0
    if recompute == "full":
        return tensor_bytes(sbh, activation_dtype)
    if recompute not in ("none", "selective"):
        raise ValueError(f"unknown recompute {recompute!r}; known: {', '.join(RECOMPUTE_MODES)}")
    if attention == "fused":  # no s² tensor whatever the recompute choice; the kernel recomputes it
        return tensor_bytes(16 * sbh, activation_dtype) + residual_masks + lse_bytes
    if recompute == "selective":
        return tensor_bytes(16 * sbh, activation_dtype) + residual_masks
    if dropout:  # softmax output and dropout output, plus the attention-dropout mask
        return tensor_bytes(16 * sbh + 2 * as2b, activation_dtype) + residual_masks + as2b
    return tensor_bytes(16 * sbh + as2b, activation_dtype)


@dataclass(frozen=True)
class Breakdown:
    """Bytes by part: every field named *_bytes is a part, total_bytes is their sum (other fields label it)."""

    @property
    def total_bytes(self) -> int:
        """The sum of the parts."""
        return sum(self.parts().values())

    def parts(self) -> dict[str, int]:
        """The parts by name, in field order, without the total."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name.endswith("_bytes")}

    def as_dict(self) -> dict[str, int | str]:
        """The labels (e.g. a phase), the parts and total_bytes, in that order."""
        labels = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if not f.name.endswith("_bytes")}
        return {**labels, **self.parts(), "total_bytes": self.total_bytes}


@dataclass(frozen=True)
class MemoryBreakdown(Breakdown):
    """Bytes of training (or inference) state by part; total_bytes is their sum."""

    weights_bytes: int  # the weights the forward pass reads
    gradients_bytes: int  # one gradient per parameter
    optimizer_bytes: int  # optimizer states (AdamW: m and v)
    master_weights_bytes: int  # fp32 master copy in mixed precision, else 0
    activations_bytes: int  # saved for backward, all layers (Korthikanti et al. 2022)


def model_states(n_params: int, recipe: Recipe | str) -> MemoryBreakdown:
    """Bytes of weights, gradients, optimizer states and master weights for n_params parameters."""
    # ZeRO (Rajbhandari et al. 2020) calls these the model states; activations_bytes is 0 here.
    if isinstance(recipe, str):
        recipe = recipe_from_name(recipe)
    return MemoryBreakdown(
        weights_bytes=tensor_bytes(n_params, recipe.weight_dtype),
        gradients_bytes=0 if recipe.grad_dtype is None else tensor_bytes(n_params, recipe.grad_dtype),
        optimizer_bytes=sum(tensor_bytes(n_params, dtype) for dtype in recipe.optimizer_state_dtypes),
        master_weights_bytes=0 if recipe.master_dtype is None else tensor_bytes(n_params, recipe.master_dtype),
        activations_bytes=0,
    )


def training_memory(
    cfg: ModelConfig,
    recipe: Recipe | str,
    batch: int,
    seq_len: int,
    recompute: Recompute = "none",
    *,
    attention: AttentionKernel = "eager",
    dropout: bool | None = None,
) -> MemoryBreakdown:
    """Bytes of model states and saved activations for one training step of `cfg` under `recipe`."""
    # Counted: weights, gradients, optimizer states, master weights (per parameter, n_params(cfg) with
    # tied weights once) and the activations saved by the n_layer transformer blocks for backward, by
    # Korthikanti's per-layer formula. attention="eager" is the paper's assumption (a stored softmax);
    # dropout=None means as the architecture trains: GPT-2 with dropout (0.1), Llama without.
    # Not counted: embedding output, final norm, logits and the loss's buffers, temporary buffers,
    # allocator fragmentation, the CUDA context. step_memory() counts a real step's peak, all included.
    if isinstance(recipe, str):
        recipe = recipe_from_name(recipe)
    _check_positive(batch=batch, seq_len=seq_len)
    if recipe.activation_dtype is None:  # inference: nothing is saved for a backward pass
        activations = 0
    else:
        per_layer = activation_bytes_per_layer(
            seq_len, batch, cfg.d_model, cfg.n_head,
            activation_dtype=recipe.activation_dtype, recompute=recompute,
            attention=attention, dropout=cfg.arch == "gpt2" if dropout is None else dropout,
        )
        activations = cfg.n_layer * per_layer
    return dataclasses.replace(model_states(n_params(cfg), recipe), activations_bytes=activations)


# ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter Models",
# https://arxiv.org/abs/1910.02054, sec. 5 and Figure 1): N data-parallel GPUs each keep 1/N of
#   stage 1 (P_os):        the optimizer states (with mixed precision these include the fp32 master weights),
#   stage 2 (P_os+g):      ... and the gradients,
#   stage 3 (P_os+g+p):    ... and the weights themselves.
# Stage 0 is plain data parallelism: every GPU holds everything. Activations are not sharded (each GPU
# runs its own micro-batch). Figure 1, Ψ = 7.5B, N = 64, K = 12: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per GPU.
ZERO_STAGES: tuple[int, ...] = (0, 1, 2, 3)
ZERO_SHARDED: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("optimizer_bytes", "master_weights_bytes"),
    2: ("optimizer_bytes", "master_weights_bytes", "gradients_bytes"),
    3: ("optimizer_bytes", "master_weights_bytes", "gradients_bytes", "weights_bytes"),
}

_Breakdown = TypeVar("_Breakdown", bound="DataclassInstance")


def zero_shard_bytes(n_bytes: int, n_gpus: int) -> int:
    """Bytes of one GPU's shard when n_bytes are split over n_gpus (rounded up: shards are padded equal)."""
    _check_positive(n_gpus=n_gpus)
    if n_bytes < 0:
        raise ValueError(f"n_bytes must be >= 0, got {n_bytes}")
    return -(-n_bytes // n_gpus)


def zero_partition(breakdown: _Breakdown, stage: int, n_gpus: int) -> _Breakdown:
    """Per-GPU bytes of a breakdown (MemoryBreakdown, StepMemory) under ZeRO stage `stage` on n_gpus GPUs."""
    if stage not in ZERO_SHARDED:
        raise ValueError(f"unknown ZeRO stage {stage!r}; known: {', '.join(map(str, ZERO_STAGES))}")
    _check_positive(n_gpus=n_gpus)
    sharded = {name: zero_shard_bytes(getattr(breakdown, name), n_gpus) for name in ZERO_SHARDED[stage]}
    return dataclasses.replace(breakdown, **sharded)


def kv_cache_bytes(cfg: ModelConfig, batch: int, seq_len: int, dtype: str | torch.dtype) -> int:
    """Bytes of the KV cache: 2 (K and V) · n_layer · n_kv_head · head_dim · seq_len · batch elements."""
    # Grouped-query attention caches n_kv_head heads, not n_head: n_kv_head/n_head of MHA's cache.
    _check_positive(batch=batch, seq_len=seq_len)
    elements = 2 * cfg.n_layer * cfg.n_kv_head * cfg.head_dim * seq_len * batch
    return tensor_bytes(elements, dtype)


def kv_cache_bytes_per_token(cfg: ModelConfig, dtype: str | torch.dtype) -> int:
    """Bytes of KV cache that one more token of one sequence adds."""
    return kv_cache_bytes(cfg, 1, 1, dtype)


def attention_scores_bytes(batch: int, n_head: int, q_len: int, kv_len: int, dtype: str | torch.dtype) -> int:
    """Bytes of one materialized score matrix Q K^T (or its softmax): batch · n_head · q_len · kv_len elements."""
    # Standard attention writes it to memory twice over (scores, then probabilities); a fused kernel
    # (FlashAttention, F.scaled_dot_product_attention) keeps only blocks of it on chip.
    _check_positive(batch=batch, n_head=n_head, q_len=q_len, kv_len=kv_len)
    return tensor_bytes(batch * n_head * q_len * kv_len, dtype)


@dataclass(frozen=True)
class MemoryTier:
    """One level of the memory hierarchy (内存层次) with its size, speed and source."""

    name: str
    # capacity in words, e.g. "256 KB per SM"; the tiers' units differ too much for one number
    capacity: str
    # load-to-use latency in GPU core clock cycles, where measured in cycles; else None
    latency_cycles: int | None
    # peak bandwidth in bytes per second (one direction unless the note says otherwise); None if
    # no single figure applies
    bandwidth_bytes_per_s: float | None
    # where the numbers come from (datasheet, specification or paper)
    source: str
    # what exactly the numbers are: which GPU, which direction, how derived
    note: str


# Fastest and smallest first. GPU figures are for the H100 SXM unless the note names another GPU;
# latencies are the pointer-chase measurements of Jia et al. 2018 on a Volta V100 (2017), two generations
# before the H100 (Volta, Ampere, Hopper): NVIDIA publishes none, and they are labelled V100 wherever shown.
# Link rates are per direction after the 128b/130b encoding of PCIe 3.0 and later.
MEMORY_HIERARCHY: tuple[MemoryTier, ...] = (
    MemoryTier(
        name="registers",
        capacity="256 KB per SM (65,536 32-bit registers)",
        latency_cycles=None,
        bandwidth_bytes_per_s=None,
        source="https://docs.nvidia.com/cuda/cuda-c-programming-guide/#features-and-technical-specifications",
        note="operands are read inside the pipeline: no load latency and no separate bandwidth figure",
    ),
    MemoryTier(
        name="shared memory (SMEM)",
        capacity="up to 228 KB per SM (of a 256 KB L1/SMEM array)",
        latency_cycles=19,
        bandwidth_bytes_per_s=132 * 128 * 1.98e9,  # 132 SMs × 32 banks × 4 B per clock × 1.98 GHz
        source="https://arxiv.org/abs/1804.06826",
        note="latency: V100 (Volta, two generations before Hopper), Jia et al. 2018; capacity and 32 "
        "four-byte banks per SM: CUDA programming guide and Hopper tuning guide; bandwidth derived: "
        "128 B/clock/SM × 132 SMs × 1.98 GHz boost",
    ),
    MemoryTier(
        name="L1 data cache",
        capacity="256 KB per SM, shared with SMEM",
        latency_cycles=28,
        bandwidth_bytes_per_s=None,
        source="https://arxiv.org/abs/1804.06826",
        note="latency: V100 L1 hit (Volta, two generations before Hopper), Jia et al. 2018 (Pascal P100: "
        "82 cycles); same SRAM as SMEM",
    ),
    MemoryTier(
        name="L2 cache",
        capacity="50 MB per GPU",
        latency_cycles=193,
        bandwidth_bytes_per_s=None,
        source="https://arxiv.org/abs/1804.06826",
        note="latency: V100 L2 hit (Volta, two generations before Hopper; the V100's L2 is 6 MB), Jia et al. "
        "2018; 50 MB: H100 SXM5, NVIDIA H100 architecture whitepaper "
        "(https://resources.nvidia.com/en-us-tensor-core); NVIDIA gives no L2 bandwidth",
    ),
    MemoryTier(
        name="HBM (GPU memory)",
        capacity="80 GB HBM3",
        latency_cycles=None,
        bandwidth_bytes_per_s=3.35e12,
        source="https://www.nvidia.com/en-us/data-center/h100/",
        note="H100 SXM datasheet: 3.35 TB/s; latency is several hundred cycles and depends on TLB hits, "
        "so no single figure is given",
    ),
    MemoryTier(
        name="NVLink 4 (GPU to GPU)",
        capacity="-",
        latency_cycles=None,
        bandwidth_bytes_per_s=450e9,
        source="https://www.nvidia.com/en-us/data-center/h100/",
        note="H100 SXM datasheet: 900 GB/s total over 18 links, i.e. 450 GB/s per direction",
    ),
    MemoryTier(
        name="PCIe 5.0 x16 (host to GPU)",
        capacity="-",
        latency_cycles=None,
        bandwidth_bytes_per_s=32e9 * 16 / 8 * 128 / 130,
        source="https://www.nvidia.com/en-us/data-center/h100/",
        note="H100 datasheet: PCIe Gen5 128 GB/s, both directions together; 32 GT/s × 16 lanes / 8 = "
        "64 GB/s per direction, × 128/130 for the encoding = 63.0 GB/s (PCI-SIG PCIe 5.0 specification); "
        "packet headers leave less for data",
    ),
    MemoryTier(
        name="host DRAM (DDR5-4800, one channel)",
        capacity="hundreds of GB to a few TB per server",
        latency_cycles=None,
        bandwidth_bytes_per_s=38.4e9,
        source="https://www.jedec.org/standards-documents/docs/jesd79-5c",
        note="JEDEC DDR5: 4800 MT/s × 8 bytes per transfer = 38.4 GB/s per channel; a server socket "
        "has 8-12 channels. Host memory reaches the GPU only through PCIe or NVLink-C2C",
    ),
    MemoryTier(
        name="NVMe SSD (PCIe 4.0 x4)",
        capacity="TBs",
        latency_cycles=None,
        bandwidth_bytes_per_s=16e9 * 4 / 8 * 128 / 130,
        source="https://pcisig.com/specifications",
        note="link limit: 16 GT/s × 4 lanes / 8 = 8 GB/s per direction, × 128/130 for the encoding = "
        "7.88 GB/s; drives reach about 7 GB/s sequential reads",
    ),
)
