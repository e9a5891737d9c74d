"""Welch's test on log throughput, at its edges: one side without variance, both without."""

from __future__ import annotations

import math

import numpy as np

from pgfsbench.analysis.compare import Verdict, compare, welch_log
from pgfsbench.analysis.stats import estimate, t_quantile


def test_one_side_without_variance_has_the_other_sides_degrees_of_freedom() -> None:
    """Welch-Satterthwaite gives n - 1 of the side that varies (here 2), not 3 + 3 - 2."""
    a = [1000.0, 1000.0, 1000.0]
    b = [900.0, 950.0, 1000.0]
    ratio, lo, hi, _p = welch_log(a, b)
    lb = np.log(b)
    se = float(lb.std(ddof=1)) / math.sqrt(3)
    d = float(lb.mean()) - math.log(1000.0)
    half = t_quantile(0.975, 2) * se
    assert math.isclose(lo, math.exp(d - half), rel_tol=1e-9)
    assert math.isclose(hi, math.exp(d + half), rel_tol=1e-9)
    # with df = 4 the interval would be about a third narrower
    assert (hi - lo) > 1.3 * (2 * t_quantile(0.975, 4) * se * ratio)


def test_both_sides_constant_give_no_p_and_no_verdict() -> None:
    """A p99 read from 1% histogram buckets is often the same in every run: no spread to
    test against, so no verdict (it was p = 0, 'significant')."""
    ratio, lo, _hi, p = welch_log([2.9, 2.9, 2.9], [3.0, 3.0, 3.0])
    assert math.isnan(p) and math.isnan(lo) and math.isclose(ratio, 3.0 / 2.9)
    c = compare([2.9, 2.9, 2.9], [3.0, 3.0, 3.0], higher_is_better=False)
    assert c.verdict is Verdict.NONE and c.p_value is None and "quantised" in c.reason


def test_an_estimate_carries_the_geometric_mean_compare_uses() -> None:
    e = estimate([100.0, 200.0, 400.0])
    assert e is not None and e.gmean is not None and math.isclose(e.gmean, 200.0)
    assert e.gci_low is not None and e.gci_high is not None
    assert e.gci_low < 200.0 < e.gci_high
    assert math.isclose(e.mean, 700.0 / 3)  # the arithmetic mean, kept apart
