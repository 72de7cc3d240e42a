"""One readable training loop: AMP, gradient accumulation, clipping, warm-up + cosine, checkpoints, metrics."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import math
import os
import random
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from lecturelib import hardware
from lecturelib.configs import ModelConfig
from lecturelib.flops import train_flops_per_token
from lecturelib.models import GPT
from lecturelib.params import n_params
from lecturelib.profiler import MemoryHighWater

PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp16")
# The dtype autocast runs matmuls in; fp32 runs without autocast.
AUTOCAST_DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16}
CHECKPOINT_FORMAT = "lecturelib.training/1"  # stored in every checkpoint; load_checkpoint refuses others


# ---------------------------------------------------------------------------------------------
# The learning-rate schedule


def lr_at(step: int, max_lr: float, min_lr: float, warmup_steps: int, decay_steps: int) -> float:
    """nanoGPT's get_lr: linear warm-up to max_lr, cosine down to min_lr at decay_steps, min_lr after."""
    # `step` counts the optimizer steps already taken (0 for the first). The warm-up starts at
    # max_lr/(warmup+1), not 0, so that the first step already learns something.
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if step < warmup_steps:
        return max_lr * (step + 1) / (warmup_steps + 1)
    if step >= decay_steps:  # nanoGPT writes `>`; at step == decay_steps the cosine is min_lr too
        return min_lr
    decay_ratio = (step - warmup_steps) / (decay_steps - warmup_steps)  # 0 → 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))  # 1 → 0
    return min_lr + coeff * (max_lr - min_lr)


# ---------------------------------------------------------------------------------------------
# Synthetic data: a random walk that a small model can learn, nothing downloaded

# The walk moves on ACTIVE_TOKENS tokens of the vocabulary; from each token it steps forward by one
# of WALK_STEPS, chosen uniformly. So the next token has len(WALK_STEPS) equally likely values: the
# best possible loss is ln 4 = 1.386 nats per token, while a model that knows nothing pays
# ln(vocab_size) (ln 256 = 5.545 for gpt-tiny). The loss falls in two visible stages: first to
# ln(ACTIVE_TOKENS) (which tokens occur at all), then towards ln 4 (which follow which).
ACTIVE_TOKENS = 64
WALK_STEPS: tuple[int, ...] = (1, 2, 3, 5)
LANGUAGE_SEED = 20240521  # fixes which tokens are active, the same for every run and every --seed


