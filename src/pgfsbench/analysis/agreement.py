"""Campaigns of the same cells: do they agree, and what do they say together? (pure)

A verdict holds for the campaign that gave it: its host, its day, its noise. Four
campaigns of the seed's question on one VM (2026-11-28/29) put ZFS at +48%, +82%, +67% and
+33% against ext4, further apart than each one's own interval allowed. So when a store holds
several campaigns of the same pair of cells (a baseline and another, in comparable groups),
their estimates (each campaign's difference of mean logs, with Welch's standard error) are
put side by side:

- **Cochran's Q** tests whether they differ beyond their own noise (p < 0.05: they
  disagree: the answer depends on the day or the host, and each campaign's verdict is
  conditional on it); **tau** is the spread between campaigns (as a ratio), **I²** the
  share of the variation that is between campaigns;
- the **random-effects pooled estimate** (DerSimonian-Laird's tau², truncated at 0; the
  interval with the Hartung-Knapp adjustment, its scale at least 1, on t with k - 1 degrees
  of freedom) is what the campaigns say together, wider than any one of them when
  they disagree. With two campaigns its interval is wide: that is what two days tell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pgfsbench.analysis.stats import welch
from pgfsbench.analysis.summary import CellSummary

AGREE_P = 0.05  # Cochran's Q below this: the campaigns disagree
MIN_RUNS = 2  # runs a side for a campaign's estimate (its standard error needs 2)


@dataclass(frozen=True)
class CampaignEstimate:
    """One campaign's comparison of the pair: its difference of mean logs and Welch's se."""

    campaign: int
    when: str  # the campaign's start (its day)
    host: str
    d: float
    se: float
    n_base: int
    n_other: int

    @property
    def ratio(self) -> float:
        return math.exp(self.d)


@dataclass(frozen=True)
class Agreement:
    """The campaigns of one pair of cells, side by side and pooled."""

    baseline: str
    other: str
    group: str
    estimates: tuple[CampaignEstimate, ...]
    q: float | None = None
    p: float | None = None
    tau: float | None = None  # between campaigns, on the log scale
    i2: float | None = None
    pooled: float | None = None  # ratio
    low: float | None = None
    high: float | None = None

    @property
    def agree(self) -> bool | None:
        return None if self.p is None else self.p >= AGREE_P

    def words(self) -> str:
        each = ", ".join(f"#{e.campaign} {(e.ratio - 1) * 100:+.1f}%" for e in self.estimates)
        if self.p is None or self.pooled is None:
            return f"{self.other} vs {self.baseline}: {each} (one campaign: nothing to agree)"
        verdict = (
            "they agree"
            if self.agree
            else "they disagree beyond their own noise: each campaign's verdict holds for "
            "its host and day"
        )
        interval = (
            f" [{(self.low - 1) * 100:+.1f}%, {(self.high - 1) * 100:+.1f}%]"
            if self.low is not None and self.high is not None
            else ""
        )
        tau = f", tau {math.expm1(self.tau) * 100:.1f}%" if self.tau is not None else ""
        return (
            f"{self.other} vs {self.baseline} over {len(self.estimates)} campaigns ({each}): "
            f"{verdict} (Cochran's Q {self.q:.2f}, p={self.p:.3g}{tau}, I² "
            f"{(self.i2 or 0) * 100:.0f}%); together {(self.pooled - 1) * 100:+.1f}%{interval} "
            "(random effects, 95%)"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "baseline": self.baseline,
            "other": self.other,
            "group": self.group,
            "campaigns": [
                {
                    "campaign": e.campaign,
                    "when": e.when,
                    "host": e.host,
                    "ratio": e.ratio,
                    "se_log": e.se,
                    "n": [e.n_base, e.n_other],
                }
                for e in self.estimates
            ],
            "q": self.q,
            "p": self.p,
            "tau_log": self.tau,
            "i2": self.i2,
            "pooled": self.pooled,
            "ci95": [self.low, self.high],
            "agree": self.agree,
            "text": self.words(),
        }


def estimate(
    campaign: int, when: str, host: str, base: Sequence[float], other: Sequence[float]
) -> CampaignEstimate | None:
    """One campaign's estimate of the pair (None: too few runs, or no spread at all)."""
    la = [math.log(v) for v in base if v and v > 0]
    lb = [math.log(v) for v in other if v and v > 0]
    if len(la) < MIN_RUNS or len(lb) < MIN_RUNS:
        return None
    w = welch(la, lb)
    if w.se <= 0:
        return None
    return CampaignEstimate(campaign, when, host, w.d, w.se, len(la), len(lb))


