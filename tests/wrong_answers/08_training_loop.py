"""Notebook 08: mistakes that must lose their exercise's points, and only those."""

from wrong_answers import Wrong

# The loop's cells that use a schedule (min_lr given): a wrong lr_at (Exercise 8.1) fails them too, since the loop
# calls the student's own lr_at
SCHEDULED = ("ex8_6_schedule", "ex8_6_resume")

WRONG = [
    Wrong(cell="ex8_1", label="nanoGPT's warm-up before December 2024: max_lr·s/w, the first step at 0", source='''
import math


def lr_at(step: int, max_lr: float, min_lr: float, warmup_steps: int, decay_steps: int) -> float:
    """The learning rate of optimizer step `step` (0 for the first) under nanoGPT's schedule."""
    if step < warmup_steps:
        return max_lr * step / warmup_steps  # nanoGPT's warm-up before December 2024: the first step at 0
    if step > decay_steps:
        return min_lr
    decay_ratio = (step - warmup_steps) / (decay_steps - warmup_steps)
    return min_lr + 0.5 * (1.0 + math.cos(math.pi * decay_ratio)) * (max_lr - min_lr)
''', fails=("ex8_1_test", *SCHEDULED), teaches="the first optimizer step must already learn: its rate is not 0"),
    Wrong(cell="ex8_3", label="fp16's range as two thresholds, its rounding at the edges ignored", source='''
import torch


def fp16_grad_survives(grad: float, scale: float) -> bool:
    """Whether grad · scale, stored in fp16, is neither flushed to zero nor overflowed to infinity."""
    return 2.0**-24 <= abs(grad * scale) <= 65504.0  # fp16's smallest subnormal and largest value
''', fails=("ex8_3_test",), teaches="a product that fp16 rounds to infinity was counted as surviving, or the reverse"),
    Wrong(cell="ex8_4", label="Adam with L2 regularization: the decay added to the gradient (coupled)", source='''
import math

import torch


def adamw_step(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, step: int,
               lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """One AdamW update of `param` and of its two moment estimates, in place; `step` counts the updates from 1."""
    beta1, beta2 = betas
    grad = grad + weight_decay * param  # L2 regularization: the decay goes into the gradient, through 1/√v̂
    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    m_hat = exp_avg / (1 - beta1**step)
    v_hat = exp_avg_sq / (1 - beta2**step)
    param.sub_(lr * m_hat / (v_hat.sqrt() + eps))
''',
          fails=("ex8_4_test",), teaches="after some step your weight or its moments differ from torch.optim.AdamW's"),
    Wrong(cell="ex8_4", label="AdamW without bias correction", source='''
import math

import torch


def adamw_step(param: torch.Tensor, grad: torch.Tensor, exp_avg: torch.Tensor, exp_avg_sq: torch.Tensor, step: int,
               lr: float, betas: tuple[float, float], eps: float, weight_decay: float) -> None:
    """One AdamW update of `param` and of its two moment estimates, in place; `step` counts the updates from 1."""
    beta1, beta2 = betas
    param.mul_(1 - lr * weight_decay)
    exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    param.sub_(lr * exp_avg / (exp_avg_sq.sqrt() + eps))  # m and v used as they are: no bias correction
''', fails=("ex8_4_test",),
          teaches="after some step your weight or its moments differ from torch.optim.AdamW's"),
    Wrong(cell="ex8_5", label="a checkpoint without the random number generators (weights, AdamW, scaler, step)",
          source='''
import os

import torch
from torch import nn


def save_state(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
               step: int) -> None:
    """Save everything the run's next step depends on to `path`, so that a crash while saving leaves the last file."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
             "step": step}  # the weights, AdamW's moments, the loss scale and the step: but no random number generator
    temporary = path + ".tmp"
    torch.save(state, temporary)
    os.replace(temporary, path)


def restore_state(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> int:
    """Put the run saved at `path` back into these objects and the random number generators; return its step."""
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scaler.load_state_dict(state["scaler"])
    return state["step"]
''', fails=("ex8_5_restore", "ex8_5_atomic", "ex8_6_resume"),
          teaches="the random number generators (torch's, Python's, NumPy's) did not come back"),
    Wrong(cell="ex8_5", label="torch.save straight onto the checkpoint: no temporary file, no os.replace", source='''
import random

import numpy as np
import torch
from torch import nn


def save_state(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
               step: int) -> None:
    """Save everything the run's next step depends on to `path`, so that a crash while saving leaves the last file."""
    torch.save({  # straight onto the only checkpoint: torch.save truncates it first
        "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
        "step": step, "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(), "numpy_rng": np.random.get_state(),
    }, path)


def restore_state(path: str, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> int:
    """Put the run saved at `path` back into these objects and the random number generators; return its step."""
    state = torch.load(path, weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scaler.load_state_dict(state["scaler"])
    torch.set_rng_state(state["torch_rng"])
    random.setstate(state["python_rng"])
    np.random.set_state(state["numpy_rng"])
    return state["step"]
''', fails=("ex8_5_atomic",), teaches="after a crash while saving, the previous checkpoint is gone or unreadable"),
    Wrong(cell="ex8_6", label="accumulation without the 1/A scale: each micro-batch's whole loss backpropagated",
          source='''
import os
from collections.abc import Callable

import torch
from torch import Tensor, nn


def train_loop(model: nn.Module, make_batch: Callable[[int, int], tuple[Tensor, Tensor]], steps: int,
               accum_steps: int, lr: float, ckpt_path: str | None = None, stop_after: int | None = None, *,
               warmup_steps: int = 0, min_lr: float | None = None, precision: str = "fp32") -> list[float]:
    """Train `model` with AdamW for `steps` optimizer steps of `accum_steps` micro-batches; return each step's loss."""
    device_type = next(model.parameters()).device.type  # autocast and the scaler work per device type
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    scaler = torch.amp.GradScaler(device_type, enabled=precision == "fp16")  # disabled: every call passes through
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)  # None: fp32, no autocast
    step = 0  # optimizer steps done
    if ckpt_path is not None and os.path.exists(ckpt_path):
        step = restore_state(ckpt_path, model, optimizer, scaler)  # Exercise 8.5
    last = steps if stop_after is None else min(steps, stop_after)
    model.train()  # dropout on
    losses = []
    while step < last:
        if min_lr is not None:  # the schedule of Exercise 8.1; without min_lr, the constant lr
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step, lr, min_lr, warmup_steps, steps)
        total = 0.0
        for micro in range(accum_steps):
            x, y = make_batch(step, micro)
            with torch.autocast(device_type, dtype=low or torch.bfloat16, enabled=low is not None):
                loss = model(x, y)  # the micro-batch's mean loss; 16-bit matmuls under autocast
            scaler.scale(loss).backward()  # .grad adds up the micro-batches' gradients
            total += loss.item()
        scaler.unscale_(optimizer)  # true gradients before the norm is measured (fp16)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)  # fp16: skipped if a gradient overflowed
        scaler.update()  # fp16: the scale halves after a skip, doubles after 2000 clean steps
        optimizer.zero_grad(set_to_none=True)
        step += 1
        losses.append(total / accum_steps)
        if ckpt_path is not None:
            save_state(ckpt_path, model, optimizer, scaler, step)  # Exercise 8.5
    return losses
''', fails=("ex8_6_update", "ex8_6_schedule", "ex8_6_resume", "ex8_6_bf16", "ex8_6_fp16"),
          teaches="with several micro-batches the step's gradient is not the gradient of their mean loss"),
    Wrong(cell="ex8_6", label="last year's loop: the new arguments accepted, never used (no schedule, no autocast)",
          source='''
import os
from collections.abc import Callable

import torch
from torch import Tensor, nn


def train_loop(model: nn.Module, make_batch: Callable[[int, int], tuple[Tensor, Tensor]], steps: int,
               accum_steps: int, lr: float, ckpt_path: str | None = None, stop_after: int | None = None, *,
               warmup_steps: int = 0, min_lr: float | None = None, precision: str = "fp32") -> list[float]:
    """Train `model` with AdamW for `steps` optimizer steps of `accum_steps` micro-batches; return each step's loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    scaler = torch.amp.GradScaler("cpu", enabled=False)  # warmup_steps, min_lr and precision: accepted, never used
    step = 0  # optimizer steps done
    if ckpt_path is not None and os.path.exists(ckpt_path):
        step = restore_state(ckpt_path, model, optimizer, scaler)
    last = steps if stop_after is None else min(steps, stop_after)
    model.train()
    losses = []
    while step < last:
        total = 0.0
        for micro in range(accum_steps):
            x, y = make_batch(step, micro)
            loss = model(x, y)
            (loss / accum_steps).backward()
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        losses.append(total / accum_steps)
        if ckpt_path is not None:
            save_state(ckpt_path, model, optimizer, scaler, step)
    return losses
''', fails=("ex8_6_schedule", "ex8_6_resume", "ex8_6_bf16", "ex8_6_fp16"),
          teaches="the learning rate did not follow lr_at(step, lr, min_lr, warmup_steps, steps) at each optimizer step"),
]
