"""Tests of lecturelib.training: schedule, data stream, checkpoints, and the loop's two promises."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import random
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import lecturelib.training as training
from lecturelib.configs import ModelConfig, from_name
from lecturelib.flops import train_flops_per_token
from lecturelib.training import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    SyntheticTokens,
    TrainConfig,
    format_records,
    load_checkpoint,
    lr_at,
    rng_state,
    save_checkpoint,
    saved_activation_breakdown,
    saved_activation_bytes,
    set_rng_state,
    train,
)

REPO = Path(__file__).resolve().parents[1]
TINY = from_name("gpt-tiny")
# smaller still, for tests that only need the loop's bookkeeping: a step takes a few milliseconds
MICRO = dataclasses.replace(TINY, name="gpt-micro", n_layer=1, n_head=2, n_kv_head=2, d_model=32, d_ff=128, n_ctx=64)
PEAK = 1e11  # a fixed MFU reference: no matmul is measured in these tests


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """One intra-op thread: on a busy 2-core machine two threads wait on each other (up to 30x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


ONE_THREAD_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}  # the same, for a subprocess


def run(model_cfg: ModelConfig = MICRO, **fields: object) -> training.TrainResult:
    """train() with small defaults and a fixed peak."""
    cfg = TrainConfig(**{"steps": 4, "batch": 4, "seq_len": 16, **fields})  # type: ignore[arg-type]
    return train(model_cfg, cfg, peak_flop_per_s=PEAK)


# ---------------------------------------------------------------------------------------------
# lr_at: nanoGPT's get_lr


def test_lr_at_warmup_is_linear_from_lr_over_warmup_plus_one() -> None:
    assert lr_at(0, 1.0, 0.1, 4, 10) == 1 / 5  # (0 + 1) / (4 + 1): the first step already learns
    assert lr_at(3, 1.0, 0.1, 4, 10) == 4 / 5
    assert lr_at(4, 1.0, 0.1, 4, 10) == 1.0  # the end of the warm-up: cosine at ratio 0 is max_lr


def test_lr_at_cosine_midpoint_and_end() -> None:
    assert lr_at(7, 1.0, 0.1, 4, 10) == pytest.approx(0.1 + 0.5 * 0.9)  # ratio 3/6: cos(pi/2) = 0
    assert lr_at(10, 1.0, 0.1, 4, 10) == 0.1  # decay end: min_lr
    assert lr_at(11, 1.0, 0.1, 4, 10) == 0.1  # after it: min_lr
    assert lr_at(10**9, 3e-4, 3e-5, 100, 1000) == 3e-5


def test_lr_at_matches_nanogpt_get_lr() -> None:
    def get_lr(it: int, learning_rate: float, min_lr: float, warmup_iters: int, lr_decay_iters: int) -> float:
        # karpathy/nanoGPT train.py, get_lr, with its globals as arguments
        if it < warmup_iters:
            return learning_rate * (it + 1) / (warmup_iters + 1)
        if it > lr_decay_iters:
            return min_lr
        decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
        assert 0 <= decay_ratio <= 1
        coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
        return min_lr + coeff * (learning_rate - min_lr)

    for it in range(0, 1200, 7):
        assert lr_at(it, 6e-4, 6e-5, 200, 1000) == get_lr(it, 6e-4, 6e-5, 200, 1000)


@given(st.integers(0, 50), st.integers(51, 500))
def test_lr_at_never_rises_after_warmup(warmup: int, decay: int) -> None:
    lrs = [lr_at(step, 1e-3, 1e-4, warmup, decay) for step in range(warmup, decay + 5)]
    assert all(a >= b for a, b in zip(lrs, lrs[1:]))
    assert all(1e-4 <= lr <= 1e-3 for lr in lrs)


def test_lr_at_negative_step_raises() -> None:
    with pytest.raises(ValueError, match="step"):
        lr_at(-1, 1.0, 0.1, 2, 10)


# ---------------------------------------------------------------------------------------------
# The synthetic data stream


def test_synthetic_stream_does_not_depend_on_batching() -> None:
    data = SyntheticTokens(256, 32, seed=3)
    x8, y8 = data.batch(0, 8)
    parts = [data.batch(start, 2) for start in range(0, 8, 2)]
    assert torch.equal(x8, torch.cat([x for x, _ in parts]))
    assert torch.equal(y8, torch.cat([y for _, y in parts]))
    torch.manual_seed(123)  # the global RNG plays no part
    assert torch.equal(SyntheticTokens(256, 32, seed=3).batch(0, 8)[0], x8)