def combine(
    baseline: str, other: str, group: str, estimates: Sequence[CampaignEstimate]
) -> Agreement:
    """The campaigns' estimates side by side: Cochran's Q and the random-effects pooled
    ratio (see the module). With one campaign, nothing is pooled."""
    ordered = tuple(sorted(estimates, key=lambda e: e.campaign))
    if len(ordered) < 2:
        return Agreement(baseline, other, group, ordered)
    from scipy import stats as sps

    y = [e.d for e in ordered]
    w = [1 / (e.se * e.se) for e in ordered]
    k, sw = len(ordered), sum(w)
    fixed = sum(wi * yi for wi, yi in zip(w, y, strict=True)) / sw
    q = sum(wi * (yi - fixed) ** 2 for wi, yi in zip(w, y, strict=True))
    df = k - 1
    # DerSimonian-Laird's tau², truncated at 0 (statsmodels' combine_effects leaves it
    # negative when Q < k - 1: negative weights, a pooled ratio outside every campaign's)
    tau2 = max(0.0, (q - df) / (sw - sum(wi * wi for wi in w) / sw))
    ws = [1 / (e.se * e.se + tau2) for e in ordered]
    sws = sum(ws)
    pooled = sum(wi * yi for wi, yi in zip(ws, y, strict=True)) / sws
    # Hartung-Knapp's scale, at least 1 (the "modified" form), on t with k - 1 df
    hk = sum(wi * (yi - pooled) ** 2 for wi, yi in zip(ws, y, strict=True)) / df
    half = float(sps.t.ppf(0.975, df)) * math.sqrt(max(1.0, hk) / sws)
    return Agreement(
        baseline,
        other,
        group,
        ordered,
        q=q,
        p=float(sps.chi2.sf(q, df)),
        tau=math.sqrt(tau2),
        i2=max(0.0, (q - df) / q) if q > 0 else 0.0,
        pooled=math.exp(pooled),
        low=math.exp(pooled - half),
        high=math.exp(pooled + half),
    )


def agreements(campaigns: Mapping[int, tuple[str, str, Sequence[CellSummary]]]) -> list[Agreement]:
    """Each pair (a cell against its group's baseline) found in several campaigns (id ->
    (when, host, its cells' summaries)): a pair is the same two cell ids in a group of the
    same workload, clients, scale and pace (on whichever host)."""
    by_pair: dict[tuple[str, str, str], list[CampaignEstimate]] = {}
    labels: dict[tuple[str, str, str], tuple[str, str, str]] = {}
    for cid, (when, host, cells) in sorted(campaigns.items()):
        by_label = {(c.label, c.group): c for c in cells}
        for c in cells:
            if c.baseline is None or c.reference:
                continue
            base = by_label.get((c.baseline, c.group))
            if base is None:
                continue
            key = (base.cell, c.cell, repr(c.group[:-1]))
            found = estimate(cid, when, host, base.values, c.values)
            if found is not None:
                by_pair.setdefault(key, []).append(found)
                labels[key] = (c.baseline, c.label, c.group_label)
    out = []
    for key, ests in by_pair.items():
        if len(ests) >= 2:
            base_label, label, group = labels[key]
            out.append(combine(base_label, label, group, ests))
    return out
