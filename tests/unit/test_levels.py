"""A run that changes level half-way: the lower level is an episode, judged against the
higher; a clean run and a short dip are not level shifts."""

from __future__ import annotations

import numpy as np

from pgfsbench.analysis.levels import level_shift
from pgfsbench.analysis.series import Aligned
from pgfsbench.analysis.stalls import find_stalls, flagged_seconds

RNG = np.random.default_rng(7)


def noisy(level: float, n: int, cv: float = 0.05) -> np.ndarray:
    return level * (1 + cv * RNG.standard_normal(n))


def test_halved_for_the_second_half_is_a_shift_and_an_episode() -> None:
    tps = np.concatenate([noisy(2400, 10), noisy(1100, 10)])
    shift = level_shift(tps)
    assert shift is not None and shift.at == 10
    assert 2200 < shift.before < 2600 and 1000 < shift.after < 1200
    assert "level shift at 10 s" in shift.text()
    # against the run's median (between the levels) no second is below half of it
    assert not flagged_seconds(Aligned(20, {"tps": tps}), 0.5, 0.0).any()
    (ep,) = find_stalls(Aligned(20, {"tps": tps}))
    assert ep.kind == "slowdown" and ep.start_s == 10 and ep.end_s == 20
    assert ep.median_tps > 2200  # judged against the undisturbed level


def test_a_rise_half_way_makes_the_first_half_the_episode() -> None:
    tps = np.concatenate([noisy(900, 8), noisy(2500, 12)])
    (ep,) = find_stalls(Aligned(20, {"tps": tps}))
    assert ep.start_s == 0 and ep.end_s == 8


def test_a_clean_run_and_a_short_dip_are_no_level_shift() -> None:
    for _ in range(50):
        assert level_shift(noisy(3000, 30, cv=0.08)) is None
    dip = noisy(3000, 30)
    dip[12:15] = 0.0
    assert level_shift(dip) is None
    (ep,) = find_stalls(Aligned(30, {"tps": dip}))
    assert ep.kind == "stall" and ep.start_s == 12 and ep.end_s == 15


def test_a_small_drift_is_not_a_shift() -> None:
    tps = np.concatenate([noisy(3000, 15, 0.02), noisy(2500, 15, 0.02)])  # -17%
    assert level_shift(tps) is None
    assert find_stalls(Aligned(30, {"tps": tps})) == []


def test_noise_alone_is_not_a_level_shift_whatever_split_the_search_picks() -> None:
    """The p-value was taken on the very split the search chose: the best of ~n splits
    looks significant in much noise. By permutation of the largest t it keeps its level:
    of 200 runs of white noise (and 200 of a slow drift within MIN_CHANGE), at most 1%."""
    import numpy as np

    from pgfsbench.analysis.levels import level_shift

    rng = np.random.default_rng(7)
    found = sum(level_shift(rng.normal(1000, 150, 60)) is not None for _ in range(200))
    drift = sum(
        level_shift(np.linspace(1000, 800, 60) + rng.normal(0, 60, 60)) is not None
        for _ in range(200)
    )
    assert found <= 2 and drift <= 2, (found, drift)


def test_a_real_level_shift_is_found_with_a_permutation_p() -> None:
    import numpy as np

    from pgfsbench.analysis.levels import PERMUTATIONS, level_shift

    rng = np.random.default_rng(3)
    x = np.r_[rng.normal(2400, 60, 30), rng.normal(900, 60, 30)]
    shift = level_shift(x)
    assert shift is not None and shift.at == 30
    assert shift.p == 1 / (PERMUTATIONS + 1)


# ------------------------------------------------------------ a dip with a level on each side


def test_outside_work_inside_the_phase_is_an_episode_with_its_cause() -> None:
    """The issue's case: CPU work outside the benchmark began after the measured phase
    started and ended before it ended, 13 of 20 seconds at 200-400 TPS against 2,350.
    Against the run's median (the disturbed level) nothing dipped; against the level
    before and after it the 13 seconds are one episode, its cause the outside CPU."""
    rng = np.random.default_rng(11)
    tps = np.r_[rng.normal(2350, 60, 4), rng.uniform(200, 400, 13), rng.normal(2350, 60, 3)]
    out_cpu = np.r_[np.full(4, 2.0), np.full(13, 290.0), np.full(3, 2.0)]
    idle = np.r_[np.full(4, 20.0), np.full(13, 0.0), np.full(3, 20.0)]
    shift = level_shift(tps)
    assert shift is not None and (shift.start, shift.end) == (4, 17) and not shift.one_sided
    assert shift.reference > 2200 and "level change from 4 s to 17 s" in shift.text()
    al = Aligned(20, {"tps": tps, "outside_cpu_pct": out_cpu, "cpu_idle_pct": idle})
    (ep,) = find_stalls(al)
    assert (ep.start_s, ep.end_s) == (4, 17) and ep.cause == "host_cpu", ep


