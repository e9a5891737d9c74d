"""Campaigns of the same cells: Cochran's Q by hand, the random-effects pooled ratio, and
the words that say whether they agree."""

from __future__ import annotations

import math

import pytest

from pgfsbench.analysis.agreement import CampaignEstimate, combine, estimate


def est(cid: int, ratio: float, se: float) -> CampaignEstimate:
    return CampaignEstimate(cid, "2026-11-2{cid}", "vm", math.log(ratio), se, 5, 5)


def test_cochrans_q_by_hand_and_the_seeds_four_campaigns_disagree() -> None:
    """ZFS against ext4 in four campaigns of 2026-11-28/29: +48%, +82%, +67%, +33%, each
    with its own se: Q = sum w (d - d_fe)^2, and p well below 0.05."""
    found = [est(1, 1.48, 0.06), est(2, 1.82, 0.05), est(3, 1.67, 0.05), est(4, 1.33, 0.04)]
    a = combine("ext4", "zfs", "g", found)
    w = [1 / e.se**2 for e in found]
    fe = sum(wi * e.d for wi, e in zip(w, found, strict=True)) / sum(w)
    q = sum(wi * (e.d - fe) ** 2 for wi, e in zip(w, found, strict=True))
    assert a.q == pytest.approx(q)
    assert a.p is not None and a.p < 0.001 and a.agree is False
    assert a.tau is not None and a.tau > 0.1
    assert a.low is not None and a.high is not None and a.pooled is not None
    assert a.low < a.pooled < a.high and a.high / a.low > 1.3  # wide: they disagree
    assert "disagree" in a.words() and "host and day" in a.words()


def test_campaigns_within_their_noise_agree_and_pool() -> None:
    a = combine("ext4", "xfs", "g", [est(1, 0.90, 0.05), est(2, 0.93, 0.05), est(3, 0.91, 0.06)])
    assert a.agree is True and a.tau == pytest.approx(0.0)
    assert a.pooled is not None and 0.88 < a.pooled < 0.94
    assert "they agree" in a.words()
    one = combine("ext4", "xfs", "g", [est(1, 0.9, 0.05)])
    assert one.p is None and "nothing to agree" in one.words()


def test_a_campaigns_estimate_needs_two_runs_a_side_and_some_spread() -> None:
    assert estimate(1, "", "", [100.0], [110.0, 111.0]) is None
    assert estimate(1, "", "", [100.0, 100.0], [110.0, 110.0]) is None
    e = estimate(1, "", "", [100.0, 102.0], [110.0, 113.0])
    assert e is not None and e.ratio == pytest.approx(math.exp(e.d)) and e.se > 0


def test_campaigns_closer_than_their_noise_pool_between_them() -> None:
    """The seed's campaigns of 2026-12-01, xfs against ext4: -23.1% (se 0.144) and -30.3%
    (se 0.067). Q < k - 1: DerSimonian-Laird's tau² is 0, not negative (statsmodels'
    combine_effects left it at -0.008: negative weights, "together -32.6% [nan, nan]", I²
    -163%). The pooled ratio lies between the two, its interval finite and wide."""
    a = combine("ext4", "xfs", "g", [est(1, 0.7692, 0.1442), est(2, 0.6975, 0.0665)])
    assert a.tau == 0.0 and a.i2 == 0.0 and a.agree is True
    assert a.pooled is not None and a.low is not None and a.high is not None
    assert 0.6975 < a.pooled < 0.7692
    w = [1 / 0.1442**2, 1 / 0.0665**2]
    fixed = (w[0] * math.log(0.7692) + w[1] * math.log(0.6975)) / sum(w)
    assert a.pooled == pytest.approx(math.exp(fixed))  # tau² = 0: the fixed-effect mean
    assert a.low < 0.6975 and a.high > 0.7692 and math.isfinite(a.high)
    assert "nan" not in a.words() and "-163" not in a.words()


def test_the_pooled_ratio_matches_statsmodels_where_tau2_is_positive() -> None:
    """Where DerSimonian-Laird's tau² is positive, the pooled mean and the modified
    Hartung-Knapp interval are statsmodels' own."""
    import numpy as np
    from statsmodels.stats.meta_analysis import combine_effects

    found = [est(1, 1.48, 0.06), est(2, 1.82, 0.05), est(3, 1.67, 0.05), est(4, 1.33, 0.04)]
    a = combine("ext4", "zfs", "g", found)
    res = combine_effects(
        np.array([e.d for e in found]),
        np.array([e.se**2 for e in found]),
        method_re="chi2",
        use_t=True,
    )
    assert res.tau2 > 0 and a.tau == pytest.approx(math.sqrt(res.tau2))
    assert a.pooled == pytest.approx(math.exp(res.mean_effect_re))
    ci = res.conf_int(alpha=0.05)
    low = min(ci[1][0], ci[3][0])
    high = max(ci[1][1], ci[3][1])
    assert a.low == pytest.approx(math.exp(low)) and a.high == pytest.approx(math.exp(high))