class SyntheticTokens:
    """A seeded stream of token sequences: sample n depends only on (seed, n), however it is batched."""

    def __init__(self, vocab_size: int, seq_len: int, seed: int) -> None:
        if not 0 <= seed < 2**31:
            raise ValueError(f"seed must be in [0, 2**31), got {seed}")
        self.seq_len, self.seed = seq_len, seed  # sample `index` is drawn from the pair (seed, index)
        language = torch.Generator().manual_seed(LANGUAGE_SEED)
        # the active tokens, in walk order: a random subset of the vocabulary
        self.alphabet = torch.randperm(vocab_size, generator=language)[: min(ACTIVE_TOKENS, vocab_size)]
        self.walk_steps = torch.tensor(WALK_STEPS)

    @property
    def entropy_floor_nats(self) -> float:
        """The loss of a model that knows the walk exactly: the entropy of the next token."""
        n = len(self.alphabet)
        counts: dict[int, int] = {}
        for step in WALK_STEPS:  # steps that land on the same token (tiny alphabets) merge
            counts[step % n] = counts.get(step % n, 0) + 1
        return -sum(c / len(WALK_STEPS) * math.log(c / len(WALK_STEPS)) for c in counts.values())

    def sample(self, index: int) -> torch.Tensor:
        """Sequence number `index` of the stream: seq_len + 1 token ids (inputs and the next-token targets)."""
        # One generator per sample, seeded by the pair (seed, index): the stream does not depend on how
        # it is split into micro-batches, nor on any other random number drawn in the process. NumPy's
        # SeedSequence mixes both numbers into the state (torch.manual_seed would keep 32 bits of one).
        generator = np.random.default_rng([self.seed, index])
        n = len(self.alphabet)
        start = torch.from_numpy(generator.integers(n, size=1))  # (1,)
        moves = self.walk_steps[torch.from_numpy(generator.integers(len(WALK_STEPS), size=self.seq_len))]  # (T,)
        positions = torch.cat([start, start + moves.cumsum(0)]) % n  # (T + 1,) places on the walk
        return self.alphabet[positions]

    def batch(self, start: int, count: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Samples start … start + count − 1 as (inputs, targets), each (count, seq_len) int64 on the CPU."""
        tokens = torch.stack([self.sample(start + i) for i in range(count)])  # (B, T + 1)
        return tokens[:, :-1], tokens[:, 1:]


# ---------------------------------------------------------------------------------------------
# Configuration and results


@dataclass(frozen=True)
class TrainConfig:
    """One training run: sizes, precision, schedule, optimizer, checkpointing."""

    # optimizer steps of the whole run; the learning rate decays over them
    steps: int
    # sequences per micro-batch (one forward and backward pass)
    batch: int
    # tokens per sequence
    seq_len: int
    # micro-batches per optimizer step: one step sees batch · accum sequences
    accum: int = 1
    # "fp32"; "bf16" (autocast, no loss scaling); "fp16" (autocast and torch.amp.GradScaler)
    precision: str = "fp32"
    # peak learning rate, reached after the warm-up
    lr: float = 1e-3
    # final learning rate; None: lr / 10 ("~= learning_rate/10 per Chinchilla", nanoGPT)
    min_lr: float | None = None
    # linear warm-up steps; None: steps // 10
    warmup: int | None = None
    # AdamW decoupled weight decay, on matrices and embeddings only (nanoGPT: 0.1)
    weight_decay: float = 0.1
    # decay biases and norm weights too: one group, as torch.optim.AdamW(model.parameters(), weight_decay=...)
    weight_decay_all: bool = False
    # AdamW betas (nanoGPT, GPT-3: 0.9 and 0.95)
    betas: tuple[float, float] = (0.9, 0.95)
    # clip the gradient's global L2 norm to this (nanoGPT: 1.0); 0 disables clipping
    grad_clip: float = 1.0
    # fixes the weights' initialization and the data stream
    seed: int = 0
    # run the model through torch.compile
    compile: bool = False
    # where to save checkpoints; None: never save
    checkpoint: str | None = None
    # save every this many steps (and at the end); None: only at the end and at stop_after
    save_every: int | None = None
    # save and stop after this step (a time-limited job); None: run to `steps`
    stop_after: int | None = None
    # continue the run saved in `checkpoint`
    resume: bool = False
    # read the loss and time the steps every this many steps (each read is a CPU-GPU sync)
    log_every: int = 1
    # "cpu", "cuda", ...; None: hardware.detect_device()
    device: str | None = None

    def __post_init__(self) -> None:
        for name in ("steps", "batch", "seq_len", "accum", "log_every"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}")
        if self.min_lr is None:
            object.__setattr__(self, "min_lr", self.lr / 10)
        if self.warmup is None:
            object.__setattr__(self, "warmup", self.steps // 10)
        assert self.min_lr is not None and self.warmup is not None
        if not (self.lr > 0 and math.isfinite(self.lr)) or not 0 <= self.min_lr <= self.lr:
            raise ValueError(f"need 0 < lr and 0 <= min_lr <= lr, got lr {self.lr}, min_lr {self.min_lr}")
        if not 0 <= self.warmup <= self.steps:
            raise ValueError(f"warmup must be between 0 and steps ({self.steps}), got {self.warmup}")
        if self.weight_decay < 0 or self.grad_clip < 0:
            raise ValueError("weight_decay and grad_clip must be >= 0")
        if not 0 <= self.seed < 2**31:
            raise ValueError(f"seed must be in [0, 2**31), got {self.seed}")
        for name in ("save_every", "stop_after"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.checkpoint is None and (self.save_every or self.stop_after or self.resume):
            raise ValueError("save_every, stop_after and resume need a checkpoint path")

    @property
    def tokens_per_step(self) -> int:
        """Tokens one optimizer step learns from: batch · seq_len · accum."""
        return self.batch * self.seq_len * self.accum

    def schedule(self) -> dict[str, float]:
        """The learning-rate schedule's arguments (lr_at's, without the step)."""
        assert self.min_lr is not None and self.warmup is not None
        return {"max_lr": self.lr, "min_lr": self.min_lr, "warmup_steps": self.warmup, "decay_steps": self.steps}

    def run_fields(self) -> dict[str, Any]:
        """The fields that fix the run's arithmetic: a resumed run must agree on every one."""
        skip = {"compile", "checkpoint", "save_every", "stop_after", "resume", "log_every", "device"}
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name not in skip}


