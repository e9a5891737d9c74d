"""Verdicts valid under optional stopping: the anytime-valid confidence sequence, the
round's allocation, and the campaign's real stopping code driven by synthetic
throughputs (analysis/simulate.py; bench/sequential_verdicts.py runs the whole grid)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgfsbench.analysis.compare import Verdict
from pgfsbench.analysis.sequential import (
    BASELINE,
    MIN_RUNS,
    Settled,
    e_value,
    group_verdicts,
    interval,
    next_round,
)
from pgfsbench.analysis.simulate import World, run_many
from pgfsbench.analysis.summary import sequential_comparison


def test_the_e_value_grows_with_t_and_is_below_one_at_no_difference() -> None:
    values = [e_value(t, 10, 5.0) for t in (0.0, 1.0, 2.0, 4.0, 8.0)]
    assert values[0] < 1 and values == sorted(values)
    # the Gönen et al. Bayes factor for one prior scale, by hand
    r = 1 / (1 + 5.0 * 1.0)
    by_hand = math.sqrt(r) * ((1 + 9 / 10) / (1 + r * 9 / 10)) ** (11 / 2)
    assert math.isclose(e_value(3.0, 10, 5.0, (1.0,)), by_hand, rel_tol=1e-12)


def test_the_interval_is_where_the_e_value_stays_below_one_over_alpha() -> None:
    lo, hi = interval(0.1, 0.02, 20, 6.0, 0.05) or (math.nan, math.nan)
    assert lo < 0.1 < hi and math.isclose(0.1 - lo, hi - 0.1)
    edge = (hi - 0.1) / 0.02
    assert math.isclose(e_value(edge, 20, 6.0), 1 / 0.05, rel_tol=1e-6)
    # wider than the fixed-sample t interval: the price of looking at every round
    from pgfsbench.analysis.stats import t_quantile

    assert hi - 0.1 > t_quantile(0.975, 20) * 0.02
    assert interval(0.1, 0.02, 1, 1.5, 0.05) is None  # too few runs for any finite bound


def test_verdicts_faster_slower_equivalent_and_unsettled() -> None:
    rng = np.random.default_rng(5)

    def runs(centre: float, n: int, cv: float = 0.01) -> list[float]:
        return list(centre * np.exp(rng.normal(0, cv, n)))

    # (each comparison's own two variances, Welch: 20 runs a side put a twin at CV 1% inside
    # ±2% at this level)
    found = group_verdicts(
        runs(1000, 20),
        {"fast": runs(1200, 12), "slow": runs(800, 12), "twin": runs(1000, 20), "few": [990.0]},
    )
    assert found["fast"].verdict is Settled.FASTER and found["slow"].verdict is Settled.SLOWER
    assert found["twin"].verdict is Settled.EQUIVALENT
    assert found["few"].verdict is Settled.UNSETTLED and found["few"].low is None
    assert found["fast"].alpha == pytest.approx(0.05 / 4)  # Bonferroni over the group
    assert "equivalent within ±2.0%" in found["twin"].words()


def test_a_round_runs_the_open_cells_and_the_baseline_about_root_k_times() -> None:
    found = group_verdicts(
        [1000.0, 1100.0, 900.0], {f"c{i}": [1000.0, 1080.0, 930.0] for i in range(4)}
    )
    assert all(v.verdict is Settled.UNSETTLED for v in found.values())
    counts = {BASELINE: 3, **dict.fromkeys(found, 3)}
    plan = next_round(found, counts, BASELINE, 8)
    assert plan[BASELINE] == 2 and all(plan[c] == 1 for c in found)
    assert next_round(found, {BASELINE: 16, **dict.fromkeys(found, 8)}, BASELINE, 8) == {}
    settled = group_verdicts(
        [1000.0, 1001.0, 999.0, 1000.5] * 3, {"fast": [1500.0, 1501.0, 1499.0, 1500.5] * 3}
    )
    assert settled["fast"].verdict is Settled.FASTER
    assert next_round(settled, {BASELINE: 12, "fast": 12}, BASELINE, 20) == {}
    assert next_round({}, {BASELINE: 0}, BASELINE, 8) == {}
    assert MIN_RUNS == 3


def test_identical_cells_give_few_false_verdicts_however_the_campaign_stops() -> None:
    """The campaign's own stopping and verdict code, 400 matrices of 4 identical cells and
    a baseline at CV 2%: at most 5% with a false "faster" or "slower" (the old auto rule
    gave 5.8% at 2 cells)."""
    s = run_many(World(4, 0.02), 400, seed=11)
    assert s.false_rate <= 0.05, s
    heavy = run_many(World(4, 0.05, heavy_tail=True), 300, seed=12)
    assert heavy.false_rate <= 0.05, heavy


def test_a_true_ten_percent_difference_is_found_within_repetitions_max() -> None:
    s = run_many(World(4, 0.02, effect=0.10), 200, seed=13)
    assert s.power is not None and s.power >= 0.9, s


def test_the_summary_gives_the_campaigns_settled_verdict() -> None:
    stored = {
        "baseline": "ext4/default/default/tpcb-like",
        "verdict": "equivalent",
        "ratio": 1.004,
        "low": 0.985,
        "high": 1.019,
        "margin": 0.021,
        "n": 7,
        "n_base": 9,
    }
    c = sequential_comparison(stored, None)
    assert c.verdict is Verdict.SAME and "equivalent within ±2.1%" in c.reason
    assert "anytime-valid" in c.reason and c.ci_low == 0.985


def test_a_campaigns_settled_verdicts_stand_in_its_summary() -> None:
    """For a campaign that stopped on its own data, the summary gives the verdicts its
    confidence sequences reached, and no fixed-sample "best" or "behind"."""
    from pgfsbench.analysis.summary import highlights, summarise
    from tests.unit.test_best import runs

    ext4 = runs("ext4", [2500, 2510, 2490, 2505])
    xfs = runs("xfs", [3000, 3010, 2990, 3005])
    settled = {
        "xfs/pg/k/rw": {
            "baseline": "ext4/pg/k/rw",
            "verdict": "faster",
            "ratio": 1.2,
            "low": 1.15,
            "high": 1.25,
            "margin": 0.02,
            "n": 4,
            "n_base": 4,
        }
    }
    cells = summarise(ext4 + xfs, settled=settled)
    xfs_cell = next(c for c in cells if c.cell == "xfs/pg/k/rw")
    assert xfs_cell.vs_baseline is not None and xfs_cell.vs_baseline.method == "sequence"
    assert xfs_cell.vs_baseline.verdict is Verdict.BETTER
    lines = highlights(cells).lines
    assert "best" not in lines[0] and "anytime-valid" in lines[0]
    assert any("+20.0% [+15.0%, +25.0%] faster (anytime-valid" in line for line in lines)


def test_one_noisy_cell_among_steady_ones_is_not_called_different() -> None:
    """Cells rarely share one noise: a cell at CV 10% among steady ones at 1% (or a noisy
    baseline) is no more often called faster or slower than 5% of matrices. With one
    variance pooled over the group this was 43% at k = 8 (its interval borrowed the steady
    cells' small variance)."""
    noisy = run_many(World(8, 0.01, cv_first=0.10), 300, seed=21)
    assert noisy.false_rate <= 0.05, noisy
    base = run_many(World(3, 0.02, cv_baseline=0.10), 300, seed=22)
    assert base.false_rate <= 0.05, base


def test_a_noisy_baseline_gets_more_of_a_round_a_steady_one_less_never_past_its_limit() -> None:
    from pgfsbench.analysis.sequential import baseline_share, spreads

    assert baseline_share(4) == 2  # Dunnett's √k
    assert baseline_share(4, 0.10, [0.02, 0.02]) == 6  # the ratio kept at 3 at most
    assert baseline_share(4, 0.03, [0.02, 0.02, 0.02]) == 3
    assert baseline_share(4, 0.005, [0.02]) == 1  # never below one
    assert baseline_share(4, 0.05, []) == 2  # no cell's spread known yet: √k
    found = group_verdicts(
        [1000.0, 1300.0, 800.0], {f"c{i}": [1000.0, 1010.0, 990.0] for i in range(4)}
    )
    counts = {BASELINE: 3, **dict.fromkeys(found, 3)}
    data = {BASELINE: [1000.0, 1300.0, 800.0], **{c: [1000.0, 1010.0, 990.0] for c in found}}
    spread = spreads(data)
    assert spread[BASELINE] > 10 * spread["c0"]
    assert next_round(found, counts, BASELINE, 8, spread)[BASELINE] == 6
    # the baseline's limit (repetitions_max times √k) holds whatever its share
    assert next_round(found, {**counts, BASELINE: 14}, BASELINE, 8, spread)[BASELINE] == 2
    assert BASELINE not in next_round(found, {**counts, BASELINE: 16}, BASELINE, 8, spread)
    assert spreads({"few": [1.0, 2.0]}) == {}  # fewer than MIN_RUNS runs: unknown
