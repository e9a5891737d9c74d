"""Is B faster than A? A ratio with its 95% confidence interval, and a verdict that says
"no significant difference" whenever the data cannot tell (pure).

Welch's t test on the logarithm of the throughputs: the ratio of geometric means and its
interval come out of it directly. "faster"/"slower" needs p < 0.05 AND a difference
larger than max(2%, the noise of either cell); at least 3 repetitions per side are needed
for a verdict at all. With 5 or more per side, Mann-Whitney's U test is given as a check
that does not assume normality (below 5 it cannot reach p < 0.05 with 3 vs 3).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from pgfsbench.analysis.stats import t_quantile, t_two_sided_p

MIN_N_VERDICT = 3
MIN_N_MANN_WHITNEY = 5
MIN_EFFECT = 0.02
ALPHA = 0.05


class Verdict(StrEnum):
    BETTER = "better"  # faster for throughput, lower for latency
    WORSE = "worse"
    SAME = "no significant difference"
    NONE = "no verdict"

    def mark(self) -> str:
        return {"better": "▲", "worse": "▼", "no significant difference": "≈", "no verdict": "?"}[
            self.value
        ]


@dataclass(frozen=True)
class Comparison:
    """B against the baseline A, for one figure."""

    n_base: int
    n_other: int
    ratio: float | None  # B / A (geometric means)
    ci_low: float | None
    ci_high: float | None
    p_value: float | None  # Welch's t test on logs
    mann_whitney_p: float | None  # only with 5+ values per side
    threshold: float  # the smallest relative difference that counts
    verdict: Verdict
    reason: str
    higher_is_better: bool = True
    # Holm's step-down adjustment over the comparisons of one family (a group's cells
    # against its baseline): the p the verdict was taken on, and how many were compared
    adjusted_p: float | None = None
    family: int = 1
    # "welch": a fixed-sample test; "sequence": the campaign's anytime-valid confidence
    # sequence settled it (analysis/sequential.py), valid however the campaign stopped
    method: str = "welch"

    def p_words(self) -> str:
        """'p=0.003' alone, or 'p=0.012 (Holm, 4 comparisons)' within a family."""
        if self.family > 1 and self.adjusted_p is not None:
            return f"p={self.adjusted_p:.3g} (Holm, {self.family} comparisons)"
        return f"p={self.p_value:.3g}"

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1) * 100

    def verdict_words(self) -> str:
        """'faster, p=0.003' / 'slower, p=0.01' / the reason there is no verdict."""
        if self.method == "sequence":
            return self.reason
        if self.verdict in (Verdict.BETTER, Verdict.WORSE):
            better = self.verdict is Verdict.BETTER
            word = (
                ("faster" if better else "slower")
                if self.higher_is_better
                else ("lower" if better else "higher")
            )
            return f"{word}, {self.p_words()}"
        return self.reason

    def words(self) -> str:
        """'+6.2% faster [+3.1%, +9.4%], p=0.003' / 'no significant difference (n=3 vs 3)'."""
        if self.ratio is None:
            return self.reason
        ci = ""
        if self.ci_low is not None and self.ci_high is not None:
            ci = f" [{(self.ci_low - 1) * 100:+.1f}%, {(self.ci_high - 1) * 100:+.1f}%]"
        base = f"{(self.ratio - 1) * 100:+.1f}%{ci}"
        if self.method == "sequence":  # settled by a confidence sequence: its own words
            return f"{base} {self.reason}"
        if self.verdict in (Verdict.BETTER, Verdict.WORSE):
            word = (
                ("faster" if self.verdict is Verdict.BETTER else "slower")
                if self.higher_is_better
                else ("lower" if self.verdict is Verdict.BETTER else "higher")
            )
            return f"{base} {word}, {self.p_words()} (n={self.n_base} vs {self.n_other})"
        return f"{base}: {self.reason}"


def _cv(vals: Sequence[float]) -> float:
    if len(vals) < 2:
        return 0.0
    mean = statistics.fmean(vals)
    return statistics.stdev(vals) / mean if mean else 0.0


def welch_log(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float, float]:
    """(ratio, ci_low, ci_high, p) of B/A from Welch's t test on log values. With no
    variance on either side (quantised figures: a p99 read from 1% histogram buckets)
    there is nothing to test against: p and the interval are NaN, never 0."""
    la, lb = np.log(np.asarray(a, float)), np.log(np.asarray(b, float))
    na, nb = len(la), len(lb)
    d = float(lb.mean() - la.mean())
    va, vb = float(la.var(ddof=1)), float(lb.var(ddof=1))
    se2 = va / na + vb / nb
    if se2 <= 0:  # identical values on each side
        return math.exp(d), math.nan, math.nan, math.nan
    se = math.sqrt(se2)
    # Welch-Satterthwaite: a side without variance adds nothing to the denominator, so
    # its degrees of freedom are the other side's n - 1 (not na + nb - 2, which made the
    # interval about 35% too narrow at 3 vs 3)
    df = se2**2 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    p = t_two_sided_p(d / se, df)
    half = t_quantile(0.975, df) * se
    return math.exp(d), math.exp(d - half), math.exp(d + half), p


def compare(
    base: Sequence[float | None], other: Sequence[float | None], *, higher_is_better: bool = True
) -> Comparison:
    a = [float(v) for v in base if v is not None and math.isfinite(float(v)) and v > 0]
    b = [float(v) for v in other if v is not None and math.isfinite(float(v)) and v > 0]
    na, nb = len(a), len(b)
    threshold = max(MIN_EFFECT, _cv(a), _cv(b))

    def result(
        figures: tuple[float | None, float | None, float | None, float | None, float | None],
        verdict: Verdict,
        why: str,
    ) -> Comparison:
        """figures: ratio, CI low, CI high, Welch's p, Mann-Whitney's p."""
        return Comparison(na, nb, *figures, threshold, verdict, why, higher_is_better)

    too_few = f"no verdict: n={na} vs {nb}; a verdict needs at least {MIN_N_VERDICT} "
    too_few += "repetitions per side"
    if na == 0 or nb == 0:
        return result((None,) * 5, Verdict.NONE, f"nothing to compare (n={na} vs {nb})")
    if na < 2 or nb < 2:
        ratio = statistics.fmean(b) / statistics.fmean(a)
        return result((ratio, None, None, None, None), Verdict.NONE, too_few)
    ratio, lo_, hi_, p_ = welch_log(a, b)
    lo, hi = (None, None) if math.isnan(lo_) else (lo_, hi_)
    p: float | None = None if math.isnan(p_) else p_
    mw = None
    if na >= MIN_N_MANN_WHITNEY and nb >= MIN_N_MANN_WHITNEY:
        from scipy import stats as sps

        mw = float(sps.mannwhitneyu(a, b, alternative="two-sided").pvalue)
    if na < MIN_N_VERDICT or nb < MIN_N_VERDICT:
        return result((ratio, lo, hi, p, mw), Verdict.NONE, too_few)
    if p is None:
        return result(
            (ratio, None, None, None, mw),
            Verdict.NONE,
            f"no verdict: every repetition gave the same value on each side (n={na} vs {nb}): "
            "the figure is quantised (a histogram bucket), there is no spread to test against",
        )
    effect = abs(ratio - 1)
    if p < ALPHA and effect > threshold:
        up = ratio > 1
        verdict = Verdict.BETTER if up == higher_is_better else Verdict.WORSE
        why = f"p={p:.3g} < {ALPHA}, difference {effect * 100:.1f}% > {threshold * 100:.1f}%"
        return result((ratio, lo, hi, p, mw), verdict, why)
    why = (
        f"p={p:.2g}"
        if p >= ALPHA
        else f"difference {effect * 100:.1f}% within the noise ({threshold * 100:.1f}%)"
    )
    return result(
        (ratio, lo, hi, p, mw), Verdict.SAME, f"no significant difference (n={na} vs {nb}; {why})"
    )


def family_wise(comparisons: Sequence[Comparison | None]) -> list[Comparison | None]:
    """The comparisons of one family (every cell of a group against its baseline) at a
    family-wise level ALPHA: Holm's step-down adjustment of their p-values (each the
    largest of (m - j + 1) p_(j) over the j-th smallest and those before it), a verdict
    of faster or slower kept only where the adjusted p is below ALPHA. With one
    comparison nothing changes. Holm controls the chance of any false verdict in the
    family at ALPHA whatever the dependence between the comparisons (they share the
    baseline)."""
    tested = [i for i, c in enumerate(comparisons) if c is not None and c.p_value is not None]
    m = len(tested)
    out = list(comparisons)
    if m < 2:
        return out
    order = sorted(tested, key=lambda i: comparisons[i].p_value or 0.0)  # type: ignore[union-attr]
    running = 0.0
    for rank, i in enumerate(order):
        c = comparisons[i]
        assert c is not None and c.p_value is not None
        running = max(running, min(1.0, (m - rank) * c.p_value))
        verdict, reason = c.verdict, c.reason
        if c.verdict in (Verdict.BETTER, Verdict.WORSE) and running >= ALPHA:
            verdict = Verdict.SAME
            reason = (
                f"no significant difference (n={c.n_base} vs {c.n_other}; p={c.p_value:.2g}, "
                f"{running:.2g} after Holm's correction for {m} comparisons)"
            )
        out[i] = dataclasses.replace(
            c, verdict=verdict, reason=reason, adjusted_p=running, family=m
        )
    return out


def combine_blocks(ratios: Sequence[float]) -> tuple[float, float, float] | None:
    """Blocks (hosts) each giving a ratio: their geometric mean with a 95% t interval."""
    vals = [r for r in ratios if r > 0 and math.isfinite(r)]
    if not vals:
        return None
    logs = np.log(vals)
    centre = float(logs.mean())
    if len(vals) < 2:
        return math.exp(centre), math.nan, math.nan
    half = t_quantile(0.975, len(vals) - 1) * float(logs.std(ddof=1)) / math.sqrt(len(vals))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)
