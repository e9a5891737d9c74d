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
