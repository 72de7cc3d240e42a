"""The command line: `python -m lecturelib params|flops|memory|kv-cache|roofline|train ... [--json]`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import NoReturn, TypeVar

from lecturelib.configs import ModelConfig, from_json, from_name
from lecturelib.data import Unavailable, h2d_bandwidth
from lecturelib.hardware import PEAKS, peak_bytes_per_s, peak_flop_per_s, roofline
from lecturelib.flops import (
    forward_breakdown,
    forward_flops,
    forward_flops_per_token,
    kaplan_forward_flops_per_token,
    matmul_params,
    train_flops_per_token,
)
from lecturelib.memory import (
    DTYPE_BITS,
    RECIPES,
    RECOMPUTE_MODES,
    ZERO_STAGES,
    kv_cache_bytes,
    kv_cache_bytes_per_token,
    training_memory,
    zero_partition,
)
from lecturelib.params import n_params, non_embedding_params, param_breakdown
from lecturelib.training import PRECISIONS, StepRecord, TrainConfig, format_records, train
from tqdm import tqdm

PROG = "lecturelib"

Result = dict[str, object]


class CLIError(Exception):
    """Bad input: reported as one line on stderr with exit status 2."""


N = TypeVar("N", int, float)  # what an argparse type parses text into


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors raise CLIError instead of printing usage and exiting."""

    def error(self, message: str) -> NoReturn:
        raise CLIError(message)


def _argument(cast: Callable[[str], N], accepts: Callable[[N], bool], expected: str) -> Callable[[str], N]:
    """argparse type: the text cast, refused with "expected <expected>, got ..." unless `accepts` the value."""

    def parse(text: str) -> N:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accepts(value):  # an int as parsed (-3); a number as written (0, not 0.0)
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value if isinstance(value, int) else text}")
        return value

    return parse


