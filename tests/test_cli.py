"""Tests of the CLI (lecturelib/__main__.py): values in-process, exit codes and stderr in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from lecturelib.__main__ import main
from lecturelib.configs import MODELS, from_name
from lecturelib.flops import (
    forward_breakdown,
    forward_flops,
    forward_flops_per_token,
    kaplan_forward_flops_per_token,
    train_flops_per_token,
)
from lecturelib.memory import RECIPES, kv_cache_bytes, kv_cache_bytes_per_token, training_memory
from lecturelib.params import n_params, non_embedding_params, param_breakdown

REPO = Path(__file__).resolve().parents[1]
MEMORY_ARGS = ["memory", "--model", "gpt2-small", "--seq-len", "8"]
KV_ARGS = ["kv-cache", "--batch", "1", "--seq-len", "8"]
ROOF_ARGS = ["roofline", "--flops", "2e12", "--bytes", "1e9"]


def run_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    """main(argv + --json) in-process: exit 0, nothing on stderr, one JSON object on stdout."""
    assert main([*argv, "--json"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    result = json.loads(out)
    assert isinstance(result, dict)
    return result


def run_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m lecturelib argv` in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "lecturelib", *argv], capture_output=True, text=True, cwd=REPO, timeout=60
    )


@pytest.mark.parametrize("name", list(MODELS))
def test_cli_params_equals_library(capsys: pytest.CaptureFixture[str], name: str) -> None:
    cfg = from_name(name)
    result = run_json(capsys, "params", "--model", name)
    assert result == {
        "model": name,
        "params": n_params(cfg),
        "non_embedding_params": non_embedding_params(cfg),
        "breakdown": param_breakdown(cfg),
    }


def test_cli_params_gpt2_small_published(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "params", "--model", "gpt2-small")
    assert result["params"] == 124_439_808  # sum(p.numel()) of HF "gpt2", tied head counted once
    assert result["non_embedding_params"] == 85_056_000  # minus 50257·768 tokens and 1024·768 positions


@pytest.mark.parametrize(
    ("name", "batch", "seq_len"), [("gpt2-small", 1, 1024), ("gpt2-xl", 2, 512), ("llama2-7b", 3, 4096)]
)
def test_cli_flops_equals_library(
    capsys: pytest.CaptureFixture[str], name: str, batch: int, seq_len: int
) -> None:
    cfg = from_name(name)
    result = run_json(capsys, "flops", "--model", name, "--seq-len", str(seq_len), "--batch", str(batch))
    assert result == {
        "model": name,
        "batch": batch,
        "seq_len": seq_len,
        "forward_flops": forward_flops(cfg, batch, seq_len),
        "forward_flops_per_token": forward_flops_per_token(cfg, seq_len),
        "kaplan_forward_flops_per_token": kaplan_forward_flops_per_token(cfg, seq_len),
        "train_flops_per_token": train_flops_per_token(cfg, seq_len),
        "train_flops_per_token_formula": result["train_flops_per_token_formula"],
        "breakdown": forward_breakdown(cfg, batch, seq_len),
    }
    assert str(result["train_flops_per_token_formula"]).startswith("6N + 12·L·H·Q·T with N = ")


def test_cli_flops_gpt2_small_published(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "flops", "--model", "gpt2-small", "--seq-len", "1024")
    assert result["forward_flops"] == 291_648_307_200  # FlopCounterMode on GPT-2 small, 1 × 1024 tokens
    assert result["forward_flops_per_token"] * 1024 == result["forward_flops"]  # batch 1 (the default)


def test_cli_flops_names_the_training_formula() -> None:
    """train_flops_per_token is 6N + 12·L·H·Q·T (PaLM App. B), not 3 × forward: the table says which N and sizes."""
    proc = run_cli("flops", "--model", "gpt2-small", "--seq-len", "1024")
    assert proc.returncode == 0, proc.stderr
    rows = dict(line.split(None, 1) for line in proc.stdout.splitlines())
    # N = 85,056,000 non-embedding parameters + 38,597,376 of the tied LM head; 6N + 12·12·12·64·1024
    assert rows["train_flops_per_token"] == "855,166,464" == f"{6 * 123_653_376 + 12 * 12 * 12 * 64 * 1024:,}"
    assert rows["train_flops_per_token_formula"] == (
        "6N + 12·L·H·Q·T with N = 123,653,376 (non-embedding parameters and the LM head's weights), L = 12 layers, "
        "H = 12 heads, Q = 64 per head, T = 1024 (PaLM, Chowdhery et al. 2022, App. B)")


def test_cli_flops_kaplan_leaves_out_untied_head(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "flops", "--model", "llama2-7b", "--seq-len", "4096")
    # Kaplan Table 1: N without embedding and LM head = 6,738,415,616 − 2·32,000·4,096 = 6,476,271,616;
    # 2N + 2·32·4,096·4,096 = 12,952,543,232 + 1,073,741,824
    assert result["kaplan_forward_flops_per_token"] == 14_026_285_056


@pytest.mark.parametrize("recipe", list(RECIPES))
@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
def test_cli_memory_equals_library(capsys: pytest.CaptureFixture[str], recipe: str, recompute: str) -> None:
    cfg = from_name("llama2-7b")
    argv = ["memory", "--model", "llama2-7b", "--recipe", recipe, "--batch", "2", "--seq-len", "4096"]
    result = run_json(capsys, *argv, "--recompute", recompute)
    expected = training_memory(cfg, recipe, 2, 4096, recompute)  # type: ignore[arg-type]
    assert result == {
        "model": "llama2-7b",
        "recipe": recipe,
        "batch": 2,
        "seq_len": 4096,
        "recompute": recompute,
        "zero_stage": 0,
        "gpus": 1,
        "scope": "per GPU",
        **expected.as_dict(),
    }
    assert result["total_bytes"] == sum(expected.parts().values())


def test_cli_kv_cache_llama2_7b_published(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["kv-cache", "--model", "llama2-7b", "--batch", "1", "--seq-len", "4096", "--dtype", "fp16"]
    result = run_json(capsys, *argv)
    assert result == {
        "model": "llama2-7b",
        "batch": 1,
        "seq_len": 4096,
        "dtype": "fp16",
        "bytes": 2_147_483_648,  # 2 · 32 layers · 32 heads · 128 · 4096 tokens · 2 bytes
        "bytes_per_token": 524_288,  # 2 · 32 · 32 · 128 · 2
    }


@pytest.mark.parametrize("name", list(MODELS))
def test_cli_kv_cache_equals_library(capsys: pytest.CaptureFixture[str], name: str) -> None:
    cfg = from_name(name)
    result = run_json(capsys, "kv-cache", "--model", name, "--batch", "4", "--seq-len", "256", "--dtype", "int4")
    assert result["bytes"] == kv_cache_bytes(cfg, 4, 256, "int4")
    assert result["bytes_per_token"] == kv_cache_bytes_per_token(cfg, "int4")


def test_cli_config_file_equals_named_model(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    cfg = from_name("gpt2-medium")
    fields = {k: v for k, v in vars(cfg).items() if k != "name"}
    path = tmp_path / "my-gpt.json"
    path.write_text(json.dumps(fields), encoding="utf-8")
    from_file = run_json(capsys, "params", "--config", str(path))
    named = run_json(capsys, "params", "--model", "gpt2-medium")
    assert from_file == {**named, "model": "my-gpt"}  # from_json names the model after the file


def test_cli_table_without_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["memory", "--model", "gpt2-small", "--recipe", "fp32-adamw", "--batch", "1", "--seq-len", "64"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    rows = dict(line.split(maxsplit=1) for line in out.splitlines())
    assert rows["weights_bytes"].startswith("497,759,232 ")  # 4 · 124,439,808
    assert set(rows) >= {"model", "recipe", "total_bytes", "activations_bytes"}


def test_cli_table_flattens_breakdown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["flops", "--model", "gpt2-small", "--seq-len", "8"]) == 0
    out = capsys.readouterr().out
    assert any(line.startswith("breakdown/attention/q_proj ") for line in out.splitlines())


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["params", "--model", "gpt5"], "unknown model 'gpt5'"),
        (["flops", "--model", "gpt2-small", "--seq-len", "0"], "expected a positive integer, got 0"),
        (["flops", "--model", "gpt2-small", "--seq-len", "-3"], "expected a positive integer"),
        (["flops", "--model", "gpt2-small", "--seq-len", "2048"], "exceeds gpt2-small's 1024"),
        ([*MEMORY_ARGS, "--recipe", "fp64-sgd", "--batch", "1"], "invalid choice: 'fp64-sgd'"),
        ([*MEMORY_ARGS, "--recipe", "fp32-adamw", "--batch", "0"], "--batch"),
        ([*KV_ARGS, "--model", "llama2-7b", "--dtype", "fp12"], "invalid choice: 'fp12'"),
        ([*KV_ARGS, "--config", "/nonexistent/model.json", "--dtype", "fp16"], "cannot read config"),
        (["params"], "--model --config is required"),
        (["roofline", "--flops", "1", "--device", "h100-sxm", "--dtype", "bf16", "--bytes", "0"], "expected a positive number, got 0"),
        ([*ROOF_ARGS, "--device", "h100-sxm", "--dtype", "int3"], "no 'int3' peak for h100-sxm"),
        ([*ROOF_ARGS, "--device", "tpu-v9", "--dtype", "bf16"], "unknown device 'tpu-v9'"),
        (["roofline", "--flops", "-1", "--bytes", "8", "--device", "t4", "--dtype", "fp16"], "expected a positive number"),
        ([], "required"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("lecturelib: error: ")
    assert message in err


def test_cli_roofline_h100_bf16(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, *ROOF_ARGS, "--device", "h100-sxm", "--dtype", "bf16")
    assert result == {
        "device": "h100-sxm",
        "dtype": "bf16",
        "flops": 2 * 10**12,
        "bytes": 10**9,
        "intensity": 2000.0,  # 2e12 FLOPs / 1e9 bytes
        "ridge_point": 989.5e12 / 3.35e12,  # dense bf16 peak / HBM3 bandwidth ≈ 295 FLOP/byte
        "attainable_flop_per_s": 989.5e12,  # 2000 > 295: the compute roof
        "time_s": 2e12 / 989.5e12,  # max(F / peak, B / bandwidth) = F / peak
        "bound": "compute",
        "peak_flop_per_s": 989.5e12,
        "peak_bytes_per_s": 3.35e12,
    }


def test_cli_roofline_memory_bound_elementwise(capsys: pytest.CaptureFixture[str]) -> None:
    # fp32 add of 2**20 elements on an A100: 2**20 FLOPs over 3 · 4 · 2**20 bytes, intensity 1/12
    result = run_json(capsys, "roofline", "--device", "a100-sxm-80gb", "--dtype", "fp32",
                      "--flops", str(2**20), "--bytes", str(12 * 2**20))
    assert result["bound"] == "memory"
    assert result["intensity"] == 1 / 12
    assert result["time_s"] == 12 * 2**20 / 2039e9
    assert result["attainable_flop_per_s"] == 2039e9 / 12


def test_cli_bad_config_json_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"arch": "gpt2", "n_layer": 0}', encoding="utf-8")
    assert main(["params", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "bad.json" in err


def test_cli_subprocess_json_is_one_object() -> None:
    proc = run_cli("kv-cache", "--model", "llama2-70b", "--batch", "1", "--seq-len", "4096", "--dtype", "bf16",
                   "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["bytes"] == 1_342_177_280  # 2 · 80 · 8 KV heads · 128 · 4096 · 2


@pytest.mark.parametrize(
    "argv",
    [
        ["params", "--model", "nope"],
        [*KV_ARGS, "--config", "/nonexistent.json", "--dtype", "fp16"],
    ],
)
def test_cli_subprocess_bad_input_no_traceback(argv: list[str]) -> None:
    proc = run_cli(*argv)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("lecturelib: error: ")
    assert "Traceback" not in proc.stderr


# train: lecturelib.training through the CLI (CPU, fp32), with the two promises of its issue

TRAIN_ARGS = ["train", "--model", "gpt-tiny", "--seq-len", "32"]


@pytest.fixture
def one_thread() -> Iterator[None]:
    """One intra-op thread while the loop trains: on a busy 2-core machine two threads wait on each other (up to 30x slower)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def run_train_cli(*argv: str) -> subprocess.CompletedProcess[str]:
    """`python -m lecturelib train ...` in a subprocess with one thread (OMP_NUM_THREADS=1, as one_thread)."""
    return subprocess.run([sys.executable, "-m", "lecturelib", *argv], capture_output=True, text=True, cwd=REPO,
                          timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})


