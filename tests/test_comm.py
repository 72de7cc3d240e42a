"""Tests of lecturelib.comm: the α–β model, links, the cost of a run, and process groups that leave nothing behind."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from lecturelib import comm, hardware
from lecturelib.course.isolation import sandbox

ROOT = Path(__file__).resolve().parents[1]
MIB = 2**20
NO_SANDBOX = sandbox.unavailable()


# ---------------------------------------------------------------------------------------------
# the α–β model


def test_allreduce_seconds_is_latency_plus_bandwidth_terms() -> None:
    # 2 · 7 · 5 µs + 2 · 7/8 · 1e9 B / 1e11 B/s = 7e-5 + 0.0175
    assert comm.allreduce_seconds(10**9, 8, 5e-6, 100e9) == pytest.approx(0.01757, rel=1e-12)
    assert comm.allreduce_seconds(10**9, 1, 5e-6, 100e9) == 0.0  # one rank: nothing to send
    assert comm.allreduce_seconds(0, 4, 1e-6, 1e9) == pytest.approx(6e-6)  # an empty buffer still pays 2·3 latencies


def test_ring_allreduce_bytes_tends_to_twice_the_buffer() -> None:
    assert comm.ring_allreduce_bytes(1000, 2) == 1000  # 2 · 1/2
    assert comm.ring_allreduce_bytes(1000, 4) == 1500  # 2 · 3/4
    assert comm.ring_allreduce_bytes(1000, 1) == 0


@given(st.integers(1, 2**40), st.integers(2, 4096))
def test_ring_allreduce_bytes_is_below_twice_the_buffer(n_bytes: int, world: int) -> None:
    assert n_bytes <= comm.ring_allreduce_bytes(n_bytes, world) < 2 * n_bytes


@given(st.integers(0, 2**34), st.integers(2, 1024), st.floats(0, 1e-4), st.floats(1e6, 1e12))
def test_allreduce_seconds_grows_with_the_buffer_and_the_latency(n: int, world: int, alpha: float, beta: float) -> None:
    t = comm.allreduce_seconds(n, world, alpha, beta)
    assert t >= 2 * (world - 1) * alpha
    assert comm.allreduce_seconds(n + 1024, world, alpha, beta) > t
    assert comm.allreduce_seconds(n, world, alpha * 2 + 1e-6, beta) > t


def test_allreduce_seconds_rejects_nonsense() -> None:
    for args in ((-1, 2, 0.0, 1.0), (1, 0, 0.0, 1.0), (1, 2, -1.0, 1.0), (1, 2, 0.0, 0.0)):
        with pytest.raises(ValueError):
            comm.allreduce_seconds(*args)


def test_tree_beats_the_ring_only_for_small_messages() -> None:
    nvlink = comm.LINKS["nvlink4"]
    small, large = 4 * 2**10, 1 << 30
    for n_bytes, tree_wins in ((small, True), (large, False)):
        tree = comm.tree_allreduce_seconds(n_bytes, 64, nvlink.alpha_s, nvlink.bytes_per_s)
        ring = comm.allreduce_seconds(n_bytes, 64, nvlink.alpha_s, nvlink.bytes_per_s)
        assert (tree < ring) is tree_wins
    # 8 ranks: 3 hops each way, the whole buffer each hop: 6 · (α + n/β)
    assert comm.tree_allreduce_seconds(100, 8, 1.0, 100.0) == 6 * (1.0 + 1.0)
    assert comm.tree_allreduce_seconds(100, 1, 1.0, 100.0) == 0.0


def test_pipelined_tree_drops_the_log_factor_from_the_bytes() -> None:
    # no latency: as many chunks as you like, the bytes alone: 2 · 1e9 B / 1e9 B/s = 2 s, whatever N
    assert comm.pipelined_tree_allreduce_seconds(10**9, 1024, 0.0, 1e9) == 2.0
    # 8 ranks, α = 1 s, 2n/B = 5 s: fill 2 · 3 - 1 = 5 stages, k = √(5 · 5 / 1) = 5 chunks: (5 + 5) · (1 + 5/5) = 20 s
    assert comm.pipelined_tree_allreduce_seconds(5, 8, 1.0, 2.0) == pytest.approx(20.0, rel=1e-12)
    # a tiny buffer: one chunk, 2h = 6 stages of α, unpipelined: 6 · (1 + 2e-9)
    assert comm.pipelined_tree_allreduce_seconds(1, 8, 1.0, 1e9) == pytest.approx(6.0, rel=1e-8)
    assert comm.pipelined_tree_allreduce_seconds(100, 1, 1.0, 1.0) == 0.0
    nvlink = comm.LINKS["nvlink4"]
    for world in (8, 64, 1024):  # large buffers: within 2× of the ring's bytes (no ⌈log₂N⌉ factor), unlike the plain tree
        args = (1 << 34, world, nvlink.alpha_s, nvlink.bytes_per_s)
        assert comm.pipelined_tree_allreduce_seconds(*args) < 2 * comm.allreduce_seconds(*args)
        assert comm.tree_allreduce_seconds(*args) > 2 * comm.allreduce_seconds(*args)


def test_zero_bytes_per_step_is_two_psi_then_three_for_stage_3() -> None:
    # Ψ = 3/4 · 1000 · 2 bytes = 1500
    assert [comm.zero_bytes_per_step(1000, 2, 4, s) for s in (0, 1, 2, 3)] == [3000, 3000, 3000, 4500]
    assert comm.zero_bytes_per_step(1000, 2, 1, 3) == 0
    with pytest.raises(ValueError):
        comm.zero_bytes_per_step(1000, 2, 4, 4)


def test_train_days_is_six_n_d_over_the_cluster_rate() -> None:
    # 6 · 1e9 · 1e12 = 6e21 FLOPs at 1e15 FLOP/s: 6e6 s = 69.44 days
    assert comm.train_days(1e9, 1e12, 1, 1e15, 1.0) == pytest.approx(6e6 / 86_400)
    assert comm.train_days(1e9, 1e12, 100, 1e15, 0.5) == pytest.approx(6e6 / 86_400 / 50)
    with pytest.raises(ValueError):
        comm.train_days(1e9, 1e12, 0, 1e15, 0.5)
    with pytest.raises(ValueError):
        comm.train_days(1e9, 1e12, 8, 1e15, 1.5)


def test_run_cost_reproduces_patterson_table_4_for_gpt3() -> None:
    # Patterson et al. 2021, Table 4: 10,000 V100, 14.8 days, 330 W each, PUE 1.10 → 1,287 MWh
    cost = comm.run_cost(14.8, 10_000, 330.0, 1.10, 1.5)
    assert cost.gpu_hours == pytest.approx(14.8 * 24 * 10_000)
    assert cost.energy_kwh == pytest.approx(1.287e6, rel=0.01)
    assert cost.usd == pytest.approx(1.5 * cost.gpu_hours)
    with pytest.raises(ValueError):
        comm.run_cost(1.0, 1, 700.0, 0.9, 1.0)  # a PUE below 1 is impossible


def test_plan_run_agrees_with_its_parts() -> None:
    run = comm.plan_run(7e9, 2e12, 64, "100gbe", 0.4)
    assert run.days == comm.train_days(7e9, 2e12, 64, hardware.peak_flop_per_s("h100-sxm", "bf16"), 0.4)
    link = comm.LINKS["100gbe"]
    assert run.comm_s == comm.allreduce_seconds(14 * 10**9, 64, link.alpha_s, link.bytes_per_s)
    assert run.steps * run.compute_s / 86_400 == pytest.approx(run.days)
    assert run.days <= run.days_overlap <= run.days_no_overlap
    assert run.cost.days == run.days_no_overlap
    with pytest.raises(ValueError):
        comm.plan_run(7e9, 2e12, 64, "carrier-pigeon", 0.4)


def test_every_link_and_cited_figure_has_a_source() -> None:
    for link in comm.LINKS.values():
        assert link.source.startswith("https://") and link.note and link.bytes_per_s > 0 and link.alpha_s > 0
    assert comm.LINKS["pcie5-x16"].bytes_per_s == pytest.approx(32e9 * 16 * 128 / 130 / 8)  # 63.0 GB/s
    assert comm.LINKS["nvlink4"].bytes_per_s == 900e9 / 2  # the datasheet's 900 GB/s counts both directions
    for cited in (comm.H100_USD_PER_GPU_HOUR, comm.H100_BOARD_WATTS, comm.PUE_HYPERSCALE, comm.PUE_INDUSTRY):
        assert cited.source.startswith("https://") and cited.date and cited.value > 0


def test_fit_alpha_beta_recovers_the_model_that_made_the_times() -> None:
    sizes = [4 * 4**k for k in range(12)]
    for world in (2, 4):
        seconds = [comm.allreduce_seconds(n, world, 50e-6, 2e9) for n in sizes]
        fit = comm.fit_alpha_beta(sizes, seconds, world)
        assert fit.alpha_s == pytest.approx(50e-6, rel=1e-6) and fit.bytes_per_s == pytest.approx(2e9, rel=1e-6)
        assert fit.max_relative_error < 1e-9
    with pytest.raises(ValueError):
        comm.fit_alpha_beta(sizes, [1.0] * len(sizes), 1)


# ---------------------------------------------------------------------------------------------
# process groups


def _children() -> set[int]:
    """Live (not zombie) child processes of this one, from /proc."""
    me, out = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[1]) == me and fields[0] != "Z":
                out.add(int(entry))
    return out


def _rank_and_sum(rank: int, world: int, arg: int) -> tuple[int, float]:
    import torch.distributed as dist

    x = torch.tensor([float(rank + arg)])
    dist.all_reduce(x)
    return rank, float(x)


def _raise_on_rank_1(rank: int, world: int, arg: None) -> None:
    if rank == 1:
        raise ValueError("rank 1 gives up")
    import torch.distributed as dist

    dist.barrier()  # rank 0 waits here for a rank that is gone: it must be killed, not waited for


def _hang(rank: int, world: int, arg: None) -> None:
    time.sleep(600)


needs_linux = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="counts children through /proc")


@needs_linux
def test_run_group_returns_each_ranks_result_and_leaves_no_process() -> None:
    before = _children()
    results = comm.run_group(_rank_and_sum, 3, 10, timeout_s=60, backend="gloo")
    assert results == [(0, 33.0), (1, 33.0), (2, 33.0)]  # (10 + 11 + 12) on every rank
    assert _children() == before


@needs_linux
def test_run_group_fails_fast_when_a_rank_raises_and_kills_the_others() -> None:
    before = _children()
    start = time.monotonic()
    with pytest.raises(comm.GroupFailed, match="rank 1 failed(.|\n)*rank 1 gives up"):
        comm.run_group(_raise_on_rank_1, 2, None, timeout_s=60, backend="gloo")
    assert time.monotonic() - start < 30  # not the 60 s timeout: the parent saw rank 1 fail and stopped rank 0
    assert _children() == before


@needs_linux
def test_run_group_kills_a_hung_group_at_its_timeout() -> None:
    before = _children()
    start = time.monotonic()
    with pytest.raises(comm.GroupFailed, match="did not finish within the timeout"):
        comm.run_group(_hang, 2, None, timeout_s=3, backend="gloo")
    assert time.monotonic() - start < 20
    assert _children() == before


def test_loopback_interface_and_free_port() -> None:
    assert comm.loopback_interface().startswith("lo")
    assert 0 < comm.free_port() < 65536
    assert comm.default_start_method("gloo") in ("fork", "spawn")
    assert comm.default_start_method("nccl") == "spawn"  # CUDA cannot be used in a forked child


def test_measure_allreduce_times_every_size_and_call() -> None:
    sweep = comm.measure_allreduce([4, 4096, MIB], 2, repeats=3, warmup=1, timeout_s=60, backend="gloo")
    assert (sweep.world, sweep.backend, sweep.sizes_bytes) == (2, "gloo", (4, 4096, MIB))
    assert [len(s) for s in sweep.seconds] == [3, 3, 3]
    assert all(t > 0 for s in sweep.seconds for t in s)
    assert all(b <= m for b, m in zip(sweep.best_s, sweep.median_s))


def test_measure_ddp_logs_buckets_and_averages_gradients() -> None:
    spec = comm.DDPSpec(width=64, depth=2, batch=4, rounds=1, calls=1, accum=2, bucket_cap_mb=None)
    m = comm.measure_ddp(spec, 2, timeout_s=120, backend="gloo")
    assert m.n_params == 2 * (64 * 64 + 64)
    assert sum(m.buckets["synced"]) == m.n_params and m.buckets["accum"] == m.buckets["synced"]
    assert m.buckets["local"] == [] and m.buckets["accum_local"] == []  # no_sync: no all-reduce at all
    assert set(m.seconds) == {"synced", "local", "accum", "accum_local", "allreduce", "alone"}
    assert all(len(v) == (1 if k == "alone" else 2) for k, v in m.seconds.items())  # rounds · calls, each rank's
    assert m.per_rank[1]["alone"] == [] and m.round_medians("alone") == m.per_rank[0]["alone"]  # rank 0's alone
    assert m.ratio("local", "alone").median == m.per_rank[0]["local"][0] / m.per_rank[0]["alone"][0]
    assert sum(p.numel() for p in comm.ddp_model(spec).parameters()) == m.n_params
    mean = (m.local_grads[0] + m.local_grads[1]) / 2
    assert np.array_equal(m.synced_grads[0], m.synced_grads[1])
    np.testing.assert_allclose(m.synced_grads[0], mean, rtol=1e-6, atol=1e-9)
    single = comm.measure_ddp(spec, 1, timeout_s=120, backend="gloo")
    assert set(single.seconds) == {"local", "accum_local"} and single.buckets == {"local": [], "accum_local": []}


@pytest.mark.skipif(NO_SANDBOX is not None and not os.environ.get("CI"), reason=f"no sandbox here: {NO_SANDBOX}")
def test_process_groups_run_inside_the_graders_sandbox(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    # what notebook 11 needs of the sandbox: fork, AF_INET sockets on its loopback-only network, gloo, DDP
    path = sandbox.write_config(tmp_path, limits=sandbox.Limits(), env={"LECTURELIB_QUICK": "1"}, hidden=[ROOT])
    config = sandbox.Config.read(str(path))
    code = """