def test_synthetic_seed_changes_stream() -> None:
    assert not torch.equal(SyntheticTokens(256, 32, 0).batch(0, 4)[0], SyntheticTokens(256, 32, 1).batch(0, 4)[0])


def test_synthetic_targets_are_inputs_shifted() -> None:
    x, y = SyntheticTokens(256, 32, 0).batch(5, 3)
    assert x.shape == y.shape == (3, 32) and x.dtype == torch.int64
    assert torch.equal(x[:, 1:], y[:, :-1])


def test_synthetic_walk_moves_by_walk_steps_on_active_tokens() -> None:
    data = SyntheticTokens(256, 64, 0)
    place = {int(token): i for i, token in enumerate(data.alphabet)}
    x, y = data.batch(0, 16)
    assert len(place) == training.ACTIVE_TOKENS == 64
    moves = {(place[int(b)] - place[int(a)]) % 64 for a, b in zip(x.flatten(), y.flatten())}
    assert moves == set(training.WALK_STEPS)  # 16·64 moves: each of the 4 steps occurs


def test_synthetic_entropy_floor_is_ln_4() -> None:
    assert SyntheticTokens(256, 8, 0).entropy_floor_nats == pytest.approx(math.log(4))
    # 4 active tokens: steps 1 and 5 land on the same token (5 % 4 = 1): probabilities 1/2, 1/4, 1/4,
    # entropy 1/2·ln 2 + 2·1/4·ln 4 = 1.5·ln 2
    assert SyntheticTokens(4, 8, 0).entropy_floor_nats == pytest.approx(1.5 * math.log(2))


def test_synthetic_bad_seed_raises() -> None:
    with pytest.raises(ValueError, match="seed"):
        SyntheticTokens(256, 8, -1)


# ---------------------------------------------------------------------------------------------
# TrainConfig


def test_train_config_defaults_follow_nanogpt() -> None:
    cfg = TrainConfig(steps=25, batch=2, seq_len=8)
    assert cfg.min_lr == cfg.lr / 10  # nanoGPT: ~= learning_rate/10 per Chinchilla
    assert cfg.warmup == 2  # 25 // 10
    assert cfg.tokens_per_step == 2 * 8 * 1
    assert TrainConfig(steps=4, batch=3, seq_len=5, accum=7).tokens_per_step == 105  # 3·5·7


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"steps": 0}, "steps"),
        ({"batch": -1}, "batch"),
        ({"accum": 0}, "accum"),
        ({"precision": "fp8"}, "precision"),
        ({"lr": 0.0}, "lr"),
        ({"warmup": 9}, "warmup"),
        ({"seed": -2}, "seed"),
        ({"stop_after": 2}, "checkpoint"),
        ({"resume": True}, "checkpoint"),
        ({"save_every": 0, "checkpoint": "x.pt"}, "save_every"),
    ],
)
def test_train_config_rejects_bad_values(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{"steps": 8, "batch": 2, "seq_len": 8, **fields})  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# The loop


def test_train_loss_falls_on_the_walk() -> None:
    result = run(TINY, steps=30, batch=4, seq_len=32, lr=3e-3, warmup=3)
    assert result.losses[0] == pytest.approx(math.log(256), rel=0.02)  # random init: uniform over the vocabulary
    assert result.final_loss < result.losses[0] - 1.5
    assert result.final_loss > result.entropy_floor - 1e-3  # nothing beats the entropy of the walk


def test_train_records_and_metrics() -> None:
    result = run(steps=5, batch=2, seq_len=8, accum=3, warmup=2)
    assert [r.step for r in result.records] == [1, 2, 3, 4, 5]
    assert (result.first_step, result.step) == (1, 5)
    assert result.tokens_per_step == 2 * 8 * 3
    assert result.flops_per_token == train_flops_per_token(MICRO, 8)
    assert [r.lr for r in result.records] == [lr_at(s, 1e-3, 1e-4, 2, 5) for s in range(5)]
    for r in result.records:
        assert r.tokens_per_s == pytest.approx(48 / r.seconds)
        assert r.mfu == pytest.approx(result.flops_per_token * r.tokens_per_s / PEAK)
        assert r.grad_norm > 0 and r.peak_memory_bytes >= 0
    assert result.tokens_per_s == pytest.approx(48 * 4 / sum(r.seconds for r in result.records[1:]))
    table = format_records(result.records)
    assert table.splitlines()[0].split()[:3] == ["step", "loss", "lr"] and len(table.splitlines()) == 6


