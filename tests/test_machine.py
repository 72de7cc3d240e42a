"""lecturelib.machine: plateaus and knees of a sweep, tiers of a working set, roofs that are measured, the noise floor."""

import pytest

from lecturelib import machine
from lecturelib.hardware import BandwidthPoint
from lecturelib.machine import ComputeRoof, Noise, Tier, find_tiers
from lecturelib.profiler import Ratio, effect, until

KiB, MiB = 2**10, 2**20
CACHES = [("L1", 48 * KiB), ("L2", 2 * MiB), ("L3", 105 * MiB)]  # what sysfs says on the course's VM


def sweep(rates: dict[int, float]) -> list[BandwidthPoint]:
    """Points of a read sweep with the given best rate (GB/s) per working set: one call of 1 GB each."""
    return [BandwidthPoint("read", size, 10**9, 1 / gb_s, 1 / gb_s) for size, gb_s in rates.items()]


# a clean three-level CPU: L1 120 GB/s to 32 KiB, L2 60 to 1 MiB, L3 25 to 16 MiB, DRAM 10 beyond
CLEAN = {1 * KiB: 118, 4 * KiB: 120, 16 * KiB: 119, 32 * KiB: 117, 128 * KiB: 61, 512 * KiB: 60, 1 * MiB: 58,
         4 * MiB: 25, 16 * MiB: 24, 64 * MiB: 10, 256 * MiB: 10.2}


def test_find_tiers_cuts_at_the_knees_and_names_by_sysfs() -> None:
    tiers = find_tiers(sweep(CLEAN), CACHES)
    assert [(t.name, t.lo_bytes, t.hi_bytes, t.sizes) for t in tiers] == [
        ("L1", 1 * KiB, 32 * KiB, 4), ("L2", 128 * KiB, 1 * MiB, 3), ("L3", 4 * MiB, 16 * MiB, 2),
        ("DRAM", 64 * MiB, 256 * MiB, 2)]
    assert [t.bytes_per_s for t in tiers] == pytest.approx([120e9, 61e9, 25e9, 10.2e9])  # the best on each plateau
    assert [t.is_memory for t in tiers] == [False, False, False, True]


def test_find_tiers_a_size_between_two_plateaus_joins_the_nearer() -> None:
    rates = dict(CLEAN)
    rates[2 * MiB] = 45  # straddles L2 and L3: log(45) is nearer log(60) than log(25)
    tiers = find_tiers(sweep(rates), CACHES)
    assert [(t.name, t.hi_bytes) for t in tiers][:2] == [("L1", 32 * KiB), ("L2", 2 * MiB)]


def test_find_tiers_ignores_sysfs_borders_and_names_a_split_cache() -> None:
    # the course's VM: sysfs says 105 MiB of L3, but the sweep reaches memory's rate from 32 MiB, and L1 and L2
    # stream alike (one plateau over both)
    rates = {1 * KiB: 110, 64 * KiB: 95, 1 * MiB: 85, 4 * MiB: 20, 16 * MiB: 19, 32 * MiB: 13, 64 * MiB: 12.5,
             128 * MiB: 10.5, 256 * MiB: 10.1}
    tiers = find_tiers(sweep(rates), CACHES)
    assert [(t.name, t.lo_bytes, t.hi_bytes) for t in tiers] == [
        ("L1–L2", 1 * KiB, 1 * MiB), ("L3", 4 * MiB, 16 * MiB), ("DRAM", 32 * MiB, 256 * MiB)]
    rates[32 * MiB], rates[64 * MiB] = 13.5, 13.4  # a second plateau inside L3's size, before memory
    rates[128 * MiB], rates[256 * MiB] = 7.0, 7.1
    names = [t.name for t in find_tiers(sweep(rates), CACHES)]
    assert names == ["L1–L2", "L3", "L3–DRAM", "DRAM"]


