"""MFU of the course's training loop against a nanoGPT-style loop: same model, data, GPU and process.

    .venv/bin/python benchmarks/train_mfu.py --model gpt2-small --batch 12 --seq-len 1024 --precision bf16 --compile

The course loop is lecturelib.training.train (logging every --log-every steps). The nanoGPT-style loop
below is karpathy/nanoGPT's train.py reduced to its training step: fused AdamW, autocast, a compiled
model, the next batch fetched (pinned, non-blocking) while the GPU works, loss.item() only when logging.
Both train lecturelib.models.GPT on lecturelib.training.SyntheticTokens and count FLOPs the same way
(6N + 12·L·H·Q·T per token, nanoGPT's estimate_mfu); the peak is the datasheet's (hardware.PEAKS).
Each loop runs `--rounds` times, alternating; the first --warmup steps of a run are not timed.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import torch
import torch.nn.functional as F

from lecturelib.configs import ModelConfig, from_name
from lecturelib.flops import train_flops_per_token
from lecturelib.hardware import detect_device
from lecturelib.models import GPT
from lecturelib.training import (
    AUTOCAST_DTYPES,
    SyntheticTokens,
    TrainConfig,
    lr_at,
    make_optimizer,
    reference_flop_per_s,
    train,
)


def course_loop(model_cfg: ModelConfig, run: TrainConfig, warmup: int) -> float:
    """Tokens/s of lecturelib.training.train over the steps after the first `warmup`."""
    result = train(model_cfg, run)
    timed = [r for r in result.records if r.step > warmup]
    return run.tokens_per_step * len(timed) / sum(r.seconds for r in timed)


def nanogpt_style_loop(model_cfg: ModelConfig, run: TrainConfig, warmup: int) -> float:
    """Tokens/s of a nanoGPT-style loop over the steps after the first `warmup`."""
    device = torch.device(run.device or detect_device())
    torch.manual_seed(run.seed)
    model = GPT(model_cfg).to(device)
    optimizer = make_optimizer(model, run, device)  # nanoGPT's configure_optimizers: decay on 2-D, fused
    scaler = torch.amp.GradScaler(device.type, enabled=run.precision == "fp16")
    compiled = torch.compile(model) if run.compile else model
    ctx = torch.autocast(device.type, dtype=AUTOCAST_DTYPES.get(run.precision, torch.bfloat16),
                         enabled=run.precision != "fp32")
    data = SyntheticTokens(model_cfg.vocab_size, run.seq_len, run.seed)
    sample = 0

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal sample
        x, y = data.batch(sample, run.batch)
        sample += run.batch
        if device.type == "cuda":
            return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        return x.to(device), y.to(device)

    X, Y = get_batch()
    for it in range(run.steps):
        if it == warmup:
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
        for group in optimizer.param_groups:
            group["lr"] = lr_at(it, **run.schedule())  # type: ignore[arg-type]
        for _ in range(run.accum):
            with ctx:
                logits = compiled(X)
                loss = F.cross_entropy(logits.flatten(0, 1), Y.flatten()) / run.accum
            X, Y = get_batch()  # async prefetch while the GPU runs forward
            scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), run.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        if it % run.log_every == 0:
            loss.item()  # nanoGPT's only sync point: reading the loss to log it
    if device.type == "cuda":
        torch.cuda.synchronize()
    return run.tokens_per_step * (run.steps - warmup) / (time.perf_counter() - t0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gpt2-small")
    parser.add_argument("--batch", type=int, default=12)
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--accum", type=int, default=1)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=10, help="steps not timed (compilation, allocator)")
    parser.add_argument("--log-every", type=int, default=10)
    parser.add_argument("--precision", default="bf16", choices=["fp32", "bf16", "fp16"])
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--device", default=None)
    args = parser.parse_args(argv)
    if not 0 <= args.warmup < args.steps:
        parser.error("need 0 <= --warmup < --steps")
    if args.warmup % args.log_every:  # the course loop times whole logging intervals: none may straddle the warm-up
        parser.error("--warmup must be a multiple of --log-every")
    model_cfg = from_name(args.model)
    run = TrainConfig(steps=args.steps, batch=args.batch, seq_len=args.seq_len, accum=args.accum,
                      precision=args.precision, lr=6e-4, warmup=args.warmup, compile=args.compile,
                      log_every=args.log_every, device=args.device)
    device = run.device or detect_device()
    peak, source = reference_flop_per_s(torch.device(device).type, args.precision)
    flops_per_token = train_flops_per_token(model_cfg, args.seq_len)
    rates: dict[str, list[float]] = {"course": [], "nanogpt_style": []}
    for _ in range(args.rounds):  # alternate, so that clocks and neighbours treat both alike
        rates["nanogpt_style"].append(nanogpt_style_loop(model_cfg, run, args.warmup))
        rates["course"].append(course_loop(model_cfg, run, args.warmup))
    best = {name: max(values) for name, values in rates.items()}
    print(json.dumps({
        "device": device,
        "device_name": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        "torch": torch.__version__,
        "model": args.model, "batch": args.batch, "seq_len": args.seq_len, "accum": args.accum,
        "precision": args.precision, "compile": args.compile, "steps": args.steps, "warmup": args.warmup,
        "flops_per_token": flops_per_token, "peak_flop_per_s": peak, "peak_source": source,
        "tokens_per_s": rates,
        "mfu": {name: [flops_per_token * r / peak for r in values] for name, values in rates.items()},
        "best_mfu_ratio_course_over_nanogpt": best["course"] / best["nanogpt_style"],
    }))
    return 0 if all(math.isfinite(r) for values in rates.values() for r in values) else 1


if __name__ == "__main__":
    sys.exit(main())