def test_train_log_every_reads_every_step_loss() -> None:
    every = run(steps=6, seq_len=8)
    sparse = run(steps=6, seq_len=8, log_every=4)
    assert sparse.losses == every.losses  # losses stay on the device until read, none is lost
    assert sparse.records[0].seconds == sparse.records[3].seconds  # steps 1-4: one interval, one mean


def test_train_seq_len_over_context_raises() -> None:
    with pytest.raises(ValueError, match="n_ctx"):
        run(seq_len=MICRO.n_ctx + 1)


def test_train_accumulation_matches_big_batch() -> None:
    big = run(TINY, steps=8, batch=8, seq_len=32)
    small = run(TINY, steps=8, batch=2, accum=4, seq_len=32)
    assert small.tokens_per_step == big.tokens_per_step
    for a, b in zip(big.losses, small.losses):
        assert abs(a - b) <= 1e-5 * abs(a)


def test_make_optimizer_decays_matrices_only_unless_weight_decay_all() -> None:
    model = training.GPT(MICRO)
    groups = training.make_optimizer(model, TrainConfig(steps=2, batch=1, seq_len=8), torch.device("cpu")).param_groups
    assert [g["weight_decay"] for g in groups] == [0.1, 0.0]
    assert all(p.dim() >= 2 for p in groups[0]["params"]) and all(p.dim() < 2 for p in groups[1]["params"])
    cfg = TrainConfig(steps=2, batch=1, seq_len=8, weight_decay_all=True)
    (group,) = training.make_optimizer(model, cfg, torch.device("cpu")).param_groups
    assert group["weight_decay"] == 0.1 and len(group["params"]) == len(list(model.parameters()))