@dataclass(frozen=True)
class StepRecord:
    """What one optimizer step measured."""

    step: int  # 1-based number of the optimizer step in the run
    loss: float  # mean cross-entropy over the step's micro-batches (nats per token)
    lr: float  # learning rate this step used
    grad_norm: float  # global L2 norm of the gradient before clipping (unscaled)
    seconds: float  # wall time of the step (with log_every > 1: the mean over its logging interval)
    tokens_per_s: float  # tokens_per_step / seconds
    mfu: float  # model FLOPs utilization: flops_per_token · tokens_per_s / peak_flop_per_s
    peak_memory_bytes: int  # peak memory the run has added so far (see train)


@dataclass(frozen=True)
class TrainResult:
    """The records of one invocation of train() and what they were measured against."""

    records: tuple[StepRecord, ...]  # the steps run in this invocation, in order
    model: str
    device: str
    precision: str
    n_params: int
    tokens_per_step: int
    flops_per_token: int  # 6N + 12·L·H·Q·T (PaLM App. B; nanoGPT's estimate_mfu)
    peak_flop_per_s: float  # the MFU reference
    peak_source: str  # where peak_flop_per_s comes from
    entropy_floor: float  # the best loss possible on this data (nats per token)
    saved_at: tuple[int, ...]  # steps after which a checkpoint was written
    log_every: int = 1  # the logging interval the records were timed over

    @property
    def losses(self) -> list[float]:
        """One loss per optimizer step run in this invocation."""
        return [r.loss for r in self.records]

    @property
    def first_step(self) -> int:
        """1-based number of the first step run in this invocation."""
        return self.records[0].step

    @property
    def step(self) -> int:
        """Number of the last step run."""
        return self.records[-1].step

    @property
    def final_loss(self) -> float:
        """Loss of the last step run."""
        return self.records[-1].loss

    @property
    def tokens_per_s(self) -> float:
        """Throughput after the first logging interval (it pays for allocation and compilation), if there are more."""
        first_log = next(i for i, r in enumerate(self.records) if r.step % self.log_every == 0 or r is self.records[-1])
        timed = self.records[first_log + 1:] or self.records
        return self.tokens_per_step * len(timed) / sum(r.seconds for r in timed)

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization at tokens_per_s."""
        return self.flops_per_token * self.tokens_per_s / self.peak_flop_per_s

    @property
    def peak_memory_bytes(self) -> int:
        """Peak memory the run added (the last record's running peak)."""
        return self.records[-1].peak_memory_bytes

    def as_dict(self) -> dict[str, Any]:
        """The CLI's JSON object."""
        return {
            "model": self.model,
            "device": self.device,
            "precision": self.precision,
            "final_loss": self.final_loss,
            "losses": self.losses,
            "first_step": self.first_step,
            "step": self.step,
            "tokens_per_s": self.tokens_per_s,
            "mfu": self.mfu,
            "peak_memory_bytes": self.peak_memory_bytes,
            "n_params": self.n_params,
            "tokens_per_step": self.tokens_per_step,
            "flops_per_token": self.flops_per_token,
            "peak_flop_per_s": self.peak_flop_per_s,
            "peak_source": self.peak_source,
            "entropy_floor": self.entropy_floor,
            "lrs": [r.lr for r in self.records],
            "grad_norms": [r.grad_norm for r in self.records],
            "saved_at": list(self.saved_at),
        }


# ---------------------------------------------------------------------------------------------
# Pieces of the loop


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig, device: torch.device) -> torch.optim.AdamW:
    """AdamW with weight decay on matrices and embeddings only (or on all, weight_decay_all); fused on CUDA."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]
    if cfg.weight_decay_all:  # one group: biases and norm weights decay too
        groups = [{"params": params, "weight_decay": cfg.weight_decay}]
    # fused: a few multi-tensor kernels update every parameter of a group (a for-loop launches several kernels
    # per parameter, foreach a few per list of parameters); CUDA only here
    return torch.optim.AdamW(groups, lr=cfg.lr, betas=cfg.betas, fused=device.type == "cuda")


def reference_flop_per_s(device_type: str, precision: str) -> tuple[float, str]:
    """The MFU reference: the datasheet peak of this GPU and dtype, else a measured matmul rate."""
    if device_type == "cuda":
        key = hardware.gpu_key(torch.cuda.get_device_name())
        if key is not None and (key, precision) in hardware.PEAKS:
            return hardware.PEAKS[(key, precision)].value, f"datasheet, {key} {precision} dense"
    return _measured_flop_per_s(device_type, precision, torch.get_num_threads())


@functools.cache
def _measured_flop_per_s(device_type: str, precision: str, threads: int) -> tuple[float, str]:
    """The best of three measured matmul rates, once per process and thread count."""
    # no datasheet entry (a CPU, an unlisted GPU): best, not median, because on a shared machine a
    # neighbour's load only ever slows the matmul down
    n = 512 if device_type == "cpu" else 4096
    rate = max(hardware.measure_matmul_flop_per_s(n, precision, device_type, min_run_time_s=0.05) for _ in range(3))
    return rate, f"best measured {n} x {n} {precision} matmul on {device_type}, {threads} thread(s)"


def rng_state() -> dict[str, Any]:
    """Every random number generator a run may touch: torch (CPU, each CUDA GPU, MPS), Python, NumPy."""
    numpy_state = np.random.get_state(legacy=False)
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "mps": [torch.mps.get_rng_state()] if torch.backends.mps.is_available() else [],
        "python": random.getstate(),
        "numpy": {
            "bit_generator": numpy_state["bit_generator"],
            "key": torch.from_numpy(numpy_state["state"]["key"].astype(np.int64)),
            "pos": int(numpy_state["state"]["pos"]),
            "has_gauss": int(numpy_state["has_gauss"]),
            "gauss": float(numpy_state["gauss"]),
        },
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what rng_state() returned."""
    torch.set_rng_state(state["torch"])
    if torch.cuda.is_available() and state["cuda"]:
        torch.cuda.set_rng_state_all(state["cuda"])
    if torch.backends.mps.is_available() and state.get("mps"):
        torch.mps.set_rng_state(state["mps"][0])
    random.setstate(state["python"])
    saved = state["numpy"]
    np.random.set_state({
        "bit_generator": saved["bit_generator"],
        "state": {"key": saved["key"].numpy().astype(np.uint32), "pos": saved["pos"]},
        "has_gauss": saved["has_gauss"],
        "gauss": saved["gauss"],
    })