def test_find_tiers_without_sysfs_numbers_the_caches_and_one_plateau_is_memory() -> None:
    assert [t.name for t in find_tiers(sweep(CLEAN))] == ["cache 1", "cache 2", "cache 3", "DRAM"]
    flat = find_tiers(sweep({1 * KiB: 10, 1 * MiB: 9.8, 256 * MiB: 9.9}), CACHES, memory_name="HBM")
    assert [(t.name, t.is_memory, t.sizes) for t in flat] == [("HBM", True, 3)]
    with pytest.raises(ValueError):
        find_tiers([])


def test_tier_of_puts_a_working_set_on_the_plateau_that_brackets_it() -> None:
    m = machine.Machine("cpu", "test", 1, True, tuple(sweep(CLEAN)), tuple(find_tiers(sweep(CLEAN), CACHES)),
                        Noise(0.95, 1.05, 5))
    # boundaries halfway (in log size) between the plateaus' measured sizes: L1 ends at √(32 KiB · 128 KiB) = 64 KiB
    assert [m.tier_of(b).name for b in (1, 32 * KiB, 64 * KiB, 64 * KiB + 1, 2 * MiB, 2 * MiB + 1, 2**40)] == [
        "L1", "L1", "L1", "L2", "L2", "L3", "DRAM"]
    assert m.memory.name == "DRAM" and m.bytes_per_s(3 * MiB) == 25e9
    with pytest.raises(ValueError):
        m.tier_of(0)


def test_roofline_uses_the_measured_roof_and_the_tier_of_the_working_set() -> None:
    m = machine.Machine("cpu", "test", 1, True, tuple(sweep(CLEAN)), tuple(find_tiers(sweep(CLEAN), CACHES)),
                        Noise(0.95, 1.05, 5))
    m._compute["fp32"] = ComputeRoof("fp32", 100e9, 256, 90e9, 128e9, "a table")
    # an fp32 add of 3 arrays of 1 Mi elements: 1 Mi FLOPs over 12 MiB, working set 12 MiB (L3: 25 GB/s)
    r = m.roofline(2**20, 12 * MiB, 12 * MiB)
    assert r.tier.name == "L3" and r.bound == "memory"
    assert r.roofline.ridge_flop_per_byte == pytest.approx(100e9 / 25e9)  # 4 FLOP/byte
    assert r.time_s == pytest.approx(12 * MiB / 25e9)
    # the same add in L1 against L1's rate
    assert m.roofline(2**10, 12 * KiB, 12 * KiB).roofline.peak_bytes_per_s == 120e9
    assert m.ridge_flop_per_byte("fp32") == pytest.approx(100e9 / 10.2e9)  # memory's ridge by default


def test_a_nominal_figure_the_measurement_beats_is_not_a_bound() -> None:
    bound = ComputeRoof("fp32", 100e9, 512, 95e9, 128e9, "AVX-512 table")
    beaten = ComputeRoof("fp32", 102e9, 512, 95e9, 83e9, "AVX-512 table")
    unknown = ComputeRoof("bf16", 500e9, 512, 400e9, None, "no bf16 figure")
    assert (bound.nominal_is_bound, beaten.nominal_is_bound, unknown.nominal_is_bound) == (True, False, False)
    assert "78% of it" in bound.describe()  # 100 / 128 = 0.78
    assert "NOT a bound" in beaten.describe() and "1.23x" in beaten.describe()  # 102 / 83 = 1.23
    assert "no nominal figure" in unknown.describe()


def test_noise_floor_and_shown() -> None:
    noise = Noise(0.92, 1.05, 9)
    assert noise.floor == pytest.approx(0.08)  # 1 - 0.92 is the larger side
    m = machine.Machine("cpu", "test", 1, True, (), (Tier("DRAM", 1, 2, 1e9, 1, True),), noise)
    assert (m.shown(1.07), m.shown(1.09), m.shown(0.93), m.shown(0.91)) == (False, True, False, True)


def test_effect_states_only_what_every_round_shows() -> None:
    assert effect(Ratio(1.8, 1.6, 2.0), "slower", "faster") == "slower"
    assert effect(Ratio(0.5, 0.45, 0.6), "slower", "faster") == "faster"
    assert effect(Ratio(1.1, 0.9, 1.3), "slower", "faster") == "not shown on this run (rounds 0.90-1.30x straddle 1x)"
    assert effect(Ratio(2.5, 2.2, 2.9), "more than twice", "less", at=2.0) == "more than twice"


