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

    # (each comparison's own two variances, Welch: 24 runs a side put a twin at CV 1% inside
    # ±2% at this level)
    found = group_verdicts(
        runs(1000, 24),
        {"fast": runs(1200, 12), "slow": runs(800, 12), "twin": runs(1000, 24), "few": [990.0]},
    )
    assert found["fast"].verdict is Settled.FASTER and found["slow"].verdict is Settled.SLOWER
    assert found["twin"].verdict is Settled.EQUIVALENT
    assert found["few"].verdict is Settled.UNSETTLED and found["few"].low is None
    assert found["fast"].alpha == pytest.approx(0.04 / 4)  # Bonferroni over the group
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


def test_disjoint_looks_say_the_model_fails_never_a_point() -> None:
    """On 0206292 two looks whose intervals did not meet became a zero-width point ("faster
    +0.1% [+0.1%, +0.1%]"), fed back to every later look. Now: unsettled, said, for good."""
    first = group_verdicts([1000.0] * 2 + [1001.0] * 4, {"c": [1300.0, 1301.0, 1299.0] * 2})
    assert first["c"].verdict is Settled.FASTER
    second = group_verdicts(
        [1000.0] * 2 + [1001.0] * 4, {"c": [700.0, 701.0, 699.0] * 2}, before=first
    )
    v = second["c"]
    assert v.failed and v.verdict is Settled.UNSETTLED and v.low is None and v.high is None
    assert "do not follow the model" in v.words()
    third = group_verdicts([1000.0] * 6, {"c": [1000.0] * 6}, before=second)
    assert third["c"].failed and third["c"].verdict is Settled.UNSETTLED


def test_a_mixture_is_followed_stratum_by_stratum() -> None:
    """Windows with and without a checkpoint: each stratum its own sequence; settled when
    every stratum is, and 'mixed' when they settle apart."""
    base = [1000.0, 1001.0, 999.0, 1000.5] * 2 + [700.0, 701.0, 699.0] * 2
    labels_b = ["0"] * 8 + ["1+"] * 6
    cell = [1200.0, 1201.0, 1199.0, 1200.5] * 2 + [840.0, 841.0, 839.0] * 2
    found = group_verdicts(base, {"c": cell}, strata={BASELINE: labels_b, "c": labels_b})
    assert found["c"].verdict is Settled.FASTER and len(found["c"].strata) == 2
    apart = [1200.0, 1201.0, 1199.0, 1200.5] * 2 + [500.0, 501.0, 499.0] * 2
    found = group_verdicts(base, {"c": apart}, strata={BASELINE: labels_b, "c": labels_b})
    assert found["c"].verdict is Settled.MIXED and "mixed" in found["c"].words()


# the simulated families below: bounds near what bench/sequential_verdicts.py measured at
# this HEAD (docs/validation/index.md), so that a regression fails here
def test_identical_cells_give_few_false_verdicts_however_the_campaign_stops() -> None:
    s = run_many(World("normal", 4, cv=0.02), 300, seed=11)
    assert s.false_rate <= 0.03, s.as_dict()
    heavy = run_many(World("heavy", 4, cv=0.05, heavy_tail=True), 200, seed=12)
    assert heavy.false_rate <= 0.03, heavy.as_dict()


def test_mixtures_with_their_cause_recorded_give_no_false_verdicts() -> None:
    """The worlds that broke 0206292 (27-30% false with a bimodal baseline), both paths."""
    world = World("base bimodal", 3, mix_p=0.2, mix_drop=(0.2, 0.3), mix_who="baseline")
    for path in ("auto", "fixed 3", "fixed 5"):
        s = run_many(world, 200, seed=14, path=path)
        assert s.false_rate <= 0.02, s.as_dict()
    one = World("one side bimodal", 1, mix_p=0.3, mix_drop=(0.2, 0.4), mix_who="first")
    assert run_many(one, 300, seed=15, path="fixed 5").false_rate <= 0.02


def test_a_true_ten_percent_difference_is_found_within_repetitions_max() -> None:
    s = run_many(World("10%", 4, cv=0.02, effect=0.10, most=16), 150, seed=13)
    assert s.power is not None and s.power >= 0.95, s.as_dict()
    assert s.coverage is not None and s.coverage >= 0.97, s.as_dict()


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
    assert c.verdict is Verdict.EQUIVALENT and "equivalent within ±2.1%" in c.reason
    assert "anytime-valid" in c.reason and c.ci_low == 0.985
    # unsettled with no finite interval (3 vs 3 runs, one side's spread far the larger, as
    # on the seed's HDD): said so, not "too noisy" beside a bare ratio
    bare = sequential_comparison(
        {**stored, "verdict": "unsettled", "ratio": 0.68, "low": None, "high": None, "n": 3},
        None,
    )
    assert bare.verdict is Verdict.UNDECIDED and bare.ci_low is None
    assert "no finite interval yet" in bare.reason and "too noisy" not in bare.reason


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


