"""One Welch (analysis/stats.welch) and compare's interval on it: Hsu's degrees of freedom,
the family's level, one side without variance, both without."""

from __future__ import annotations

import math

import numpy as np
import pytest

from pgfsbench.analysis.compare import TEST_ALPHA, Verdict, compare, family_wise
from pgfsbench.analysis.stats import estimate, t_quantile, welch


def test_welch_by_hand() -> None:
    a, b = [1.0, 2.0, 3.0], [2.0, 4.0, 6.0, 8.0]
    w = welch(a, b)
    va, vb = 1.0 / 3, (20 / 3) / 4
    assert w.d == pytest.approx(5.0 - 2.0)
    assert w.se == pytest.approx(math.sqrt(va + vb))
    assert w.df == pytest.approx((va + vb) ** 2 / (va**2 / 2 + vb**2 / 3))
    assert welch([1.0, 1.0], [2.0, 2.0]).se == 0.0


def test_the_interval_takes_hsus_degrees_of_freedom_and_the_familys_level() -> None:
    """min(n_a, n_b) - 1 degrees of freedom (here 2), at TEST_ALPHA / m for a family of m:
    Welch-Satterthwaite's 4 called identical cells different in 8% of simulated families
    where one side was 5x noisier (bench/sequential_verdicts.py)."""
    a = [1000.0, 1010.0, 995.0]
    b = [900.0, 950.0, 1000.0]
    c = compare(a, b)
    w = welch(np.log(a).tolist(), np.log(b).tolist())
    half = t_quantile(1 - TEST_ALPHA / 2, 2) * w.se
    assert c.ci_low == pytest.approx(math.exp(w.d - half))
    assert c.ci_high == pytest.approx(math.exp(w.d + half))
    (c4,) = [x for x in family_wise([c, c, c, c])[:1] if x is not None]
    half4 = t_quantile(1 - TEST_ALPHA / 8, 2) * w.se
    assert c4.ci_low == pytest.approx(math.exp(w.d - half4)) and c4.family == 4


def test_both_sides_constant_give_no_p_and_no_verdict() -> None:
    """A p99 read from 1% histogram buckets is often the same in every run: no spread to
    test against, so no verdict (it was p = 0, 'significant')."""
    c = compare([2.9, 2.9, 2.9], [3.0, 3.0, 3.0], higher_is_better=False)
    assert c.verdict is Verdict.NONE and c.p_value is None and "quantised" in c.reason
    assert c.ratio == pytest.approx(3.0 / 2.9)


def test_an_estimate_carries_the_geometric_mean_compare_uses() -> None:
    e = estimate([100.0, 200.0, 400.0])
    assert e is not None and e.gmean is not None and math.isclose(e.gmean, 200.0)
    assert e.gci_low is not None and e.gci_high is not None
    assert e.gci_low < 200.0 < e.gci_high
    assert math.isclose(e.mean, 700.0 / 3)  # the arithmetic mean, kept apart


def test_a_true_difference_is_found_more_often_with_more_runs_not_less() -> None:
    """On 0206292 a verdict needed the difference to exceed either side's single-run CV:
    a true -9% at CV 10% was called slower in 33% of comparisons at 10 runs a side, 12% at
    40 and 6% at 80. Judged by its interval alone, power grows with the runs."""
    rng = np.random.default_rng(3)
    found = {}
    for n in (10, 40, 80):
        hits = 0
        for _ in range(200):
            a = 1000 * np.exp(rng.normal(0, 0.1, n))
            b = 910 * np.exp(rng.normal(0, 0.1, n))
            hits += compare(a.tolist(), b.tolist()).verdict is Verdict.WORSE
        found[n] = hits / 200
    assert found[10] < found[40] < found[80] and found[80] > 0.95, found
