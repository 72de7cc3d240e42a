"""Communication: the α–β cost of a message, the ring all-reduce, link datasheets, and process groups to measure them.

Three parts:

* **Models** (pure functions over sizes): the ring all-reduce's time, 2·(N−1)·α + 2·(N−1)/N · bytes / bandwidth
  (Patarasuk & Yuan 2009; NCCL's own tuning model counts the same 2·(N−1) steps), a binary tree's, ZeRO's traffic
  per step (Rajbhandari et al. 2020, sec. 7), the days, GPU-hours, energy and money of a training run (6·N·D).
* **Links**: datasheet bandwidths per direction (NVLink 4, PCIe 5, InfiniBand NDR, 100 and 400 GbE), each with its
  source, and a per-step latency α taken from NCCL's tuning model.
* **Process groups**: `run_group` starts `world` processes joined in one `torch.distributed` group (gloo over
  127.0.0.1 on a CPU; NCCL where there is a GPU per process), runs a worker function in each, returns what they
  return, and leaves no process behind whatever happens (a failed or hung rank fails the call, within a timeout).
  The workers the notebooks use live here, in an importable module: a spawned process re-imports its code.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import math
import multiprocessing
import multiprocessing.connection
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from lecturelib.data import pcie_bytes_per_s

SECONDS_PER_DAY = 86_400

# ---------------------------------------------------------------------------------------------
# The α–β model of collectives


def ring_allreduce_bytes(n_bytes: float, world: int) -> float:
    """Bytes one rank sends in a ring all-reduce of an n_bytes buffer: 2·(N−1)/N · n (reduce-scatter + all-gather)."""
    _check_world(world)
    return 2 * (world - 1) / world * n_bytes


def allreduce_seconds(n_bytes: int, world: int, alpha_s: float, bytes_per_s: float) -> float:
    """Time of a ring all-reduce: 2·(N−1) steps of latency α, each rank sending 2·(N−1)/N of the buffer."""
    _check_world(world)
    if n_bytes < 0 or alpha_s < 0 or not bytes_per_s > 0:
        raise ValueError(f"need n_bytes >= 0, alpha_s >= 0, bytes_per_s > 0; got {n_bytes}, {alpha_s}, {bytes_per_s}")
    if world == 1:
        return 0.0  # nothing to exchange
    return 2 * (world - 1) * alpha_s + ring_allreduce_bytes(n_bytes, world) / bytes_per_s


def tree_allreduce_seconds(n_bytes: int, world: int, alpha_s: float, bytes_per_s: float) -> float:
    """Time of a binary-tree all-reduce without pipelining: reduce up and broadcast down, ⌈log₂N⌉ hops each way,
    every hop moving the whole buffer: 2·⌈log₂N⌉·(α + n/B)."""
    _check_world(world)
    if world == 1:
        return 0.0
    hops = math.ceil(math.log2(world))
    return 2 * hops * (alpha_s + n_bytes / bytes_per_s)


def pipelined_tree_allreduce_seconds(n_bytes: int, world: int, alpha_s: float, bytes_per_s: float) -> float:
    """Time of a pipelined double-binary-tree all-reduce (NCCL's Tree), its chunk count chosen best by the model."""
    # The buffer goes in k chunks up a tree of depth h = ⌈log₂N⌉ and down again: 2h stages, the chunks following each
    # other (Sanders, Speck & Träff 2009, two-tree algorithms; Jeaugey 2019, NCCL 2.4's double binary trees). With two
    # trees, every rank is an inner node of one and a leaf of the other, so in the steady state it sends and receives
    # 2 chunks per stage: (2h + k − 1) stages of α + 2·(n/k)/B. Many chunks remove the log₂N factor from the bytes
    # (→ 2n/B, about the ring's 2·(N−1)/N·n/B) while the latency stays 2h·α plus the pipeline's fill.
    _check_world(world)
    if n_bytes < 0 or alpha_s < 0 or not bytes_per_s > 0:
        raise ValueError(f"need n_bytes >= 0, alpha_s >= 0, bytes_per_s > 0; got {n_bytes}, {alpha_s}, {bytes_per_s}")
    if world == 1:
        return 0.0
    fill = 2 * math.ceil(math.log2(world)) - 1  # stages before the first chunk is back down
    bandwidth_s = 2 * n_bytes / bytes_per_s  # what every rank's link carries in all
    if alpha_s == 0:
        return bandwidth_s  # chunks free of latency: as many as you like
    chunks = max(1.0, math.sqrt(fill * bandwidth_s / alpha_s))  # the minimum of (fill + k)·(α + bandwidth_s/k)
    return (fill + chunks) * (alpha_s + bandwidth_s / chunks)


def zero_bytes_per_step(n_params: int, bytes_per_value: int, world: int, stage: int) -> float:
    """Bytes one rank sends per training step under ZeRO `stage` (0 = plain data parallelism): 2Ψ for stages 0–2,
    3Ψ for stage 3, in units of Ψ = (N−1)/N · parameters · bytes (Rajbhandari et al. 2020, sec. 7.2)."""
    _check_world(world)
    if stage not in (0, 1, 2, 3):
        raise ValueError(f"stage must be 0, 1, 2 or 3, got {stage}")
    psi = (world - 1) / world * n_params * bytes_per_value  # one reduce-scatter or one all-gather of the model
    return (3 if stage == 3 else 2) * psi


def train_days(n_params: float, tokens: float, n_gpus: int, peak_flop_per_s: float, mfu: float) -> float:
    """Days to train N parameters on D tokens with G GPUs: 6·N·D FLOPs at G · peak · MFU FLOP/s."""
    if n_gpus < 1 or not peak_flop_per_s > 0 or not 0 < mfu <= 1:
        raise ValueError(f"need n_gpus >= 1, peak_flop_per_s > 0, 0 < mfu <= 1; got {n_gpus}, {peak_flop_per_s}, {mfu}")
    return 6 * n_params * tokens / (n_gpus * peak_flop_per_s * mfu) / SECONDS_PER_DAY


@dataclass(frozen=True)
class RunCost:
    """What a training run costs: GPU-hours, energy at the wall, money."""

    days: float  # wall-clock days of the run
    gpu_hours: float  # days · 24 · GPUs
    energy_kwh: float  # board power · GPU-hours · PUE (the whole facility's energy per unit of IT energy)
    usd: float  # GPU-hours · price per GPU-hour (a rented GPU's price includes its power, cooling and building)


def run_cost(days: float, n_gpus: int, board_watts: float, pue: float, usd_per_gpu_hour: float) -> RunCost:
    """GPU-hours, energy (board power × time × PUE) and money of a run of `days` on `n_gpus` GPUs."""
    if days < 0 or n_gpus < 1 or board_watts < 0 or pue < 1 or usd_per_gpu_hour < 0:
        raise ValueError("need days >= 0, n_gpus >= 1, board_watts >= 0, pue >= 1, usd_per_gpu_hour >= 0")
    gpu_hours = days * 24 * n_gpus
    return RunCost(days, gpu_hours, board_watts / 1000 * gpu_hours * pue, gpu_hours * usd_per_gpu_hour)


# What a GPU-hour costs and draws: cited figures, each with its date
@dataclass(frozen=True)
class Cited:
    """A figure with its source and the date it held."""

    value: float
    source: str
    date: str


# AWS EC2 Capacity Blocks for ML, p5.48xlarge (8 × H100 SXM) in US East (N. Virginia): $39.33 per instance-hour,
# $4.916 per H100-hour, as the pricing page listed them before its update of 1 January 2025.
H100_USD_PER_GPU_HOUR = Cited(4.916, "https://aws.amazon.com/ec2/capacityblocks/pricing/", "December 2024")
# H100 SXM: "Max thermal design power (TDP) up to 700W (configurable)", the product page's specifications.
H100_BOARD_WATTS = Cited(700.0, "https://www.nvidia.com/en-us/data-center/h100/", "2022-2025")
# Power usage effectiveness (facility energy ÷ IT energy): Google's and Microsoft's large data centres about 1.1
# (Patterson et al. 2021, Table 4, GPT-3's: 1.10); the industry's average 1.58 (Uptime Institute, 2023).
PUE_HYPERSCALE = Cited(1.10, "https://arxiv.org/abs/2104.10350", "2021")
PUE_INDUSTRY = Cited(1.58, "https://intelligence.uptimeinstitute.com/resource/large-data-centers-are-mostly-more-efficient-analysis-confirms", "2023")
TOKENS_PER_STEP = 4 * 2**20  # a global batch of 4M tokens (Llama 2's: Touvron et al. 2023, sec. 2.2)


def _check_world(world: int) -> None:
    if world < 1:
        raise ValueError(f"world must be at least 1, got {world}")


# ---------------------------------------------------------------------------------------------
# Links: datasheet bandwidths, one direction, per GPU (a ring sends and receives at once)

# NCCL's tuning model (NVIDIA/nccl, src/graph/tuning.cc, table hwLat, Ring with the Simple protocol, the version at
# commit 01afd20): the latency of one ring step, in µs, on NVLink 3.4, PCI 5.7, the network 9.6. Not datasheet
# figures: the model NCCL itself uses to choose between ring and tree.
_NCCL_TUNING = "https://github.com/NVIDIA/nccl/blob/01afd20a77b5804e0ecf1042509dd9d20ebf9e93/src/graph/tuning.cc"


@dataclass(frozen=True)
class Link:
    """One interconnect: bytes per second in one direction per GPU, the latency of one ring step, and sources."""

    name: str
    bytes_per_s: float  # payload, one direction, per GPU
    alpha_s: float  # latency of one ring step (NCCL's tuning model)
    source: str  # the datasheet or standard the bandwidth comes from
    note: str  # how the figure is read from the source


LINKS: dict[str, Link] = {
    "nvlink4": Link(
        "NVLink 4 (H100 SXM)", 450e9, 3.4e-6, "https://www.nvidia.com/en-us/data-center/h100/",
        "the product page's 900 GB/s per GPU counts both directions: 18 links × 25 GB/s each way"),
    "pcie5-x16": Link(
        "PCIe 5.0 x16", pcie_bytes_per_s(5, 16), 5.7e-6, "https://en.wikipedia.org/wiki/PCI_Express#Comparison_table",
        "32 GT/s × 16 lanes × 128/130 encoding / 8 bits per direction (PCI-SIG base specification 5.0)"),
    "ib-ndr": Link(
        "InfiniBand NDR (400 Gb/s)", 400e9 / 8, 9.6e-6, "https://www.infinibandta.org/infiniband-roadmap/",
        "a 4x NDR port: 400 Gb/s per direction, one port (ConnectX-7 adapter) per GPU"),
    "400gbe": Link(
        "400 Gigabit Ethernet", 400e9 / 8, 9.6e-6, "https://www.ieee802.org/3/bs/",
        "IEEE 802.3bs-2017: 400 Gb/s of MAC data rate per direction; one port per GPU"),
    "100gbe": Link(
        "100 Gigabit Ethernet", 100e9 / 8, 9.6e-6, "https://www.ieee802.org/3/ba/",
        "IEEE 802.3ba-2010: 100 Gb/s of MAC data rate per direction; one port per GPU"),
}
LINK_ALPHA_SOURCE = _NCCL_TUNING


@dataclass(frozen=True)
class TrainingRun:
    """The napkin math of a data-parallel training run: one step's compute and gradient all-reduce, days, cost."""

    steps: float  # optimizer steps: tokens / tokens per step
    compute_s: float  # one step's 6·N·tokens FLOPs at G · peak · MFU
    comm_s: float  # one step's gradient all-reduce (16-bit gradients) on the link, once per step (no_sync)
    days: float  # compute only: train_days
    days_no_overlap: float  # every all-reduce exposed: steps · (compute + comm)
    days_overlap: float  # every all-reduce hidden behind compute where it fits: steps · max(compute, comm)
    cost: RunCost  # of the run with every all-reduce exposed


def plan_run(n_params: float, tokens: float, n_gpus: int, link: str, mfu: float, *,
             peak_flop_per_s: float | None = None, tokens_per_step: float = TOKENS_PER_STEP, grad_bytes_per_param: int = 2,
             board_watts: float = H100_BOARD_WATTS.value, pue: float = PUE_HYPERSCALE.value,
             usd_per_gpu_hour: float = H100_USD_PER_GPU_HOUR.value) -> TrainingRun:
    """Days, GPU-hours, energy and money of training N parameters on D tokens with G GPUs joined by `link`
    (defaults: H100 SXM at its dense bf16 peak, bf16 gradients, 4M tokens per step, the cited power, PUE, price)."""
    if link not in LINKS:
        raise ValueError(f"unknown link {link!r}; known: {', '.join(LINKS)}")
    if peak_flop_per_s is None:
        from lecturelib.hardware import peak_flop_per_s as datasheet_peak

        peak_flop_per_s = datasheet_peak("h100-sxm", "bf16")
    days = train_days(n_params, tokens, n_gpus, peak_flop_per_s, mfu)
    steps = tokens / tokens_per_step
    compute_s = days * SECONDS_PER_DAY / steps
    comm_s = allreduce_seconds(int(grad_bytes_per_param * n_params), n_gpus, LINKS[link].alpha_s,
                               LINKS[link].bytes_per_s)
    days_no_overlap = steps * (compute_s + comm_s) / SECONDS_PER_DAY
    days_overlap = steps * max(compute_s, comm_s) / SECONDS_PER_DAY
    return TrainingRun(steps, compute_s, comm_s, days, days_no_overlap, days_overlap,
                       run_cost(days_no_overlap, n_gpus, board_watts, pue, usd_per_gpu_hour))


# ---------------------------------------------------------------------------------------------
# Fitting α and β to measured all-reduce times


@dataclass(frozen=True)
class AlphaBetaFit:
    """t = 2·(N−1)·α + 2·(N−1)/N · bytes / β, fitted to measured all-reduce times of one world size."""

    world: int
    alpha_s: float  # latency of one of the ring's 2·(N−1) steps
    bytes_per_s: float  # β: the rate at which one rank's share of the bytes moves
    max_relative_error: float  # largest |fit − measured| / measured over the points


def fit_alpha_beta(n_bytes: Sequence[int], seconds: Sequence[float], world: int) -> AlphaBetaFit:
    """Least squares (on relative error) of the ring model to measured all-reduce times of one world size."""
    from lecturelib.profiler import fit_fixed_cost

    if world < 2:
        raise ValueError(f"a fit needs at least 2 processes, got world = {world}")
    fit = fit_fixed_cost([ring_allreduce_bytes(n, world) for n in n_bytes], seconds)
    return AlphaBetaFit(world, fit.fixed_s / (2 * (world - 1)), fit.rate_per_s, fit.max_relative_error)


# ---------------------------------------------------------------------------------------------
# Process groups: start, join, clean up

R = TypeVar("R")
A = TypeVar("A")
Worker = Callable[[int, int, Any], Any]  # worker(rank, world, arg) -> a picklable result (no tensors)


class GroupFailed(RuntimeError):
    """A rank of a process group raised, died or did not finish in time; every rank has been stopped."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def loopback_interface() -> str:
    """The name of the loopback network interface ("lo" on Linux, "lo0" on macOS): gloo binds its sockets there."""
    names = [name for _, name in socket.if_nameindex()] if hasattr(socket, "if_nameindex") else []
    return next((n for n in names if n.startswith("lo")), "lo0" if sys.platform == "darwin" else "lo")


def default_backend(world: int) -> str:
    """NCCL when there is a CUDA GPU for every rank, else gloo (CPU tensors, TCP over loopback)."""
    import torch

    if torch.cuda.is_available() and torch.cuda.device_count() >= world:
        return "nccl"
    return "gloo"


def default_start_method(backend: str) -> str:
    """fork for gloo on Linux (children start in milliseconds, sharing the parent's imported torch); spawn
    elsewhere and for NCCL (CUDA cannot be used in a forked child; macOS's system libraries are not fork-safe)."""
    if backend == "gloo" and sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods():
        return "fork"
    return "spawn"


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies (a killed notebook kernel leaves no rank behind)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _child(worker: Worker, rank: int, world: int, arg: Any, port: int, backend: str, timeout_s: float,
           conn: multiprocessing.connection.Connection, log_path: str) -> None:
    """One rank: quiet its output, join the group, run the worker, send back ("ok", result) or ("error", text)."""
    _die_with_parent()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)  # what c10d and gloo print (C++ warnings such as an unresolvable host name) goes to a file:
    os.dup2(log, 2)  # the notebook shows it only if this rank fails
    # and Python's prints too: a forked child inherits the notebook kernel's sys.stdout, an object that talks to
    # the kernel's I/O thread, which does not exist in the child
    sys.stdout = open(1, "w", closefd=False, errors="replace")  # noqa: SIM115 - lives as long as the process
    sys.stderr = open(2, "w", closefd=False, errors="replace")  # noqa: SIM115
    reported = False

    def report(status: str, payload: Any) -> None:
        nonlocal reported
        if not reported:
            conn.send((status, payload))
            reported = True

    try:
        import torch
        import torch.distributed as dist

        torch.set_num_threads(1)  # one intra-op thread per rank: ranks share the cores (and a forked OpenMP pool is unsafe)
        os.environ["GLOO_SOCKET_IFNAME"] = loopback_interface()  # bind gloo to 127.0.0.1, not to the host name
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        try:
            report("ok", worker(rank, world, arg))
        except BaseException:
            report("error", _failure(log_path))  # before the group is torn down: the first report names the cause,
            raise  # not the other ranks' "connection reset" that the teardown causes
        finally:
            dist.destroy_process_group()
    except BaseException:  # noqa: BLE001 - everything goes back to the parent, which raises
        report("error", _failure(log_path))
    finally:
        conn.close()


def _failure(log_path: str) -> str:
    """The exception being handled, and the tail of what this rank printed."""
    text = traceback.format_exc()
    with contextlib.suppress(OSError):
        sys.stderr.flush()
        with open(log_path, errors="replace") as f:
            printed = f.read()[-2000:]
        text += ("\nwhat this rank printed:\n" + printed) if printed.strip() else ""
    return text


def run_group(worker: Worker, world: int, arg: Any = None, *, timeout_s: float = 60.0, backend: str | None = None,
              start_method: str | None = None) -> list[Any]:
    """Run worker(rank, world, arg) in `world` new processes joined in one torch.distributed group; results by rank.

    The ranks meet at a free port on 127.0.0.1. If a rank raises, dies, or the group is not done within
    `timeout_s`, every rank is killed and GroupFailed says which and why. No process outlives the call.
    """
    if world < 1:
        raise ValueError(f"world must be at least 1, got {world}")
    backend = backend or default_backend(world)
    method = start_method or default_start_method(backend)
    ctx: Any = multiprocessing.get_context(method)
    procs: list[Any] = []
    readers: list[multiprocessing.connection.Connection] = []
    with tempfile.TemporaryDirectory(prefix="lecturelib-group-") as logs:
        try:
            port = free_port()
            for rank in range(world):
                reader, writer = ctx.Pipe(duplex=False)
                proc = ctx.Process(target=_child, daemon=True, name=f"rank-{rank}",
                                   args=(worker, rank, world, arg, port, backend, timeout_s, writer,
                                         os.path.join(logs, f"rank{rank}.log")))
                with warnings.catch_warnings():  # Python 3.12+: "this process is multi-threaded, fork() may deadlock"
                    warnings.simplefilter("ignore", DeprecationWarning)  # the child only runs this module's code
                    proc.start()
                writer.close()
                procs.append(proc)
                readers.append(reader)
            return _collect(procs, readers, time.monotonic() + timeout_s)
        finally:
            for proc in procs:
                if proc.is_alive():
                    proc.kill()
            for proc in procs:
                proc.join(timeout=10)
            for reader in readers:
                reader.close()


def _collect(procs: list[Any], readers: list[multiprocessing.connection.Connection], deadline: float) -> list[Any]:
    results: dict[int, Any] = {}
    failures: list[str] = []  # in the order they arrived: the first is usually the cause, the rest its echoes
    failed: set[int] = set()
    grace = math.inf  # once a rank has failed, the others get GRACE_S to report theirs
    while len(results) + len(failures) < len(procs):
        pending = {readers[r]: r for r in range(len(procs)) if r not in results and r not in failed}
        timeout = max(0.0, min(deadline, grace) - time.monotonic())
        ready = multiprocessing.connection.wait(list(pending), timeout=timeout) if pending else []
        if not ready:
            if failures:
                break
            late = sorted(pending.values())
            raise GroupFailed(f"ranks {late} did not finish within the timeout; every rank was stopped")
        for conn in ready:
            assert isinstance(conn, multiprocessing.connection.Connection)
            rank = pending[conn]
            try:
                status, payload = conn.recv()
            except EOFError:
                procs[rank].join(timeout=1)
                status, payload = "died", f"exit code {procs[rank].exitcode}, before it reported"
            if status == "ok":
                results[rank] = payload
                continue
            failures.append(f"rank {rank} {'failed' if status == 'error' else 'died'}:\n{payload}")
            failed.add(rank)
            grace = min(grace, time.monotonic() + GRACE_S)
    if failures:
        raise GroupFailed("\n".join(failures))
    return [results[r] for r in range(len(procs))]


GRACE_S = 1.0


# ---------------------------------------------------------------------------------------------
# Workers: all-reduce times, and a DDP training step


def _sync(device: Any) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)  # kernels run asynchronously: a clock needs an empty queue (sync point)


def _rank_device(rank: int) -> Any:
    import torch
    import torch.distributed as dist

    return torch.device("cuda", rank) if dist.get_backend() == "nccl" else torch.device("cpu")


@dataclass(frozen=True)
class SweepSpec:
    """What allreduce_worker times: each size `repeats` times after `warmup` calls."""

    sizes_bytes: tuple[int, ...]  # buffer sizes (multiples of 4: fp32 elements)
    repeats: int = 10
    warmup: int = 2


def allreduce_worker(rank: int, world: int, spec: SweepSpec) -> list[list[float]]:
    """Seconds of each timed dist.all_reduce of an fp32 buffer of each size, as this rank saw them."""
    import torch
    import torch.distributed as dist

    device = _rank_device(rank)
    out = []
    for n_bytes in spec.sizes_bytes:
        x = torch.zeros(max(1, n_bytes // 4), dtype=torch.float32, device=device)  # zeros stay zeros: no overflow
        for _ in range(spec.warmup):
            dist.all_reduce(x)
        times = []
        for _ in range(spec.repeats):
            dist.barrier()  # start together: a rank that starts late would be timed waiting for it
            _sync(device)
            start = time.perf_counter()
            dist.all_reduce(x)
            _sync(device)
            times.append(time.perf_counter() - start)
        out.append(times)
    return out


@dataclass(frozen=True)
class AllreduceSweep:
    """Measured all-reduce times of one world size: per size, the slowest rank of each call."""

    world: int
    backend: str
    sizes_bytes: tuple[int, ...]
    seconds: tuple[tuple[float, ...], ...]  # per size, per call: the slowest rank's time (the collective's end)

    @property
    def best_s(self) -> list[float]:
        """Per size, the fastest call: the one least disturbed by other processes on the machine."""
        return [min(s) for s in self.seconds]

    @property
    def median_s(self) -> list[float]:
        """Per size, the median call."""
        return [statistics.median(s) for s in self.seconds]


def measure_allreduce(sizes_bytes: Sequence[int], world: int, *, repeats: int = 10, warmup: int = 2,
                      timeout_s: float = 60.0, backend: str | None = None) -> AllreduceSweep:
    """Time dist.all_reduce of fp32 buffers of each size among `world` new processes."""
    backend = backend or default_backend(world)
    spec = SweepSpec(tuple(int(n) for n in sizes_bytes), repeats, warmup)
    per_rank = run_group(allreduce_worker, world, spec, timeout_s=timeout_s, backend=backend)
    seconds = tuple(tuple(max(rank_times[i][k] for rank_times in per_rank) for k in range(repeats))
                    for i in range(len(spec.sizes_bytes)))
    return AllreduceSweep(world, backend, spec.sizes_bytes, seconds)


@dataclass(frozen=True)
class DDPSpec:
    """The DDP measurement: an MLP of `depth` square layers of `width`, `batch` rows per rank and micro-batch."""

    width: int = 512
    depth: int = 4
    batch: int = 64
    rounds: int = 5  # interleaved rounds; each times every variant `calls` times
    calls: int = 3
    accum: int = 4  # micro-batches per optimizer step in the accumulation variant
    seed: int = 0
    bucket_cap_mb: float | None = None  # None: DDP's default (25 MiB, the first bucket 1 MiB)


def ddp_model(spec: DDPSpec) -> Any:
    """The MLP that ddp_worker trains: `depth` × (Linear(width, width), ReLU), seeded by spec.seed as the ranks seed it."""
    import torch

    torch.manual_seed(spec.seed)
    return _mlp(spec)


def _mlp(spec: DDPSpec) -> Any:
    import torch

    layers: list[torch.nn.Module] = []
    for _ in range(spec.depth):
        layers += [torch.nn.Linear(spec.width, spec.width), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers)


GRAD_SAMPLE = 1 << 22  # gradient elements a rank sends back (all of a CPU-sized model's; 16 MB of a GPU-sized one's)


def ddp_worker(rank: int, world: int, spec: DDPSpec) -> dict[str, Any]:
    """Time training steps of an MLP, with DDP's all-reduce and without (no_sync), and log DDP's buckets."""
    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP

    device = _rank_device(rank)
    torch.manual_seed(spec.seed)  # every rank builds the same weights (DDP would broadcast rank 0's anyway)
    model = _mlp(spec).to(device)
    g = torch.Generator().manual_seed(spec.seed + 1 + rank)  # each rank its own data: that is data parallelism
    x = torch.randn(spec.accum, spec.batch, spec.width, generator=g).to(device)  # (A, B, width) micro-batches
    y = torch.randn(spec.accum, spec.batch, spec.width, generator=g).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    buckets: list[int] = []  # elements of each bucket DDP all-reduced, in order

    def logged_allreduce(state, bucket):  # type: ignore[no-untyped-def]  # (DDP rejects other annotations)
        buckets.append(bucket.buffer().numel())
        return allreduce_hook(state, bucket)  # DDP's own: divide by the world size, all-reduce (sum)

    if world > 1:
        net: Any = DDP(model, device_ids=[rank] if device.type == "cuda" else None,
                       bucket_cap_mb=spec.bucket_cap_mb)
        net.register_comm_hook(None, logged_allreduce)
        no_sync: Callable[[], Any] = net.no_sync
    else:
        net, no_sync = model, contextlib.nullcontext
    params = list(net.parameters())

    def zero_grad() -> None:
        for p in params:
            p.grad = None

    @torch.no_grad()
    def sgd() -> None:  # plain SGD by hand: torch.optim's first use imports torch._dynamo (seconds, in every rank)
        for p in params:
            p.add_(p.grad, alpha=-1e-3)

    def backward(i: int) -> None:
        torch.nn.functional.mse_loss(net(x[i]), y[i]).backward()

    def step_synced() -> None:  # one micro-batch, gradients all-reduced during backward
        zero_grad()
        backward(0)
        sgd()

    def step_local() -> None:  # the same work with no communication at all
        zero_grad()
        with no_sync():
            backward(0)
        sgd()

    def step_accum() -> None:  # A micro-batches: A − 1 under no_sync, the last one synced
        zero_grad()
        with no_sync():
            for i in range(spec.accum - 1):
                backward(i)
        backward(spec.accum - 1)
        sgd()

    def step_accum_local() -> None:
        zero_grad()
        with no_sync():
            for i in range(spec.accum):
                backward(i)
        sgd()

    variants: dict[str, Callable[[], object]] = {"synced": step_synced, "local": step_local, "accum": step_accum, "accum_local": step_accum_local}
    if world == 1:
        variants = {"local": step_local, "accum_local": step_accum_local}
    else:  # rank 0's step while the other ranks wait: against `local`, what running side by side costs each rank
        variants["alone"] = step_local
    for fn in variants.values():  # warm-up: allocation, and DDP rebuilds its buckets after its first step
        fn()
    buckets_log: dict[str, list[int]] = {}
    for name, fn in variants.items():  # the buckets of one call of each variant, once DDP's buckets are final
        buckets.clear()
        fn()
        buckets_log[name] = list(buckets)
    if world > 1:  # the same all-reduces DDP made, bare: one buffer per bucket, no backward pass around them
        buffers = [torch.zeros(n, device=device) for n in buckets_log["synced"]]
        variants["allreduce"] = lambda: [dist.all_reduce(b) for b in buffers]
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    order = list(variants)
    for r in range(spec.rounds):  # interleaved: a change of load hits every variant alike
        for name in order if r % 2 == 0 else reversed(order):
            for _ in range(spec.calls):
                if world > 1:
                    dist.barrier()  # the ranks start each step together
                if name == "alone" and rank != 0:
                    continue  # idle at the next barrier while rank 0 computes
                _sync(device)
                start = time.perf_counter()
                variants[name]()
                _sync(device)
                seconds[name].append(time.perf_counter() - start)

    # DDP's gradient is the mean of the ranks' own gradients: the parent compares them
    zero_grad()
    with no_sync():
        backward(0)
    local = _flat_grad(params)[:GRAD_SAMPLE]
    zero_grad()
    backward(0)
    synced = _flat_grad(params)[:GRAD_SAMPLE]
    return {"seconds": seconds, "buckets": buckets_log, "n_params": n_params, "backend": dist.get_backend(),
            "local_grad": local.cpu().numpy(), "synced_grad": synced.cpu().numpy()}


def _flat_grad(params: list[Any]) -> Any:
    import torch

    return torch.cat([p.grad.detach().flatten() for p in params])


@dataclass(frozen=True)
class DDPMeasurement:
    """Seconds per call of each step variant (all ranks' calls pooled) and what DDP all-reduced."""

    world: int
    backend: str
    n_params: int
    seconds: dict[str, list[float]]  # variant -> seconds of every timed call of every rank ("alone": rank 0's only)
    buckets: dict[str, list[int]]  # variant -> elements of each bucket all-reduced in one call (rank 0)
    local_grads: list[Any] = field(repr=False)  # per rank: its own flattened gradient of micro-batch 0 (NumPy; the
    synced_grads: list[Any] = field(repr=False)  # first GRAD_SAMPLE elements) and the one DDP left after a synced backward
    per_rank: list[dict[str, list[float]]] = field(default_factory=list, repr=False)  # rank -> variant -> its calls
    calls_per_round: int = 1  # calls of each variant in a round, one after the other (DDPSpec.calls)

    def median_s(self, variant: str) -> float:
        """The median call of a variant."""
        return statistics.median(self.seconds[variant])

    def round_medians(self, variant: str, rank: int = 0) -> list[float]:
        """One rank's median call of a variant in each interleaved round, in round order."""
        calls, k = self.per_rank[rank][variant], self.calls_per_round
        return [statistics.median(calls[i:i + k]) for i in range(0, len(calls), k)]

    def ratio(self, a: str, b: str, rank: int = 0) -> Any:
        """time(a) / time(b) round by round for one rank (a profiler.Ratio): both ran in the same rounds."""
        from lecturelib.profiler import Ratio

        per_round = [x / y for x, y in zip(self.round_medians(a, rank), self.round_medians(b, rank))]
        return Ratio(statistics.median(per_round), min(per_round), max(per_round))


def measure_ddp(spec: DDPSpec, world: int, *, timeout_s: float = 60.0, backend: str | None = None) -> DDPMeasurement:
    """Time DDP training steps of `spec`'s MLP among `world` new processes (world 1: the plain model)."""
    backend = backend or default_backend(world)
    if default_start_method(backend) == "fork":
        import torch._dynamo  # noqa: F401 - DDP's constructor imports it: once here, not again in every forked rank
    results = run_group(ddp_worker, world, spec, timeout_s=timeout_s, backend=backend)
    seconds = {name: [s for r in results for s in r["seconds"][name]] for name in results[0]["seconds"]}
    return DDPMeasurement(world, results[0]["backend"], results[0]["n_params"], seconds, results[0]["buckets"],
                          [r["local_grad"] for r in results], [r["synced_grad"] for r in results],
                          [r["seconds"] for r in results], spec.calls)
