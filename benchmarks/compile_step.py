"""Notebook 00's torch.compile on this machine: the first compiled step (cold and warm Inductor cache) and eager vs compiled.

    .venv/bin/python benchmarks/compile_step.py --runs 3 --threads 1

The step is notebook 00's: the lecture's two-layer network (N = 64, D_in = 1000, H = 100, D_out = 10) as an
nn.Module with frozen zero biases, a summed squared error, loss.backward() and torch.optim.SGD, float32, on the
CPU (or CUDA with --device cuda). torch.compile(model, dynamic=False) compiles the forward and, through
AOTAutograd, the backward on the first call. Each run starts a fresh Python process with an empty
TORCHINDUCTOR_CACHE_DIR ("cold": Inductor generates and builds its kernels), then a second process on the same
cache ("warm": the kernels come from disk, Dynamo still traces). Each process then times eager and compiled steps
in interleaved rounds (lecturelib.profiler.compare). Prints one JSON object: per run, the first compiled step in
seconds, the median eager and compiled step in ms, and compiled / eager per round, with the load average.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ONE_RUN = r"""
import json, sys, time
import torch
from torch import nn
from lecturelib.profiler import compare

device, threads = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(threads)
torch.manual_seed(0)
N, D_IN, H, D_OUT = 64, 1000, 100, 10
x, y = torch.randn(N, D_IN, device=device), torch.randn(N, D_OUT, device=device)
w1, w2 = torch.randn(D_IN, H, device=device), torch.randn(H, D_OUT, device=device)


class TwoLayerNet(nn.Module):
    def __init__(self, d_in, hidden, d_out):
        super().__init__()
        self.linear1 = nn.Linear(d_in, hidden)
        self.linear2 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.linear2(torch.relu(self.linear1(x)))


def module_version(compile_model):
    model = TwoLayerNet(D_IN, H, D_OUT).to(device)
    weight1, bias1, weight2, bias2 = model.parameters()
    with torch.no_grad():
        weight1.copy_(w1.T)
        weight2.copy_(w2.T)
        bias1.zero_()
        bias2.zero_()
    bias1.requires_grad_(False)
    bias2.requires_grad_(False)
    optimizer = torch.optim.SGD([weight1, weight2], lr=1e-6)
    forward = torch.compile(model, dynamic=False) if compile_model else model

    def step():
        loss = (forward(x) - y).pow(2).sum()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss.detach()

    return step


eager, compiled = module_version(False), module_version(True)
start = time.perf_counter()
compiled()
if device == "cuda":
    torch.cuda.synchronize()
first_s = time.perf_counter() - start
rounds = compare({"eager": eager, "compiled": compiled}, rounds=7, min_round_s=0.2, num_threads=threads)
ratio = rounds.ratio("compiled", "eager")
print(json.dumps({"first_compiled_step_s": round(first_s, 2), "eager_ms": round(rounds.median_s("eager") * 1e3, 3),
                  "compiled_ms": round(rounds.median_s("compiled") * 1e3, 3),
                  "compiled_over_eager": [round(ratio.median, 2), round(ratio.low, 2), round(ratio.high, 2)]}))
"""


def run_once(cache_dir: str, device: str, threads: int) -> dict[str, object]:
    """One fresh Python process on the given Inductor cache: its JSON line, with the load average after it."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir}
    done = subprocess.run([sys.executable, "-c", ONE_RUN, device, str(threads)], env=env, check=True,
                          capture_output=True, text=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    result["load_average"] = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="fresh caches to try (each: a cold and a warm process)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (notebook 00 times one)")
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    args = parser.parse_args()
    if args.runs < 1 or args.threads < 1:
        parser.error("--runs and --threads must be at least 1")
    runs = []
    start = time.perf_counter()
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="inductor-") as cache:
            runs.append({"cold": run_once(cache, args.device, args.threads),
                         "warm": run_once(cache, args.device, args.threads)})
    print(json.dumps({"device": args.device, "threads": args.threads, "runs": runs,
                      "wall_s": round(time.perf_counter() - start, 1)}, indent=1))


if __name__ == "__main__":
    main()