@pytest.mark.usefixtures("one_thread")
def test_cli_train_json_keys_and_steps(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, *TRAIN_ARGS, "--steps", "3", "--batch", "2", "--accum", "2")
    assert {"final_loss", "losses", "first_step", "step", "tokens_per_s", "mfu", "peak_memory_bytes",
            "device"} <= set(result)
    assert (result["first_step"], result["step"], result["device"]) == (1, 3, "cpu")
    assert len(result["losses"]) == 3 and result["final_loss"] == result["losses"][-1]  # type: ignore[index]
    assert result["tokens_per_step"] == 2 * 32 * 2  # batch · seq_len · accum
    assert result["mfu"] > 0 and result["peak_memory_bytes"] >= 0  # type: ignore[operator]


@pytest.mark.usefixtures("one_thread")
def test_cli_train_resume_is_bit_identical(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--steps 8 in one run == --stop-after 4, then --resume in a fresh process: steps 5-8 bit for bit."""
    path = str(tmp_path / "run.pt")
    common = [*TRAIN_ARGS, "--steps", "8", "--batch", "4"]
    whole_json = run_json(capsys, *common)
    first_json = run_json(capsys, *common, "--checkpoint", path, "--stop-after", "4")
    rest = run_train_cli(*common, "--checkpoint", path, "--resume", "--json")  # nothing carried over in memory
    assert rest.returncode == 0, rest.stderr
    rest_json = json.loads(rest.stdout)
    assert (first_json["first_step"], first_json["step"]) == (1, 4)
    assert (rest_json["first_step"], rest_json["step"]) == (5, 8)
    assert first_json["losses"] == whole_json["losses"][:4]
    assert rest_json["losses"] == whole_json["losses"][4:]  # JSON floats round-trip exactly: bit-identical


@pytest.mark.usefixtures("one_thread")
def test_cli_train_accumulation_matches_big_batch(capsys: pytest.CaptureFixture[str]) -> None:
    big = run_json(capsys, *TRAIN_ARGS, "--steps", "8", "--batch", "8", "--accum", "1", "--seed", "3")
    small = run_json(capsys, *TRAIN_ARGS, "--steps", "8", "--batch", "2", "--accum", "4", "--seed", "3")
    assert len(big["losses"]) == len(small["losses"]) == 8  # type: ignore[arg-type]
    for a, b in zip(big["losses"], small["losses"]):  # type: ignore[call-overload]
        assert abs(a - b) <= 1e-5 * abs(a)


@pytest.mark.usefixtures("one_thread")
def test_cli_train_table_prints_a_line_per_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*TRAIN_ARGS, "--steps", "2", "--batch", "2"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["step", "loss", "lr"]
    assert [line.split()[0] for line in lines[1:3]] == ["1", "2"]
    assert any(line.startswith("final_loss ") for line in lines)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--model", "gpt5", "--steps", "2", "--batch", "1", "--seq-len", "8"], "unknown model 'gpt5'"),
        ([*TRAIN_ARGS, "--steps", "0", "--batch", "1"], "expected a positive integer, got 0"),
        ([*TRAIN_ARGS, "--steps", "2", "--batch", "1", "--precision", "fp8"], "invalid choice: 'fp8'"),
        ([*TRAIN_ARGS, "--steps", "2", "--batch", "1", "--warmup", "3"], "warmup must be between 0 and steps"),
        ([*TRAIN_ARGS, "--steps", "2", "--batch", "1", "--stop-after", "1"], "need a checkpoint path"),
        (["train", "--model", "gpt-tiny", "--steps", "2", "--batch", "1", "--seq-len", "257"], "exceeds the model's context"),
        ([*TRAIN_ARGS, "--steps", "2", "--batch", "1", "--checkpoint", "/nonexistent/dir/c.pt"], "/nonexistent/dir"),
    ],
)
@pytest.mark.usefixtures("one_thread")
def test_cli_train_bad_input_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("lecturelib: error: ")
    assert message in err


@pytest.mark.parametrize("content", [None, b"\x00 not a checkpoint", b""])
@pytest.mark.usefixtures("one_thread")
def test_cli_train_unreadable_checkpoint_exits_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: bytes | None
) -> None:
    path = tmp_path / "c.pt"
    if content is not None:
        path.write_bytes(content)
    assert main([*TRAIN_ARGS, "--steps", "4", "--batch", "2", "--checkpoint", str(path), "--resume"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("lecturelib: error: ") and "checkpoint" in err


def test_cli_train_subprocess_bad_checkpoint_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    path.write_bytes(b"\x00 not a checkpoint")
    proc = run_train_cli(*TRAIN_ARGS, "--steps", "4", "--batch", "2", "--checkpoint", str(path), "--resume", "--json")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("lecturelib: error: cannot read checkpoint")
    assert "Traceback" not in proc.stderr


# --- memory --zero-stage --gpus (ZeRO, Rajbhandari et al. 2020, Figure 1) --------------------------------

@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_cli_memory_zero_same_keys_per_gpu(capsys: pytest.CaptureFixture[str], stage: int) -> None:
    argv = ["memory", "--model", "llama2-7b", "--recipe", "bf16-mixed-adamw", "--batch", "1", "--seq-len", "4096"]
    whole = run_json(capsys, *argv)
    per_gpu = run_json(capsys, *argv, "--zero-stage", str(stage), "--gpus", "8")
    assert list(per_gpu) == list(whole)  # the same keys, in the same order
    sharded = {1: {"optimizer_bytes", "master_weights_bytes"}, 2: {"optimizer_bytes", "master_weights_bytes",
               "gradients_bytes"}, 3: {"optimizer_bytes", "master_weights_bytes", "gradients_bytes", "weights_bytes"}}
    for key in sharded.get(stage, set()):
        assert per_gpu[key] == -(-whole[key] // 8)  # 1/8 on each GPU, rounded up
    assert per_gpu["activations_bytes"] == whole["activations_bytes"]  # each GPU runs its own micro-batch
    assert per_gpu["total_bytes"] == sum(v for k, v in per_gpu.items() if k.endswith("_bytes") and k != "total_bytes")


def test_cli_memory_says_zero_stage_and_per_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["memory", "--model", "llama2-7b", "--recipe", "bf16-mixed-adamw", "--batch", "1", "--seq-len", "4096"]
    result = run_json(capsys, *argv, "--zero-stage", "3", "--gpus", "8")
    assert (result["zero_stage"], result["gpus"], result["scope"]) == (3, 8, "per GPU")
    whole = run_json(capsys, *argv)
    assert (whole["zero_stage"], whole["gpus"], whole["scope"]) == (0, 1, "per GPU")
    assert main([*argv, "--zero-stage", "3", "--gpus", "8"]) == 0
    rows = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert (rows["zero_stage"], rows["gpus"], rows["scope"]) == ("3", "8", "per GPU")


def test_cli_memory_zero_paper_figure_1(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    # Figure 1's model states: Ψ = 7.5B, N_d = 64, fp16 mixed precision with Adam (K = 12). The 2,048-wide
    # custom config has 12·2048² + 13·2048 = 50,358,272 parameters per layer (norms included) and almost no
    # embeddings: 149 layers + 12,288 (2-token vocabulary, 2 positions, final norm) = 7,503,394,816 ≈ 7.5B.
    fields = {"arch": "gpt2", "n_layer": 149, "n_head": 16, "d_model": 2048, "d_ff": 8192, "vocab_size": 2, "n_ctx": 2}
    path = tmp_path / "zero.json"
    path.write_text(json.dumps(fields), encoding="utf-8")
    argv = ["memory", "--config", str(path), "--recipe", "fp16-mixed-adamw", "--batch", "1", "--seq-len", "1"]
    states = {}
    for stage in (0, 1, 2, 3):
        result = run_json(capsys, *argv, "--zero-stage", str(stage), "--gpus", "64")
        states[stage] = result["total_bytes"] - result["activations_bytes"]
    assert [round(states[s] / 1e9, 1) for s in (0, 1, 2, 3)] == [120.1, 31.4, 16.6, 1.9]  # Figure 1: 120, 31.4, 16.6, 1.9 GB


@pytest.mark.parametrize(
    ("extra", "message"),
    [(["--zero-stage", "4"], "invalid choice: 4"), (["--gpus", "0"], "expected a positive integer, got 0"),
     (["--gpus", "two"], "expected a positive integer"),
     (["--zero-stage", "3"], "--zero-stage 3 shards the model states over data-parallel GPUs: give their number with --gpus N")],
)
def test_cli_memory_zero_bad_input_exits_2(capsys: pytest.CaptureFixture[str], extra: list[str], message: str) -> None:
    assert main([*MEMORY_ARGS, "--recipe", "fp32-adamw", "--batch", "1", *extra]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and message in err


# --- h2d (notebook 06) ------------------------------------------------------------------------

from lecturelib.data import cuda_unavailable_reason  # noqa: E402  (this block merges on its own)

CUDA = cuda_unavailable_reason() is None


@pytest.mark.skipif(CUDA, reason="the CPU answer: this machine has CUDA")
def test_cli_h2d_without_cuda_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "h2d", "--bytes", str(2**20))
    assert result["available"] is False
    assert result["bytes"] == 2**20
    assert "CUDA" in str(result["reason"])
    assert set(result) == {"available", "reason", "bytes"}  # no bandwidth is claimed


@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_cli_h2d_on_cuda_gives_both_rates(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_json(capsys, "h2d", "--bytes", "2.5e7")  # 25 MB, written as a float
    assert result["available"] is True and result["bytes"] == 25_000_000
    pageable, pinned = result["pageable_bytes_per_s"], result["pinned_bytes_per_s"]
    assert isinstance(pageable, float) and isinstance(pinned, float) and pageable > 0 and pinned > 0
    assert result["pinned_over_pageable"] == pinned / pageable


def test_cli_h2d_subprocess_exits_0_with_one_object() -> None:
    proc = run_cli("h2d", "--bytes", "4096", "--json")
    assert proc.returncode == 0 and proc.stderr == ""
    result = json.loads(proc.stdout)
    assert result["available"] is CUDA


def test_cli_h2d_table_names_availability(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["h2d", "--bytes", "4096"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("available") and ("reason" in out) is not CUDA


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["h2d", "--bytes", "0"], "expected a positive number"),
        (["h2d", "--bytes", "-4096"], "expected a positive number"),
        (["h2d", "--bytes", "1.5"], "expected a whole number of bytes"),
        (["h2d", "--bytes", "lots"], "expected a positive number"),
        (["h2d"], "--bytes"),
    ],
)
def test_cli_h2d_bad_input_exits_2_one_line(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("lecturelib: error: ")
    assert message in err


@pytest.mark.usefixtures("one_thread")
def test_cli_train_resume_past_stop_after_exits_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = str(tmp_path / "c.pt")
    common = [*TRAIN_ARGS, "--steps", "4", "--batch", "1", "--checkpoint", path, "--stop-after", "2"]
    assert main([*common, "--json"]) == 0
    capsys.readouterr()
    assert main([*common, "--resume"]) == 2  # the checkpoint is at step 2 already: nothing to run
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and "already at step 2" in err
