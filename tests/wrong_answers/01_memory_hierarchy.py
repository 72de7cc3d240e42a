"""Notebook 01: mistakes that must lose their exercise's points."""

from wrong_answers import Wrong

WRONG = [
    Wrong(cell="ex1_1", label="no overlap: the time to compute plus the time to move", source='''
def roofline_time_s(flops: int, n_bytes: int, peak_flop_per_s: float, peak_bytes_per_s: float) -> float:
    """The roofline's lower bound on the seconds of a kernel with these FLOPs and bytes on this device."""
    return flops / peak_flop_per_s + n_bytes / peak_bytes_per_s
''', teaches="computing and moving overlap: the shorter one hides inside the longer one"),
    Wrong(cell="ex1_2", label="a library call: hardware.measure_bandwidth times on its own clock", source='''
import math
import time
from collections.abc import Callable

from lecturelib import hardware


def read_bandwidth(working_set_bytes: int, *, bytes_per_call: int = 2**25, warmup: int = 2, calls: int = 9,
                   device: str = "cpu", clock: Callable[[], float] = time.perf_counter) -> float:
    """Bytes per second that the least disturbed of `calls` timed calls read from a working set of this size."""
    point = hardware.measure_bandwidth(working_set_bytes, "read", device, bytes_per_call=bytes_per_call,
                                       min_run_time_s=0.01)
    return point.best_bytes_per_s
''', teaches="not the rate of the fastest timed call (warm-up excluded, each call timed alone on the given clock)"),
    Wrong(cell="ex1_2", label="a skipped step: one clock reading around all the calls (their mean), no warm-up", source='''
import math
import time
from collections.abc import Callable


def read_bandwidth(working_set_bytes: int, *, bytes_per_call: int = 2**25, warmup: int = 2, calls: int = 9,
                   device: str = "cpu", clock: Callable[[], float] = time.perf_counter) -> float:
    """Bytes per second that the least disturbed of `calls` timed calls read from a working set of this size."""
    n = working_set_bytes // 4
    x = torch.ones(n, device=device)
    repeats = -(-bytes_per_call // working_set_bytes)
    rows = x.expand(repeats, n)
    start = clock()
    for _ in range(calls):
        torch.sum(rows, dim=1)
    return calls * repeats * working_set_bytes / (clock() - start)
''', teaches="not one sum kernel per call, warm-up calls included"),
    Wrong(cell="ex1_3", label="each size compared with the size before it, not with its plateau's median", source='''
import math
import statistics
from collections.abc import Sequence


def plateaus(rates: Sequence[float], drop: float = 0.3) -> list[list[int]]:
    """The positions of a sweep's rates (smallest working set first), grouped into the plateaus its knees separate."""
    groups: list[list[int]] = []
    for i, rate in enumerate(rates):
        if groups and rate >= (1 - drop) * rates[i - 1]:
            groups[-1].append(i)
        else:
            groups.append([i])
    merged = True
    while merged:
        merged = False
        for g in range(1, len(groups) - 1):
            if len(groups[g]) == 1:
                here = math.log(rates[groups[g][0]])
                before = abs(here - math.log(statistics.median(rates[i] for i in groups[g - 1])))
                after = abs(here - math.log(statistics.median(rates[i] for i in groups[g + 1])))
                lone = groups.pop(g)
                if before <= after:
                    groups[g - 1] += lone
                else:
                    groups[g][:0] = lone
                merged = True
                break
    return groups
''', teaches="a size was compared with the size before it, not with its plateau's median rate"),
    Wrong(cell="ex1_3", label="a skipped step: a lone size between two plateaus left alone", source='''
import math
import statistics
from collections.abc import Sequence


def plateaus(rates: Sequence[float], drop: float = 0.3) -> list[list[int]]:
    """The positions of a sweep's rates (smallest working set first), grouped into the plateaus its knees separate."""
    groups: list[list[int]] = []
    for i, rate in enumerate(rates):
        if groups and rate >= (1 - drop) * statistics.median(rates[j] for j in groups[-1]):
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups
''', teaches="a lone size between two plateaus was not merged into the nearer one"),
    Wrong(cell="ex1_4", label="a plain shuffle (Fisher-Yates): a random permutation, usually of several cycles", source='''
import random


def single_cycle_permutation(n: int, seed: int) -> list[int]:
    """A random permutation of range(n) that is one cycle through all n positions, drawn with its own seeded generator."""
    rng = random.Random(seed)
    p = list(range(n))
    rng.shuffle(p)
    return p
''', teaches="the permutation is not one cycle through all n positions"),
    Wrong(cell="ex1_4", label="Sattolo's algorithm on the global generator, reseeded", source='''
import random


def single_cycle_permutation(n: int, seed: int) -> list[int]:
    """A random permutation of range(n) that is one cycle through all n positions, drawn with its own seeded generator."""
    random.seed(seed)
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = random.randrange(i)
        p[i], p[j] = p[j], p[i]
    return p
''', teaches="a global random generator (Python's, NumPy's or torch's) was reseeded or advanced"),
]