_positive_int = _argument(int, lambda v: v > 0, "a positive integer")
# a positive, finite number (FLOPs and bytes may be written 2e12)
_positive_number = _argument(float, lambda v: v > 0 and v != float("inf"), "a positive number")
_non_negative_int = _argument(int, lambda v: v >= 0, "a non-negative integer")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every command."""
    parser = _Parser(prog=PROG, description="Resource accounting for transformer models.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        model = sub.add_mutually_exclusive_group(required=True)
        model.add_argument("--model", metavar="NAME", help="a published model, e.g. gpt2-small, llama2-7b")
        model.add_argument("--config", metavar="FILE.json", help="a custom shape: ModelConfig fields as JSON")
        sub.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
        return sub

    command("params", "parameter counts: total, non-embedding (Kaplan) and a breakdown")
    flops = command("flops", "forward FLOPs (every matmul, 2 per multiply-add) and per-token estimates")
    flops.add_argument("--seq-len", type=_positive_int, required=True, metavar="T")
    flops.add_argument("--batch", type=_positive_int, default=1, metavar="B")
    memory = command("memory", "training memory: weights, gradients, optimizer, master weights, activations "
                     "(Korthikanti et al. 2022: eager attention, dropout as the architecture trains)")
    memory.add_argument("--recipe", choices=list(RECIPES), required=True)
    memory.add_argument("--batch", type=_positive_int, required=True, metavar="B")
    memory.add_argument("--seq-len", type=_positive_int, required=True, metavar="T")
    memory.add_argument("--recompute", choices=list(RECOMPUTE_MODES), default="none")
    # ZeRO (Rajbhandari et al. 2020, Figure 1): the same keys, per GPU, with model states sharded over N GPUs
    memory.add_argument("--zero-stage", type=int, choices=list(ZERO_STAGES), default=0,
                        help="ZeRO stage: 1 shards optimizer states, 2 also gradients, 3 also weights (default 0)")
    memory.add_argument("--gpus", type=_positive_int, default=None, metavar="N",
                        help="data-parallel GPUs the model states are sharded over (default 1; needed with "
                             "--zero-stage 1, 2 or 3); bytes are per GPU")
    kv = command("kv-cache", "KV-cache bytes: 2 · n_layer · n_kv_head · head_dim · T · B elements")
    kv.add_argument("--batch", type=_positive_int, required=True, metavar="B")
    kv.add_argument("--seq-len", type=_positive_int, required=True, metavar="T")
    kv.add_argument("--dtype", choices=list(DTYPE_BITS), required=True)
    text = "where a kernel of F FLOPs moving B bytes sits on a device's roofline (datasheet peaks)"
    roof = commands.add_parser("roofline", help=text, description=text)
    roof.add_argument("--device", required=True, metavar="KEY",
                      help=f"a device of hardware.PEAKS: {', '.join(sorted({key for key, _ in PEAKS}))}")
    roof.add_argument("--dtype", required=True, metavar="DTYPE", help="fp32, tf32, bf16, fp16 or fp8 (as the device has)")
    roof.add_argument("--flops", type=_positive_number, required=True, metavar="F")
    roof.add_argument("--bytes", type=_positive_number, required=True, metavar="B", dest="n_bytes")
    roof.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    # train: lecturelib.training's loop on the synthetic walk
    train = command("train", "train a GPT on synthetic tokens: loss, tokens/s, MFU and peak memory per step")
    train.add_argument("--steps", type=_positive_int, required=True, metavar="N",
                       help="optimizer steps of the whole run (the learning rate decays over them)")
    train.add_argument("--batch", type=_positive_int, required=True, metavar="B", help="sequences per micro-batch")
    train.add_argument("--seq-len", type=_positive_int, required=True, metavar="T")
    train.add_argument("--accum", type=_positive_int, default=1, metavar="A",
                       help="micro-batches per optimizer step: a step sees B·A sequences (default 1)")
    train.add_argument("--precision", choices=list(PRECISIONS), default="fp32")
    train.add_argument("--lr", type=_positive_number, default=TrainConfig.lr, metavar="X",
                       help=f"peak learning rate (default {TrainConfig.lr:g}; min_lr is lr/10)")
    train.add_argument("--warmup", type=_non_negative_int, default=None, metavar="W",
                       help="linear warm-up steps (default N // 10)")
    train.add_argument("--seed", type=_non_negative_int, default=0, metavar="S",
                       help="fixes the initial weights and the stream of samples (default 0)")
    train.add_argument("--compile", action="store_true", help="run the model through torch.compile")
    train.add_argument("--checkpoint", metavar="PATH", help="save checkpoints here (atomically)")
    train.add_argument("--save-every", type=_positive_int, metavar="K", help="save every K steps (and at the end)")
    train.add_argument("--stop-after", type=_positive_int, metavar="S", help="save and stop after step S")
    train.add_argument("--resume", action="store_true", help="continue the run saved in --checkpoint up to N")


    # h2d (notebook 06): host-to-device copies from pageable and pinned memory; "not available" without CUDA
    text = "host-to-device copy bandwidth from pageable and from pinned memory (CUDA; says why not elsewhere)"
    h2d = commands.add_parser("h2d", help=text, description=text)
    h2d.add_argument("--bytes", type=_byte_count, required=True, metavar="N", dest="n_bytes", help="bytes per copy")
    h2d.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    return parser


def _load_model(args: argparse.Namespace) -> ModelConfig:
    """The ModelConfig named by --model or read from --config."""
    if args.model is not None:
        return from_name(args.model)
    try:
        return from_json(args.config)
    except OSError as error:
        raise CLIError(f"cannot read config {args.config!r}: {error.strerror or error}") from None


def _params(cfg: ModelConfig, args: argparse.Namespace) -> Result:
    return {
        "model": cfg.name,
        "params": n_params(cfg),
        "non_embedding_params": non_embedding_params(cfg),
        "breakdown": param_breakdown(cfg),
    }


def _train_formula(cfg: ModelConfig, seq_len: int) -> str:
    """train_flops_per_token's formula with this model's numbers: it is not 3 × forward_flops_per_token."""
    return (f"6N + 12·L·H·Q·T with N = {matmul_params(cfg):,} (non-embedding parameters and the LM head's "
            f"weights), L = {cfg.n_layer} layers, H = {cfg.n_head} heads, Q = {cfg.head_dim} per head, T = {seq_len} "
            "(PaLM, Chowdhery et al. 2022, App. B)")


def _flops(cfg: ModelConfig, args: argparse.Namespace) -> Result:
    return {
        "model": cfg.name,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "forward_flops": forward_flops(cfg, args.batch, args.seq_len),
        "forward_flops_per_token": forward_flops_per_token(cfg, args.seq_len),
        # Kaplan's n_ctx is the context the tokens are processed with: here seq_len
        "kaplan_forward_flops_per_token": kaplan_forward_flops_per_token(cfg, args.seq_len),
        "train_flops_per_token": train_flops_per_token(cfg, args.seq_len),
        "train_flops_per_token_formula": _train_formula(cfg, args.seq_len),
        "breakdown": forward_breakdown(cfg, args.batch, args.seq_len),
    }


def _memory(cfg: ModelConfig, args: argparse.Namespace) -> Result:
    if args.zero_stage > 0 and args.gpus is None:
        raise CLIError(f"--zero-stage {args.zero_stage} shards the model states over data-parallel GPUs: "
                       "give their number with --gpus N")
    gpus = args.gpus or 1
    breakdown = training_memory(cfg, args.recipe, args.batch, args.seq_len, args.recompute)
    breakdown = zero_partition(breakdown, args.zero_stage, gpus)  # per GPU; stage 0 or 1 GPU: unchanged
    return {
        "model": cfg.name,
        "recipe": args.recipe,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "recompute": args.recompute,
        "zero_stage": args.zero_stage,
        "gpus": gpus,
        "scope": "per GPU",  # every *_bytes below: what one GPU holds (its own micro-batch of B sequences)
        **breakdown.as_dict(),
    }


def _kv_cache(cfg: ModelConfig, args: argparse.Namespace) -> Result:
    return {
        "model": cfg.name,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "dtype": args.dtype,
        "bytes": kv_cache_bytes(cfg, args.batch, args.seq_len, args.dtype),
        "bytes_per_token": kv_cache_bytes_per_token(cfg, args.dtype),
    }


def _roofline(args: argparse.Namespace) -> Result:
    peak, bandwidth = peak_flop_per_s(args.device, args.dtype), peak_bytes_per_s(args.device)
    r = roofline(args.flops, args.n_bytes, peak_flop_per_s=peak, peak_bytes_per_s=bandwidth)
    return {
        "device": args.device,
        "dtype": args.dtype,
        "flops": int(args.flops) if args.flops.is_integer() else args.flops,
        "bytes": int(args.n_bytes) if args.n_bytes.is_integer() else args.n_bytes,
        "intensity": r.arithmetic_intensity_flop_per_byte,
        "ridge_point": r.ridge_flop_per_byte,
        "attainable_flop_per_s": r.attainable_flop_per_s,
        "time_s": r.time_s,
        "bound": r.bound,
        "peak_flop_per_s": r.peak_flop_per_s,
        "peak_bytes_per_s": r.peak_bytes_per_s,
    }


def _train(cfg: ModelConfig, args: argparse.Namespace) -> Result:
    run = TrainConfig(
        steps=args.steps, batch=args.batch, seq_len=args.seq_len, accum=args.accum, precision=args.precision,
        lr=args.lr, warmup=args.warmup, seed=args.seed, compile=args.compile, checkpoint=args.checkpoint,
        save_every=args.save_every, stop_after=args.stop_after, resume=args.resume,
    )
    shown = False

    def show(record: StepRecord) -> None:  # the table, a line per step as it is measured, header first
        nonlocal shown
        header, line = format_records([record]).splitlines()
        tqdm.write(line if shown else f"{header}\n{line}", file=sys.stdout)
        shown = True

    try:
        result = train(cfg, run, progress=sys.stderr if sys.stderr.isatty() else None,
                       on_step=None if args.json else show)
    except OSError as error:  # e.g. a checkpoint folder that does not exist
        raise CLIError(f"{error.strerror or error}: {error.filename or args.checkpoint}") from None
    summary = result.as_dict()
    if args.json:
        return summary
    return {key: value for key, value in summary.items() if not isinstance(value, list)}  # lists shown above


# --- h2d (notebook 06) ------------------------------------------------------------------------


def _byte_count(text: str) -> int:
    """argparse type: a positive whole number of bytes (268435456 or 2.5e8)."""
    value = _positive_number(text)
    if not value.is_integer():
        raise argparse.ArgumentTypeError(f"expected a whole number of bytes, got {text}")
    return int(value)


def _h2d(args: argparse.Namespace) -> Result:
    try:
        sweep = h2d_bandwidth([args.n_bytes])
    except RuntimeError as error:  # torch.OutOfMemoryError: more than the GPU or page-locked host memory can hold
        raise CLIError(f"cannot copy {args.n_bytes} bytes: {error}") from None
    if isinstance(sweep, Unavailable):
        return {"available": False, "reason": sweep.reason, "bytes": args.n_bytes}
    pageable, pinned = sweep.pageable_bytes_per_s[0], sweep.pinned_bytes_per_s[0]
    return {
        "available": True,
        "device": sweep.device,
        "bytes": args.n_bytes,
        "pageable_bytes_per_s": pageable,
        "pinned_bytes_per_s": pinned,
        "pinned_over_pageable": pinned / pageable,
    }


MODEL_COMMANDS = {"params": _params, "flops": _flops, "memory": _memory, "kv-cache": _kv_cache, "train": _train}
COMMANDS = {"roofline": _roofline, "h2d": _h2d}  # commands that take no model


def _rows(result: Mapping[str, object], prefix: str = "") -> list[tuple[str, object]]:
    """(key, value) rows of a nested result; nested keys joined with "/" (e.g. "attention/q_proj")."""
    rows: list[tuple[str, object]] = []
    for key, value in result.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            rows.extend(_rows(value, prefix=f"{name}/"))
        else:
            rows.append((name, value))
    return rows


def _cell(key: str, value: object) -> str:
    """A value as table text: ints with thousands separators, byte counts also in GiB."""
    if isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
        return f"{text}  ({value / 2**30:,.3f} GiB)" if key.endswith("bytes") else text
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def format_table(result: Mapping[str, object]) -> str:
    """A two-column table of a command's result."""
    rows = _rows(result)
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {_cell(name, value)}" for name, value in rows)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI on argv (default sys.argv[1:]); return the exit status (2 on bad input)."""
    try:
        args = build_parser().parse_args(argv)
        if args.command in COMMANDS:
            result = COMMANDS[args.command](args)
        else:
            result = MODEL_COMMANDS[args.command](_load_model(args), args)
    except (CLIError, ValueError) as error:
        message = " ".join(str(error).split())  # one line, whatever the message held
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    try:
        print(json.dumps(result) if args.json else format_table(result), flush=True)
    except BrokenPipeError:  # `python -m lecturelib flops ... | head`: the reader left; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main())