class CheckpointError(ValueError):
    """A checkpoint that cannot be read, or that belongs to another run."""


def save_checkpoint(state: dict[str, Any], path: str | os.PathLike[str]) -> None:
    """Write `state` to `path` atomically: a crash while saving leaves the previous file in place."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    # write a temporary file beside the target (same file system), make it durable, then rename it
    # over the target in one step: os.replace is atomic on POSIX and Windows
    handle, temporary = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise
    if hasattr(os, "O_DIRECTORY"):  # make the rename itself durable (POSIX)
        directory = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)


def load_checkpoint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a checkpoint written by save_checkpoint; CheckpointError if it is missing or unreadable."""
    try:
        # weights_only: tensors and plain containers only, no arbitrary objects unpickled
        state = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {os.fspath(path)!r} does not exist") from None
    except Exception as error:  # noqa: BLE001 - torch.load raises many kinds on a corrupt file
        reason = " ".join(str(error).split())[:200]
        raise CheckpointError(f"cannot read checkpoint {os.fspath(path)!r}: {reason}") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{os.fspath(path)!r} is not a {CHECKPOINT_FORMAT} checkpoint")
    return state


def _to_device(tensor: torch.Tensor, device: torch.device) -> torch.Tensor:
    """Host → device copy: pinned and non-blocking on CUDA (the CPU queues it and goes on), plain elsewhere."""
    # On the one stream the loop uses, the copy runs between the GPU's kernels, not beside them; what
    # non_blocking buys is that the CPU does not wait for it and keeps queueing work (overlapping the copy
    # with compute would take a second CUDA stream: PyTorch's pin_memory/non_blocking tutorial).
    if device.type == "cuda":
        return tensor.pin_memory().to(device, non_blocking=True)
    return tensor.to(device)