def test_compare_of_an_auto_campaign_gives_its_settled_verdict_either_way_round() -> None:
    """`compare ext4 xfs` on a campaign that stopped on its own data: the verdict its
    confidence sequence reached (as the summary gives), never a fixed-sample test of the
    same runs; `compare xfs ext4` the same, turned over. A pair with no settled verdict
    (xfs against btrfs) is tested on its runs."""
    from pgfsbench.analysis.pairs import pairs_by_name
    from pgfsbench.analysis.summary import summarise
    from tests.unit.test_best import runs

    ext4 = runs("ext4", [2500, 2510, 2490, 2505])
    xfs = runs("xfs", [3000, 3010, 2990, 3005])
    btrfs = runs("btrfs", [2000, 2400, 2100, 2600])
    settled = {
        "xfs/pg/k/rw": {
            "baseline": "ext4/pg/k/rw",
            "verdict": "unsettled",
            "ratio": 1.2,
            "low": 0.95,
            "high": 1.5,
            "margin": 0.02,
            "n": 4,
            "n_base": 4,
        }
    }
    cells = summarise(ext4 + xfs + btrfs, settled=settled)
    (forward,) = pairs_by_name(cells, "ext4", "xfs")
    c = forward.throughput
    # four steady runs a side 20% apart: Welch calls it faster; the sequence did not settle
    assert c.method == "sequence" and c.verdict is Verdict.UNDECIDED, c
    assert (c.ratio, c.ci_low, c.ci_high) == (1.2, 0.95, 1.5)
    (backward,) = pairs_by_name(cells, "xfs", "ext4")
    b = backward.throughput
    assert b.method == "sequence" and b.verdict is Verdict.UNDECIDED
    assert b.ratio == 1 / 1.2 and b.ci_low == 1 / 1.5 and b.ci_high == 1 / 0.95
    settled["xfs/pg/k/rw"] |= {"verdict": "faster", "low": 1.1}
    cells = summarise(ext4 + xfs + btrfs, settled=settled)
    (backward,) = pairs_by_name(cells, "xfs", "ext4")
    assert backward.throughput.verdict is Verdict.WORSE
    assert backward.throughput.verdict_words().startswith("slower")
    assert "n=4 vs 4" in backward.throughput.reason
    (other,) = pairs_by_name(cells, "xfs", "btrfs")
    assert other.throughput.method == "welch"


def test_one_noisy_cell_among_steady_ones_is_not_called_different() -> None:
    """Cells rarely share one noise: a cell at CV 10% among steady ones at 1% (or a noisy
    baseline) is rarely called faster or slower. With one variance pooled over the group
    this was 43% at k = 8 (its interval borrowed the steady cells' small variance)."""
    noisy = run_many(World("noisy", 8, cv=0.01, cv_first=0.10), 200, seed=21)
    assert noisy.false_rate <= 0.03, noisy.as_dict()
    base = run_many(World("noisy base", 3, cv=0.02, cv_baseline=0.10), 200, seed=22)
    assert base.false_rate <= 0.03, base.as_dict()
    # fixed 3 vs 3, cells 5x noisier than the baseline: Hsu's df (8% with Welch's)
    fixed = run_many(World("unequal", 4, cv=0.10, cv_baseline=0.02), 400, seed=23, path="fixed 3")
    assert fixed.false_rate <= 0.03, fixed.as_dict()


def test_a_noisy_baseline_gets_more_of_a_round_a_steady_one_less_and_its_cap_follows() -> None:
    """The baseline's share follows its spread against the open cells', and so does its
    cap (repetitions_max times its share): on 0206292 the cap ignored its noise, and a
    noisy ext4 stopped at 8 runs whatever the budget."""
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
    # past 16 (8 x √k, the old cap) a noisy baseline still runs: its cap is 8 x 6
    assert next_round(found, {**counts, BASELINE: 16}, BASELINE, 8, spread)[BASELINE] == 6
    assert next_round(found, {**counts, BASELINE: 44}, BASELINE, 8, spread)[BASELINE] == 4
    assert BASELINE not in next_round(found, {**counts, BASELINE: 48}, BASELINE, 8, spread)
    assert spreads({"few": [1.0, 2.0]}) == {}  # fewer than MIN_RUNS runs: unknown


def test_a_cell_on_two_hosts_is_one_cell_to_the_policy() -> None:
    """On 0206292 runs were keyed by cell in one place and by (cell, host) in another: a
    cluster cell on two node types sat in two groups that overwrote each other."""
    from pgfsbench.engine.rounds import comparable_groups
    from tests.unit.test_best import runs

    ext4 = runs("ext4", [2500, 2510, 2490])
    xfs = runs("xfs", [3000, 3010, 2990])
    import dataclasses

    xfs = [
        dataclasses.replace(r, host=h)
        for r, h in zip(xfs, ["k8s:a", "k8s:b", "k8s:a"], strict=True)
    ]
    groups = comparable_groups(ext4 + xfs)
    assert len(groups) == 1 and groups[0].cells == ("xfs/pg/k/rw",)
