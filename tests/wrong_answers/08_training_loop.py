"""Notebook 08: mistakes that must lose their exercise's points, and only those."""

from wrong_answers import Wrong

WRONG = [
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
          fails=("ex8_4_test",)),
    Wrong(cell="ex8_5", label="accumulation without the 1/A scale: each micro-batch's whole loss backpropagated",
          source='''
import os
import random
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn


def train_loop(model: nn.Module, make_batch: Callable[[int, int], tuple[Tensor, Tensor]], steps: int,
               accum_steps: int, lr: float, ckpt_path: str | None = None, stop_after: int | None = None) -> list[float]:
    """Train `model` with AdamW for `steps` optimizer steps of `accum_steps` micro-batches; return each step's loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    step = 0  # optimizer steps done
    if ckpt_path is not None and os.path.exists(ckpt_path):  # resume: every state the next step depends on
        state = torch.load(ckpt_path, weights_only=False)  # our own file (NumPy's RNG state is no tensor)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
        torch.set_rng_state(state["torch_rng"])  # dropout on the CPU
        if torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state["cuda_rng"])  # ... and on GPUs
        random.setstate(state["python_rng"])
        np.random.set_state(state["numpy_rng"])
    last = steps if stop_after is None else min(steps, stop_after)
    model.train()  # dropout on
    losses = []
    while step < last:
        total = 0.0
        for micro in range(accum_steps):
            x, y = make_batch(step, micro)
            loss = model(x, y)  # the micro-batch's mean loss
            loss.backward()  # .grad adds up the micro-batches' gradients
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        losses.append(total / accum_steps)
        if ckpt_path is not None:  # a temporary file, then one rename over the old checkpoint: atomic
            temporary = ckpt_path + ".tmp"
            torch.save({
                "model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "python_rng": random.getstate(), "numpy_rng": np.random.get_state(),
            }, temporary)
            os.replace(temporary, ckpt_path)
    return losses
''', fails=("ex8_5_accum",)),
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
''', fails=("ex8_4_test",)),
    Wrong(cell="ex8_5", label="a resume that forgets the RNG states (weights, optimizer and step restored)",
          source='''
import os
import random
from collections.abc import Callable

import numpy as np
import torch
from torch import Tensor, nn


def train_loop(model: nn.Module, make_batch: Callable[[int, int], tuple[Tensor, Tensor]], steps: int,
               accum_steps: int, lr: float, ckpt_path: str | None = None, stop_after: int | None = None) -> list[float]:
    """Train `model` with AdamW for `steps` optimizer steps of `accum_steps` micro-batches; return each step's loss."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    step = 0  # optimizer steps done
    if ckpt_path is not None and os.path.exists(ckpt_path):  # resume: every state the next step depends on
        state = torch.load(ckpt_path, weights_only=False)  # our own file (NumPy's RNG state is no tensor)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        step = state["step"]
    last = steps if stop_after is None else min(steps, stop_after)
    model.train()  # dropout on
    losses = []
    while step < last:
        total = 0.0
        for micro in range(accum_steps):
            x, y = make_batch(step, micro)
            loss = model(x, y)  # the micro-batch's mean loss
            (loss / accum_steps).backward()  # .grad adds up: the gradient of the mean over the micro-batches
            total += loss.item()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        losses.append(total / accum_steps)
        if ckpt_path is not None:  # a temporary file, then one rename over the old checkpoint: atomic
            temporary = ckpt_path + ".tmp"
            torch.save({
                "model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step,
                "torch_rng": torch.get_rng_state(),
                "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
                "python_rng": random.getstate(), "numpy_rng": np.random.get_state(),
            }, temporary)
            os.replace(temporary, ckpt_path)
    return losses
''', fails=("ex8_5_resume",)),
]