def _synchronize(device: torch.device) -> None:
    """Wait for the device's queued kernels (a CPU-GPU sync point); nothing to wait for on a CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------------------------
# The loop


def _check_resumable(state: dict[str, Any], model_cfg: ModelConfig, cfg: TrainConfig) -> None:
    """CheckpointError unless `state` is a step of this very run, with steps left to run before cfg's last."""
    saved_run = {**state["run"], "betas": tuple(state["run"]["betas"])}
    if state["model_config"] != dataclasses.asdict(model_cfg) or saved_run != cfg.run_fields():
        ours = {**cfg.run_fields(), **dataclasses.asdict(model_cfg)}
        theirs = {**saved_run, **state["model_config"]}
        diff = ", ".join(f"{k} {theirs.get(k)!r} (now {v!r})" for k, v in ours.items() if theirs.get(k) != v)
        raise CheckpointError(f"checkpoint {cfg.checkpoint!r} belongs to another run: {diff}")
    last = min(cfg.steps, cfg.stop_after or cfg.steps)
    if state["step"] >= last:
        raise CheckpointError(f"checkpoint {cfg.checkpoint!r} is already at step {state['step']}: nothing to run "
                              f"up to step {last}")


def train(
    model_cfg: ModelConfig,
    cfg: TrainConfig,
    *,
    peak_flop_per_s: float | None = None,
    progress: TextIO | None = None,
    on_step: Callable[[StepRecord], None] | None = None,
) -> TrainResult:
    """Train lecturelib.models.GPT(model_cfg) on the synthetic walk as `cfg` says; return the step records.

    peak_flop_per_s: the MFU reference (default: reference_flop_per_s). progress: a stream for a tqdm
    bar (None: no bar). on_step: called with each StepRecord as soon as it is logged. Peak memory is
    what the run added since it began: on CUDA torch.cuda.max_memory_allocated (tensors), on a CPU the
    process's peak resident memory (Linux VmHWM), which also counts what malloc keeps after a free.
    """
    if cfg.seq_len > model_cfg.n_ctx:
        raise ValueError(f"seq_len {cfg.seq_len} exceeds the model's context n_ctx = {model_cfg.n_ctx}")
    if cfg.checkpoint is not None and not os.path.isdir(os.path.dirname(os.path.abspath(cfg.checkpoint))):
        # fail now, not at the first save after hours of training
        raise FileNotFoundError(errno.ENOENT, "no such folder for the checkpoint", os.path.dirname(cfg.checkpoint))
    device = torch.device(cfg.device or hardware.detect_device())
    memory = MemoryHighWater(device.type)  # the level before the run: the model is not built yet

    # 1. Build: seeded weights, the optimizer, the loss scaler (active for fp16 only)
    torch.manual_seed(cfg.seed)
    model = GPT(model_cfg).to(device)
    optimizer = make_optimizer(model, cfg, device)
    scaler = torch.amp.GradScaler(device.type, enabled=cfg.precision == "fp16")
    step = 0  # optimizer steps done; with the seed it fixes the learning rate and the data stream's position

    # 2. Resume: weights, optimizer moments, loss scale, step and every RNG state, exactly as saved
    if cfg.resume:
        assert cfg.checkpoint is not None
        state = load_checkpoint(cfg.checkpoint)
        _check_resumable(state, model_cfg, cfg)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        step = state["step"]
        set_rng_state(state["rng"])

    # 3. Compile (optional): the first step pays for it
    forward = torch.compile(model) if cfg.compile else model
    model.train()

    data = SyntheticTokens(model_cfg.vocab_size, cfg.seq_len, cfg.seed)
    autocast = torch.autocast(
        device.type, dtype=AUTOCAST_DTYPES.get(cfg.precision, torch.bfloat16), enabled=cfg.precision != "fp32"
    )
    if peak_flop_per_s is None:
        peak_flop_per_s, peak_source = reference_flop_per_s(device.type, cfg.precision)
    else:
        peak_source = "given"
    flops_per_token = train_flops_per_token(model_cfg, cfg.seq_len)
    last = min(cfg.steps, cfg.stop_after or cfg.steps)

    records: list[StepRecord] = []
    saved_at: list[int] = []
    pending: list[tuple[int, float, torch.Tensor, torch.Tensor]] = []  # (step, lr, loss, grad norm) not logged yet
    bar = tqdm(total=cfg.steps, initial=step, file=progress, disable=progress is None, unit="step")
    _synchronize(device)
    interval_start = time.perf_counter()
    while step < last:
        # 4. Schedule: the learning rate of this step, set on every parameter group
        lr = lr_at(step, **cfg.schedule())  # type: ignore[arg-type]
        for group in optimizer.param_groups:
            group["lr"] = lr

        # 5. Forward and backward over `accum` micro-batches; gradients add up in .grad
        loss_sum = torch.zeros((), device=device)
        for micro in range(cfg.accum):
            first_sample = (step * cfg.accum + micro) * cfg.batch  # the stream's position: split-independent
            x, y = (_to_device(t, device) for t in data.batch(first_sample, cfg.batch))  # (B, T) each
            with autocast:  # bf16/fp16 matmuls; weights, gradients and optimizer stay fp32
                logits = forward(x)  # (B, T, vocab)
                loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())  # mean over B·T tokens
            loss_sum += loss.detach()  # stays on the device: no sync
            # each micro-batch is 1/accum of the step's batch: the summed gradient is the mean's gradient
            scaler.scale(loss / cfg.accum).backward()  # fp16: loss × scale, so small gradients survive

        # 6. Clip: unscale first (fp16), so the norm and the threshold are in true units
        scaler.unscale_(optimizer)
        max_norm = cfg.grad_clip if cfg.grad_clip > 0 else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)  # norm before clipping

        # 7. Update: AdamW (fp16: skipped if a gradient overflowed, and the scale halves)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)  # free the gradients until the next backward
        step += 1
        pending.append((step, lr, loss_sum / cfg.accum, grad_norm.detach()))

        # 8. Log, every log_every steps and at the last: read the pending values back, time the interval
        if step % cfg.log_every == 0 or step == last:
            _synchronize(device)  # wait for the queued steps (a CPU-GPU sync point), then time them
            seconds = (time.perf_counter() - interval_start) / len(pending)  # the interval's mean step time
            losses = torch.stack([loss for _, _, loss, _ in pending]).tolist()
            norms = torch.stack([norm for _, _, _, norm in pending]).tolist()
            tokens_per_s = cfg.tokens_per_step / seconds
            peak_bytes = memory.peak_added_bytes()
            for (number, step_lr, _, _), loss_value, norm_value in zip(pending, losses, norms):
                record = StepRecord(
                    step=number, loss=loss_value, lr=step_lr, grad_norm=norm_value, seconds=seconds,
                    tokens_per_s=tokens_per_s, mfu=flops_per_token * tokens_per_s / peak_flop_per_s,
                    peak_memory_bytes=peak_bytes,
                )
                records.append(record)
                if on_step is not None:
                    on_step(record)
            bar.update(len(pending))
            bar.set_postfix(loss=f"{losses[-1]:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}")
            pending = []
            interval_start = time.perf_counter()  # the next interval starts now: logging is not a step's time

        # 9. Checkpoint: every save_every steps, at stop_after and at the end; the clock stops meanwhile
        if cfg.checkpoint is not None and (
            (cfg.save_every is not None and step % cfg.save_every == 0) or step == last
        ):
            _synchronize(device)  # the steps' queued GPU work belongs to the steps, not to the save
            pause_start = time.perf_counter()
            save_checkpoint({
                "format": CHECKPOINT_FORMAT,
                "model_config": dataclasses.asdict(model_cfg),
                "run": cfg.run_fields(),  # the seed among them: with `step` it fixes the data stream's position
                "step": step,
                "model": model.state_dict(),  # the uncompiled module: no "_orig_mod." prefixes
                "optimizer": optimizer.state_dict(),
                "scaler": scaler.state_dict(),
                "schedule": cfg.schedule(),
                "rng": rng_state(),
            }, cfg.checkpoint)
            saved_at.append(step)
            interval_start += time.perf_counter() - pause_start  # the save's time is not a step's
    bar.close()

    return TrainResult(
        records=tuple(records), model=model_cfg.name, device=str(device), precision=cfg.precision,
        n_params=n_params(model_cfg), tokens_per_step=cfg.tokens_per_step, flops_per_token=flops_per_token,
        peak_flop_per_s=peak_flop_per_s, peak_source=peak_source, entropy_floor=data.entropy_floor_nats,
        saved_at=tuple(saved_at), log_every=cfg.log_every,
    )


