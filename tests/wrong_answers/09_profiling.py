"""Notebook 09: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex9_1", label="every complete event summed, whatever its category (ranges and Python frames too)",
          source='''
import json


def op_time_us(trace_path: str) -> dict[str, float]:
    """Total µs of each name over the complete events of a Chrome trace file."""
    with open(trace_path) as file:
        events = json.load(file)["traceEvents"]
    totals: dict[str, float] = {}
    for event in events:
        if event.get("ph") == "X":
            totals[event["name"]] = totals.get(event["name"], 0.0) + float(event["dur"])
    return totals
''', fails=("ex9_1_test",)),
    Wrong(cell="ex9_1", label="begin/end pairs counted as well as complete events", source='''
import json


def op_time_us(trace_path: str) -> dict[str, float]:
    """Total µs of each operator name: complete events, plus every begin/end pair."""
    with open(trace_path) as file:
        events = json.load(file)["traceEvents"]
    totals: dict[str, float] = {}
    begun: dict[tuple, float] = {}
    for event in sorted((e for e in events if e.get("cat") == "cpu_op"), key=lambda e: e["ts"]):
        name, key = event["name"], (event["name"], event.get("tid"))
        if event["ph"] == "X":
            totals[name] = totals.get(name, 0.0) + float(event["dur"])
        elif event["ph"] == "B":
            begun[key] = event["ts"]
        elif event["ph"] == "E" and key in begun:
            totals[name] = totals.get(name, 0.0) + event["ts"] - begun.pop(key)
    return totals
''', fails=("ex9_1_test",)),
    Wrong(cell="ex9_2", label="every operator inside subtracted, grandchildren too", source='''
import json


def self_time_us(trace_path: str) -> dict[str, float]:
    """Total self µs of each operator name: its duration minus that of every operator inside it."""
    with open(trace_path) as file:
        events = json.load(file)["traceEvents"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    totals: dict[str, float] = {}
    for e in ops:
        inside = [c for c in ops if c is not e and (c["pid"], c["tid"]) == (e["pid"], e["tid"])
                  and e["ts"] <= c["ts"] and c["ts"] + c["dur"] <= e["ts"] + e["dur"]]
        totals[e["name"]] = totals.get(e["name"], 0.0) + e["dur"] - sum(c["dur"] for c in inside)
    return totals
''', fails=("ex9_2_test",)),
    Wrong(cell="ex9_3", label="every device's memory events added together", source='''
import json


def peak_allocated_bytes(trace_path: str, device_type: int = 0) -> int:
    """Largest running sum of "[memory]" event bytes, in time order."""
    with open(trace_path) as file:
        events = json.load(file)["traceEvents"]
    memory = sorted((e for e in events if e.get("name") == "[memory]"), key=lambda e: e["ts"])
    alive = peak = 0
    for e in memory:
        alive += int(e["args"]["Bytes"])
        peak = max(peak, alive)
    return peak
''', fails=("ex9_3_test",)),
    Wrong(cell="ex9_4", label="broadcasting forgotten: the output taken as large as the first input", source='''
import math

import torch

from lecturelib.flops import matmul_flops
from lecturelib.hardware import matmul_bytes

ELEMENTWISE = ("aten::add", "aten::sub", "aten::mul", "aten::div", "aten::pow", "aten::tanh")


def op_cost(name: str, input_dims: list[list[int]], element_bytes: int) -> tuple[int, int] | None:
    """(FLOPs, bytes moved) of one operator call from its input shapes, or None."""
    tensors = [list(d) for d in input_dims if len(d) > 0]
    base = name.removesuffix("_")
    if base == "aten::mm":
        (m, k), (_, n) = tensors
        return matmul_flops(m, k, n), matmul_bytes(m, k, n, element_bytes)
    if base == "aten::addmm":
        bias, (m, k), (_, n) = tensors
        return matmul_flops(m, k, n), matmul_bytes(m, k, n, element_bytes) + math.prod(bias) * element_bytes
    if base == "aten::mv":
        (m, k), _ = tensors
        return matmul_flops(m, k, 1), matmul_bytes(m, k, 1, element_bytes)
    if base == "aten::dot":
        (k,), _ = tensors
        return matmul_flops(1, k, 1), matmul_bytes(1, k, 1, element_bytes)
    if base in ELEMENTWISE:
        if not tensors:
            return 0, 0
        out = math.prod(tensors[0])
        return out, (sum(math.prod(d) for d in tensors) + out) * element_bytes
    return None
''', fails=("ex9_4_test",)),
    Wrong(cell="ex9_5", label="absolute rates compared (FLOP/s against bytes/s) instead of fractions of the roofs",
          source='''
def bound_by(flops: int, bytes_moved: int, seconds: float, peak_flop_per_s: float, peak_bytes_per_s: float) -> str:
    """What limits an operator: "overhead" below 10 % of both roofs, else the larger rate decides."""
    flop_per_s, bytes_per_s = flops / seconds, bytes_moved / seconds
    if flop_per_s < 0.1 * peak_flop_per_s and bytes_per_s < 0.1 * peak_bytes_per_s:
        return "overhead"
    return "compute" if flop_per_s > bytes_per_s else "memory"
''', fails=("ex9_5_test",)),
]