def test_a_dip_of_any_length_inside_the_phase_is_found() -> None:
    """From 4 s to 80% of a 60 and 300-second phase, anywhere inside it; in a 20-second
    phase to 60% (at 80%, 4 seconds against 16, no shuffle test reaches 0.001: the outside
    work is then most of the phase and marks the run, analysis/disturbance)."""
    rng = np.random.default_rng(5)
    for n in (20, 60, 300):
        for length in sorted({4, n // 4, n // 2, int((0.6 if n == 20 else 0.8) * n)}):
            for start in (1, (n - length) // 2 + 1):
                tps = rng.normal(2000, 80, n)
                tps[start : start + length] = rng.normal(700, 80, length)
                eps = find_stalls(Aligned(n, {"tps": tps}))
                assert eps, (n, length, start)
                assert min(e.start_s for e in eps) <= start + 1
                assert max(e.end_s for e in eps) >= start + length - 1


def test_noise_and_drift_give_no_two_sided_change() -> None:
    """Searched over every segment, noise still passes at its level: of 300 runs of white
    noise of 20 and 60 seconds (CV 15%), a heavy tail, and a slow drift, at most 1%."""
    rng = np.random.default_rng(17)
    found = 0
    for i in range(300):
        n = 20 if i % 2 else 60
        kind = i % 3
        if kind == 0:
            x = rng.normal(1000, 150, n)
        elif kind == 1:
            x = 1000 * np.exp(0.1 * rng.standard_t(3, n))
        else:
            x = np.linspace(1000, 800, n) + rng.normal(0, 60, n)
        found += level_shift(x) is not None
    assert found <= 3, found


def test_the_threshold_is_one_the_run_can_reach() -> None:
    """A shuffle test of n seconds cannot go below smallest_p(n): checked by counting
    every arrangement of 8 distinct values; runs too short for any convincing p are not
    tested, and the threshold loosens only as far as twice what the length can reach."""
    import itertools

    from pgfsbench.analysis.levels import MAX_PVALUE, _max_t, smallest_p, threshold

    n = 8
    base = np.array([1.0, 2.0, 3.0, 10.0, 11.0, 12.0, 13.0, 14.0])
    t_obs = _max_t(base[None, :], 3)[0][0]
    perms = np.array(list(itertools.permutations(base)))
    t_all = _max_t(perms, 3)[0]
    exact = float(np.mean(t_all >= t_obs - 1e-9))
    assert exact >= smallest_p(n) - 1e-12
    assert threshold(10) is None and level_shift(np.r_[np.full(5, 1000.0), np.zeros(5)]) is None
    loosened = threshold(16)
    assert loosened is not None and loosened > MAX_PVALUE  # reachable, loosened
    assert threshold(20) == MAX_PVALUE
    for n in range(6, 40):
        limit = threshold(n)
        assert limit is None or limit >= smallest_p(n)


def test_long_runs_are_searched_in_bins_and_mapped_back_to_seconds() -> None:
    rng = np.random.default_rng(2)
    tps = rng.normal(3000, 90, 1800)
    tps[600:1100] = rng.normal(1200, 90, 500)
    shift = level_shift(tps)
    assert shift is not None and abs(shift.start - 600) <= 15 and abs(shift.end - 1100) <= 15
    assert shift.n == 1800 and 2900 < shift.reference < 3100


def test_a_dip_too_short_to_prove_by_throughput_is_judged_by_the_host_signals() -> None:
    """16 seconds, 10 of them at a fifth under outside CPU work: no shuffle test of the
    throughput reaches its threshold, yet the host says which seconds were the storage's
    alone; the dip is judged against those. Outside work that moved nothing, and a run
    with no outside work, are judged as before."""
    from pgfsbench.analysis.stalls.episodes import calm_reference

    tps = np.array(
        [3532, 3790, 3704, 546, 632, 326, 271, 312, 439, 364, 989, 985, 590, 3072, 3907, 3852.0]
    )
    cpu = np.r_[np.zeros(3), np.full(10, 175.0), np.zeros(3)]
    al = Aligned(16, {"tps": tps, "outside_cpu_pct": cpu})
    assert calm_reference(al) == np.median(tps[cpu == 0])
    (ep,) = find_stalls(al)
    assert (ep.start_s, ep.end_s, ep.cause) == (3, 13, "host_cpu")
    steady = np.full(16, 3000.0) + RNG.normal(0, 50, 16)
    assert calm_reference(Aligned(16, {"tps": steady, "outside_cpu_pct": cpu})) is None
    assert calm_reference(Aligned(16, {"tps": tps, "outside_cpu_pct": np.zeros(16)})) is None
    assert calm_reference(Aligned(16, {"tps": tps})) is None  # not watched: not known


def test_a_fast_start_the_run_fell_from_is_not_its_reference() -> None:
    """Seen on the first seed's HDD right after its load (no warm-up): 3 s at 2,750 TPS
    (the load's pages still cached), then 57 s at 600, the disk's steady state. The lower
    level is the run's own, not a 57-second stall against its first 3 seconds; a burst
    above the rest in the middle is not a reference either."""
    rng = np.random.default_rng(4)
    fast_start = np.r_[rng.normal(2750, 60, 3), rng.normal(600, 40, 57)]
    assert level_shift(fast_start) is not None  # a change there is
    assert find_stalls(Aligned(60, {"tps": fast_start})) == []
    burst = np.r_[rng.normal(600, 40, 20), rng.normal(2000, 60, 10), rng.normal(600, 40, 30)]
    assert find_stalls(Aligned(60, {"tps": burst})) == []