def test_train_constant_lr_and_decay_on_all_is_a_plain_adamw_loop() -> None:
    # notebook 08 compares a student's loop with train() configured so: the very same arithmetic, bit for bit
    steps, batch, seq_len, lr = 3, 4, 16, 3e-3
    reference = run(steps=steps, batch=batch, seq_len=seq_len, lr=lr, warmup=0, min_lr=lr, weight_decay_all=True)
    torch.manual_seed(0)
    model = training.GPT(MICRO)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    data, losses = SyntheticTokens(MICRO.vocab_size, seq_len, 0), []
    for step in range(steps):
        x, y = data.batch(step * batch, batch)
        loss = torch.nn.functional.cross_entropy(model(x).flatten(0, 1), y.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert reference.losses == losses
    assert [r.lr for r in reference.records] == [lr] * steps


def test_train_bf16_follows_fp32() -> None:
    fp32 = run(steps=5, seq_len=16)
    bf16 = run(steps=5, seq_len=16, precision="bf16")
    assert fp32.losses != bf16.losses  # autocast did change the arithmetic
    assert all(abs(a - b) < 1e-2 * a for a, b in zip(fp32.losses, bf16.losses))


def test_train_fp16_runs_with_grad_scaler(tmp_path: Path) -> None:
    path = tmp_path / "fp16.pt"
    result = run(steps=3, seq_len=16, precision="fp16", checkpoint=str(path))
    assert all(math.isfinite(loss) for loss in result.losses)
    assert load_checkpoint(path)["scaler"]["scale"] == 65536.0  # 2**16, GradScaler's initial scale: no overflow


# ---------------------------------------------------------------------------------------------
# Checkpoints: exact resume, atomic writes, bad files


def test_resume_is_bit_identical(tmp_path: Path) -> None:
    path = str(tmp_path / "run.pt")
    whole = run(TINY, steps=8, batch=4, seq_len=32, lr=3e-3)
    first = run(TINY, steps=8, batch=4, seq_len=32, lr=3e-3, checkpoint=path, stop_after=4)
    torch.manual_seed(999)  # disturb every RNG: resume must restore them
    random.seed(999)
    np.random.seed(999)
    rest = run(TINY, steps=8, batch=4, seq_len=32, lr=3e-3, checkpoint=path, resume=True)
    assert (first.first_step, first.step, rest.first_step, rest.step) == (1, 4, 5, 8)
    assert first.losses == whole.losses[:4]
    assert rest.losses == whole.losses[4:]  # bit-identical, not approximately equal
    assert first.saved_at == (4,) and rest.saved_at == (8,)


def test_checkpoint_holds_every_state(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    run(steps=6, checkpoint=str(path), save_every=2, stop_after=3)
    state = load_checkpoint(path)
    assert state["format"] == CHECKPOINT_FORMAT and state["step"] == 3
    assert set(state) >= {"model", "optimizer", "scaler", "schedule", "rng", "run", "model_config"}
    assert set(state["rng"]) == {"torch", "cuda", "mps", "python", "numpy"}
    assert state["schedule"] == {"max_lr": 1e-3, "min_lr": 1e-4, "warmup_steps": 0, "decay_steps": 6}


def test_save_every_saves_on_schedule(tmp_path: Path) -> None:
    result = run(steps=7, checkpoint=str(tmp_path / "c.pt"), save_every=3)
    assert result.saved_at == (3, 6, 7)  # every 3 steps, and at the end


def test_rng_state_round_trip() -> None:
    state = rng_state()
    expected = (torch.rand(3), random.random(), np.random.rand())
    torch.rand(5), random.random(), np.random.rand()
    set_rng_state(state)
    again = (torch.rand(3), random.random(), np.random.rand())
    assert torch.equal(expected[0], again[0]) and expected[1:] == again[1:]


def test_save_checkpoint_failing_midway_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint({"format": CHECKPOINT_FORMAT, "step": 1}, path)
    before = path.read_bytes()

    def crash(obj: object, file: object) -> None:  # writes half a checkpoint, then fails (disk full, ...)
        file.write(before[: len(before) // 2])  # type: ignore[attr-defined]
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(training.torch, "save", crash)
    with pytest.raises(OSError, match="No space"):
        save_checkpoint({"format": CHECKPOINT_FORMAT, "step": 2}, path)
    assert path.read_bytes() == before
    assert load_checkpoint(path)["step"] == 1
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # the temporary file is gone too


def test_save_checkpoint_killed_midway_keeps_the_old_file(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_checkpoint({"format": CHECKPOINT_FORMAT, "step": 1}, path)
    # a process that dies (no cleanup, no exception handler) halfway through writing step 2
    script = textwrap.dedent(f"""
        import os, torch
        import lecturelib.training as training
        def die(obj, file):
            file.write(b"half a checkpoint")
            file.flush()
            os._exit(9)
        training.torch.save = die
        training.save_checkpoint({{"format": training.CHECKPOINT_FORMAT, "step": 2}}, {str(path)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=300, env=ONE_THREAD_ENV)
    assert proc.returncode == 9
    assert load_checkpoint(path)["step"] == 1  # the target was never touched
    leftovers = [p.name for p in tmp_path.iterdir() if p.name != "c.pt"]
    assert len(leftovers) == 1 and leftovers[0].startswith("c.pt.") and leftovers[0].endswith(".tmp")


def test_load_checkpoint_rejects_bad_files(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00not a checkpoint")
    with pytest.raises(CheckpointError, match="cannot read"):
        load_checkpoint(garbage)
    other = tmp_path / "other.pt"
    torch.save({"model": {}}, other)
    with pytest.raises(CheckpointError, match="not a"):
        load_checkpoint(other)


def test_resume_another_run_raises(tmp_path: Path) -> None:
    path = str(tmp_path / "c.pt")
    run(steps=4, checkpoint=path, stop_after=2)
    with pytest.raises(CheckpointError, match="batch 4 .now 2."):
        run(steps=4, batch=2, checkpoint=path, resume=True)
    with pytest.raises(CheckpointError, match="steps 4 .now 6."):
        run(steps=6, checkpoint=path, resume=True)


def test_resume_finished_run_raises(tmp_path: Path) -> None:
    path = str(tmp_path / "c.pt")
    run(steps=2, checkpoint=path)
    with pytest.raises(CheckpointError, match="already at step 2: nothing to run up to step 2"):
        run(steps=2, checkpoint=path, resume=True)


def test_resume_past_stop_after_raises(tmp_path: Path) -> None:
    path = str(tmp_path / "c.pt")
    run(steps=6, checkpoint=path, stop_after=4)
    with pytest.raises(CheckpointError, match="already at step 4: nothing to run up to step 3"):
        run(steps=6, checkpoint=path, stop_after=3, resume=True)
    assert run(steps=6, checkpoint=path, stop_after=5, resume=True).losses == run(steps=6).losses[4:5]


def test_missing_checkpoint_folder_raises_before_training(tmp_path: Path) -> None:
    steps: list[int] = []
    with pytest.raises(FileNotFoundError, match="no such folder"):
        train(MICRO, TrainConfig(steps=2, batch=1, seq_len=8, checkpoint=str(tmp_path / "nowhere" / "c.pt")),
              peak_flop_per_s=PEAK, on_step=lambda record: steps.append(record.step))
    assert steps == []  # not one step trained before the error


def test_checkpoint_time_is_not_a_step_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a fake clock: 1 s per reading, and a save that takes 1000 s, on steps that are not logging steps
    clock = [0.0]

    def perf_counter() -> float:
        clock[0] += 1.0
        return clock[0]

    def slow_save(state: object, path: object) -> None:
        clock[0] += 1000.0

    monkeypatch.setattr(training.time, "perf_counter", perf_counter)
    monkeypatch.setattr(training, "save_checkpoint", slow_save)
    result = run(steps=6, log_every=3, checkpoint=str(tmp_path / "c.pt"), save_every=2)
    assert result.saved_at == (2, 4, 6)
    assert all(r.seconds < 10 for r in result.records)  # a few clock readings per step, never the 1000 s save


# ---------------------------------------------------------------------------------------------
# Saved activations, the reference peak, the benchmark script


def test_saved_activation_bytes_grow_with_batch_and_shrink_in_bf16() -> None:
    fp32_2, fp32_4 = (saved_activation_bytes(MICRO, b, 16, "fp32") for b in (2, 4))
    bf16_4 = saved_activation_bytes(MICRO, 4, 16, "bf16")
    assert fp32_2 < fp32_4 < 2 * fp32_2 + 1  # activations ∝ batch; a few saved tensors are batch-independent
    assert bf16_4 < fp32_4
    with pytest.raises(ValueError, match="precision"):
        saved_activation_bytes(MICRO, 2, 8, "int8")


def test_saved_activation_bytes_counts_the_logits() -> None:
    # the loss keeps log_softmax of the logits, (B·T, vocab) in fp32, for its backward
    assert saved_activation_bytes(MICRO, 2, 16, "fp32") >= 2 * 16 * MICRO.vocab_size * 4


def test_saved_activation_breakdown_by_dtype_sums_to_total() -> None:
    fp32 = saved_activation_breakdown(MICRO, 2, 16, "fp32")
    bf16 = saved_activation_breakdown(MICRO, 2, 16, "bf16")
    assert set(fp32) == {"float32", "int64"}  # activations, and the token and position ids of the embeddings
    assert set(bf16) == {"bfloat16", "float32", "int64"}  # autocast: 16-bit matmul inputs; fp32 norms, loss
    # int64 ids, 8 bytes each: the (B, T + 1) sample the inputs are a view of, the flattened targets, the positions
    assert fp32["int64"] == bf16["int64"] == 2 * 17 * 8 + 2 * 16 * 8 + 16 * 8
    assert sum(bf16.values()) == saved_activation_bytes(MICRO, 2, 16, "bf16")


def test_reference_flop_per_s_measures_cpu_once() -> None:
    rate, source = training.reference_flop_per_s("cpu", "fp32")
    assert rate > 0 and source.startswith("best measured 512 x 512 fp32 matmul on cpu")
    assert training.reference_flop_per_s("cpu", "fp32") == (rate, source)  # cached: measured once


def test_benchmark_script_runs_on_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("train_mfu", REPO / "benchmarks" / "train_mfu.py")
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    argv = ["--model", "gpt-tiny", "--batch", "2", "--seq-len", "16", "--steps", "4", "--warmup", "2",
            "--log-every", "2", "--precision", "fp32", "--rounds", "1", "--device", "cpu"]
    assert script.main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert set(result["mfu"]) == {"course", "nanogpt_style"}
    assert all(v > 0 for values in result["tokens_per_s"].values() for v in values)