import os
from lecturelib import comm
sweep = comm.measure_allreduce([4, 2**20], 2, repeats=2, warmup=1, timeout_s=60)
m = comm.measure_ddp(comm.DDPSpec(width=32, depth=1, batch=2, rounds=1, calls=1, accum=2), 2, timeout_s=60)
print("ok", sweep.backend, len(sweep.best_s), sum(m.buckets["synced"]) == m.n_params)
print("tasks", sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
"""
    capfd.readouterr()
    status = sandbox.supervise(config, [config.python, "-c", code], writable=[], files={})
    out = capfd.readouterr().err.strip().splitlines()  # the sandbox's output goes to the supervisor's stderr
    assert status == 0, out
    assert out[-2] == "ok gloo 2 True"
    assert out[-1] == "tasks [1, 2]"  # bwrap's init and this process: every rank is gone


def test_group_worker_results_hold_no_tensors() -> None:
    # tensors sent through a pipe would go through torch's shared-memory reductions (/dev/shm, fd passing)
    spec = comm.DDPSpec(width=16, depth=1, batch=2, rounds=1, calls=1, accum=2)
    m = comm.measure_ddp(spec, 1, timeout_s=120, backend="gloo")
    assert all(isinstance(g, np.ndarray) for g in m.local_grads + m.synced_grads)
    assert not math.isnan(m.median_s("local"))