# ---------------------------------------------------------------------------------------------
# Memory a forward pass keeps for the backward pass


@contextlib.contextmanager
def _saved_tensors(into: list[torch.Tensor]) -> Iterator[None]:
    """Collect every tensor autograd saves for the backward pass while the block runs."""
    def pack(tensor: torch.Tensor) -> torch.Tensor:
        into.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        yield


def saved_activation_breakdown(
    model_cfg: ModelConfig, batch: int, seq_len: int, precision: str, *, seed: int = 0, device: str = "cpu"
) -> dict[str, int]:
    """Bytes the forward pass of one micro-batch keeps for backward, by dtype: distinct storages, parameters excluded."""
    # What autograd saves lives until backward: the layers' inputs and intermediate results, and under
    # autocast also the 16-bit copies of the weights it made. Views of one storage are counted once.
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    torch.manual_seed(seed)
    model = GPT(model_cfg).to(device)
    x, y = (t.to(device) for t in SyntheticTokens(model_cfg.vocab_size, seq_len, seed).batch(0, batch))
    saved: list[torch.Tensor] = []
    dtype = AUTOCAST_DTYPES.get(precision, torch.bfloat16)
    with _saved_tensors(saved), torch.autocast(torch.device(device).type, dtype=dtype, enabled=precision != "fp32"):
        logits = model(x)  # (B, T, vocab)
        F.cross_entropy(logits.flatten(0, 1), y.flatten())
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    storages = {t.untyped_storage().data_ptr(): (t.untyped_storage().nbytes(), t.dtype) for t in saved}
    breakdown: dict[str, int] = {}
    for ptr, (n_bytes, tensor_dtype) in storages.items():
        if ptr not in parameters:
            name = str(tensor_dtype).removeprefix("torch.")
            breakdown[name] = breakdown.get(name, 0) + n_bytes
    return dict(sorted(breakdown.items()))


def saved_activation_bytes(
    model_cfg: ModelConfig, batch: int, seq_len: int, precision: str, *, seed: int = 0, device: str = "cpu"
) -> int:
    """Total of saved_activation_breakdown: bytes one micro-batch's forward keeps for the backward pass."""
    return sum(saved_activation_breakdown(model_cfg, batch, seq_len, precision, seed=seed, device=device).values())


def format_records(records: Sequence[StepRecord]) -> str:
    """A table of step records: loss, lr, gradient norm, tokens/s, MFU, peak memory."""
    lines = [f"{'step':>5} {'loss':>8} {'lr':>9} {'|g|':>7} {'tokens/s':>10} {'MFU':>7} {'peak MiB':>9}"]
    for r in records:
        lines.append(
            f"{r.step:5d} {r.loss:8.4f} {r.lr:9.2e} {r.grad_norm:7.3f} {r.tokens_per_s:10,.0f} "
            f"{r.mfu:7.2%} {r.peak_memory_bytes / 2**20:9.1f}"
        )
    return "\n".join(lines)
