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
''', fails=("ex9_1_test",), teaches="an operator's complete cpu_op calls add up, on every thread"),
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
''', fails=("ex9_1_test",), teaches="an operator's complete cpu_op calls add up, on every thread"),
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
''', fails=("ex9_2_test",), teaches="only the operators directly inside a call come off its time, not their children"),
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
''', fails=("ex9_3_test",), teaches="only the memory events of the device type asked for count"),
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
''', fails=("ex9_4_test",),
          teaches="an element-wise output has the inputs' broadcast shape, and every tensor is read or written once"),
    Wrong(cell="ex9_5", label="absolute rates compared (FLOP/s against bytes/s) instead of fractions of the roofs",
          source='''
def bound_by(flops: int, bytes_moved: int, seconds: float, peak_flop_per_s: float, peak_bytes_per_s: float) -> str:
    """What limits an operator: "overhead" below 10 % of both roofs, else the larger rate decides."""
    flop_per_s, bytes_per_s = flops / seconds, bytes_moved / seconds
    if flop_per_s < 0.1 * peak_flop_per_s and bytes_per_s < 0.1 * peak_bytes_per_s:
        return "overhead"
    return "compute" if flop_per_s > bytes_per_s else "memory"
''', fails=("ex9_5_test",), teaches="at or above 10 % of a roof, the larger fraction decides, and a tie is memory"),
    Wrong(cell="ex9_6", label="self time not reduced by the ranges inside (the total counted twice)", source='''
import contextlib
import time
from collections.abc import Callable, Iterator

from torch.profiler import record_function


class SpanTimer:
    """Calls, total and self seconds of named, nested ranges of code, read from the clock it is given."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: Callable[[], None] = lambda: None) -> None:
        self.clock, self.sync = clock, sync
        self.stats: dict[str, list] = {}

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        """Time the code inside as one call of range `name`; a running torch.profiler records the range too."""
        with record_function(name):
            self.sync()
            start = self.clock()
            try:
                yield
            finally:
                self.sync()
                seconds = self.clock() - start
                stats = self.stats.setdefault(name, [0, 0.0, 0.0])
                stats[0] += 1
                stats[1] += seconds
                stats[2] += seconds  # the ranges inside are never subtracted

    def summary(self) -> dict[str, tuple[int, float, float]]:
        """{name: (calls, total seconds, self seconds)} of the ranges closed so far."""
        return {name: tuple(v) for name, v in self.stats.items()}
''', fails=("ex9_6_test",), teaches="a range's self time leaves out the ranges directly inside it"),
    Wrong(cell="ex9_6", label="the library's clock read instead of the one given (perf_counter, no sync)", source='''
import contextlib
import time
from collections.abc import Callable, Iterator

from torch.profiler import record_function


class SpanTimer:
    """Calls, total and self seconds of named, nested ranges of code."""

    def __init__(self, clock: Callable[[], float] = time.perf_counter, sync: Callable[[], None] = lambda: None) -> None:
        self.stats: dict[str, list] = {}
        self.open: list[list] = []

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        """Time the code inside as one call of range `name`; a running torch.profiler records the range too."""
        with record_function(name):
            self.open.append([time.perf_counter(), 0.0])  # the clock and the sync it was given are ignored
            try:
                yield
            finally:
                start, inside_s = self.open.pop()
                total_s = time.perf_counter() - start
                stats = self.stats.setdefault(name, [0, 0.0, 0.0])
                stats[0] += 1
                stats[1] += total_s
                stats[2] += total_s - inside_s
                if self.open:
                    self.open[-1][1] += total_s

    def summary(self) -> dict[str, tuple[int, float, float]]:
        """{name: (calls, total seconds, self seconds)} of the ranges closed so far."""
        return {name: tuple(v) for name, v in self.stats.items()}
''', fails=("ex9_6_test",), teaches="a range's total time is its closing clock read minus its opening one"),
]