def test_until_repeats_a_measurement_until_its_ordering_holds() -> None:
    results = iter([3, 1, 5, 7])
    assert until(lambda: next(results), lambda x: x > 4, tries=5) == (5, True)
    results = iter([3, 1, 2])
    assert until(lambda: next(results), lambda x: x > 4, tries=3) == (2, False)  # never held: the caller says so
    with pytest.raises(ValueError):
        until(lambda: 1, bool, tries=0)


def test_measure_this_machine_once_per_kernel() -> None:
    m = machine.measure(quick=True)
    assert machine.measure(quick=True) is m  # cached: the second call is free
    assert m.threads == (1 if m.device == "cpu" else m.threads)
    sizes = [p.working_set_bytes for p in m.sweep]
    assert sizes == machine.sweep_sizes(m.device, True) and m.tiers[-1].is_memory
    # the tiers cover the sweep in order, each size on exactly one plateau
    assert sum(t.sizes for t in m.tiers) == len(sizes)
    assert all(a.hi_bytes < b.lo_bytes for a, b in zip(m.tiers, m.tiers[1:]))
    roof = m.compute("fp32")
    assert roof.flop_per_s > 0 and roof.flop_per_s >= roof.median_flop_per_s and roof.n >= 128
    assert m.compute("fp32") is roof
    assert m.noise.low <= 1 <= m.noise.high or m.noise.floor >= 0
    assert m.describe().count("\n") == len(m.tiers) + 2  # title, tiers, one compute roof, noise


def test_tiers_from_plateaus_names_a_given_cut_as_find_tiers_names_its_own() -> None:
    points = sweep(CLEAN)
    groups = [points[:4], points[4:7], points[7:9], points[9:]]  # the knees of CLEAN, cut by hand
    assert machine.tiers_from_plateaus(groups, CACHES) == find_tiers(points, CACHES)
    # a lone middle size is left where it was given (merge_lone_plateaus moves it), and named after its cache
    lone = machine.tiers_from_plateaus([points[:4], points[4:5], points[5:9], points[9:]], CACHES)
    assert [(t.name, t.sizes) for t in lone] == [("L1", 4), ("L2", 1), ("L2–L3", 4), ("DRAM", 2)]
    assert [len(g) for g in machine.merge_lone_plateaus([points[:4], points[4:5], points[5:9], points[9:]])] == [
        4, 5, 2]  # 128 KiB (61 GB/s) joins the run after it (median 41.5 GB/s), nearer in log than L1 (118.5)
    with pytest.raises(ValueError):
        machine.tiers_from_plateaus([points[4:], points[:4]], CACHES)  # out of order
    with pytest.raises(ValueError):
        machine.tiers_from_plateaus([], CACHES)


def test_from_sweep_builds_the_model_on_a_sweep_measured_elsewhere() -> None:
    points = sweep(CLEAN)
    m = machine.from_sweep(points, quick=True, device="cpu")
    assert [t.name for t in m.tiers] == [t.name for t in find_tiers(points, machine._cache_sizes("cpu"))]
    assert m.sweep == tuple(points) and m.threads == 1 and m.memory.bytes_per_s == pytest.approx(10.2e9)
    given = machine.from_sweep(points, [points[:9], points[9:]], quick=True, device="cpu")
    assert [(t.lo_bytes, t.hi_bytes) for t in given.tiers] == [(1 * KiB, 16 * MiB), (64 * MiB, 256 * MiB)]
    assert machine.measure(quick=True) is not m  # measure() keeps its own sweep


def test_compute_roof_is_measured_once_and_shared_with_measure() -> None:
    roof = machine.compute_roof("fp32", "cpu", quick=True)
    assert machine.compute_roof("fp32", "cpu", quick=True) is roof
    assert machine.measure("cpu", quick=True).compute("fp32") is roof
    assert roof.flop_per_s >= roof.median_flop_per_s > 0
