"""Is B faster than A? A ratio with its interval, and a verdict that holds at its stated level
for the noise storage really has (pure).

The estimate is the ratio of geometric means (Welch's difference of mean logs). Its
interval uses Welch's standard error (each side's own variance) with Hsu's degrees of
freedom, min(n_a, n_b) - 1: Welch-Satterthwaite's are too many when one side is far
noisier than the other and has few runs (at 3 vs 3 with a 5x spread it called identical
cells faster or slower in 8% of simulated families of 4 comparisons, against 2% with
Hsu's), and Hsu's keep the interval's level for normal runs whatever their spreads.

A family (a group's cells against its baseline) is judged at once: each interval at level
TEST_ALPHA / m (Bonferroni: valid whatever the comparisons share), the verdict read from
the interval against a practical margin m (``equivalence_margin``, 2% unless the spec says):

- **faster** / **slower**: the interval lies above / below 0;
- **equivalent within ±m**: the interval lies inside ±m;
- **undecided**: too noisy to tell (the interval straddles 0 and reaches past ±m);
- **no verdict**: fewer than 3 runs a side, no spread at all, or runs of more than one shape.

Runs of more than one shape: when each run says how many checkpoints fell in its window
(its stratum), the sides are compared only where they share a stratum. One stratum on
both sides: compared there, and said ("in windows of 1 whole checkpoint cycle"); several:
each shared stratum compared at the family's level divided by their number, and a verdict
only when every stratum either side has was compared and all agree (faster with and
without a checkpoint in the window: faster whatever their mix). A mixture compared as one
sample is what made identical cells "slower" in 30% of simulated campaigns.

Runs that do not say their stratum (no server log read, an older result): a sample that
missed the slow mode looks exactly like a faster, steadier cell, so each side's interval
is widened, on the side such a mode would move it, by what a slow mode its runs may have
missed could shift its mean log (analysis/hidden.py: valid for a slow mode of any share
and of a depth up to 30% or the deepest its runs show, at one point of the 5%). Only
large differences are decided then, and the words say why.

The tests run at 4% (TEST_ALPHA) while the words say 95%: one point is left for the
approximations (t intervals on runs that are not normal), and the simulated family-wise
rates (bench/sequential_verdicts.py, docs/validation) stay within 5% at the upper end of
their 95% intervals in every world measured.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from pgfsbench.analysis.hidden import depth as hidden_depth
from pgfsbench.analysis.hidden import widen
from pgfsbench.analysis.hidden import words as hidden_words
from pgfsbench.analysis.stats import t_quantile, t_two_sided_p, welch

MIN_N_VERDICT = 3
MARGIN = 0.02  # the practical margin of "equivalent" unless the spec says (equivalence_margin)
ALPHA = 0.05  # the family-wise level the words state
TEST_ALPHA = 0.04  # the level the tests run at (see the module)


class Verdict(StrEnum):
    BETTER = "better"  # faster for throughput, lower for latency
    WORSE = "worse"
    EQUIVALENT = "equivalent"  # the interval within ±margin
    UNDECIDED = "undecided"  # too noisy to tell
    NONE = "no verdict"  # too few runs, no spread, not one shape

    def mark(self) -> str:
        return {
            "better": "▲",
            "worse": "▼",
            "equivalent": "≈",
            "undecided": "?",
            "no verdict": "–",
        }[self.value]

    @property
    def decided(self) -> bool:
        return self in (Verdict.BETTER, Verdict.WORSE)


@dataclass(frozen=True)
class Comparison:
    """B against the baseline A, for one figure."""

    n_base: int
    n_other: int
    ratio: float | None  # B / A (geometric means)
    ci_low: float | None  # the interval at the family's level (see `level`)
    ci_high: float | None
    p_value: float | None  # Welch's t with Hsu's df, two-sided, for this comparison alone
    margin: float  # m of "equivalent within ±m"
    verdict: Verdict
    reason: str
    higher_is_better: bool = True
    # the family the interval and verdict are taken in (Bonferroni over its comparisons)
    adjusted_p: float | None = None
    family: int = 1
    # "welch": a fixed-sample test; "sequence": the campaign's anytime-valid confidence
    # sequence settled it (analysis/sequential.py), valid however the campaign stopped
    method: str = "welch"
    # what the interval is made of, to take it again at another family's level
    d: float | None = None
    se: float | None = None
    df: float | None = None
    level: float = 1 - TEST_ALPHA  # the interval's two-sided coverage
    # what the verdict is about: the windows measured, or the stratum they were compared in
    estimand: str = ""
    # compared stratum by stratum (runs of more than one shape): each stratum's result,
    # and how many runs of each side fell in each
    strata: tuple[tuple[str, Comparison], ...] = ()
    mixture: str = ""
    # the runs do not record their checkpoints: the interval is widened for a slow mode
    # they may have missed, this deep (log scale; analysis/hidden.py). None: not widened
    hidden_depth: float | None = None

    @property
    def change_pct(self) -> float | None:
        return None if self.ratio is None else (self.ratio - 1) * 100

    def interval_words(self) -> str:
        if self.ci_low is None or self.ci_high is None:
            return ""
        return f"[{(self.ci_low - 1) * 100:+.1f}%, {(self.ci_high - 1) * 100:+.1f}%]"

    def verdict_words(self) -> str:
        """'faster' / 'equivalent within ±2.0%' / 'undecided: too noisy to tell' / why none."""
        if self.method == "sequence":
            return self.reason
        if self.verdict.decided:
            better = self.verdict is Verdict.BETTER
            if self.higher_is_better:
                return "faster" if better else "slower"
            return "lower" if better else "higher"
        if self.verdict is Verdict.EQUIVALENT:
            return f"equivalent within ±{self.margin * 100:.1f}%"
        return self.reason

    def words(self) -> str:
        """'+6.2% faster [+3.1%, +9.4%] (n=5 vs 5, 95% family-wise)' and the like."""
        if self.ratio is None:
            return self.reason
        ci = self.interval_words()
        base = f"{(self.ratio - 1) * 100:+.1f}%" + (f" {ci}" if ci else "")
        if self.method == "sequence":  # settled by a confidence sequence: its own words
            return f"{base} {self.reason}"
        where = f", {self.estimand}" if self.estimand else ""
        if self.verdict.decided or self.verdict is Verdict.EQUIVALENT:
            family = f", {self.family} comparisons" if self.family > 1 else ""
            hidden = (
                ", allowing for a slow mode the runs may have missed"
                if self.hidden_depth is not None
                else ""
            )
            return (
                f"{base} {self.verdict_words()} "
                f"(n={self.n_base} vs {self.n_other}, 95% family-wise{family}{hidden}{where})"
            )
        return f"{base}: {self.reason}"


def _positive(values: Sequence[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v)) and v > 0]


def _judge(
    d: float,
    se: float,
    df: float,
    family: int,
    margin: float,
    hidden: tuple[float, int, int, bool] | None = None,
) -> tuple[float, float, Verdict, float]:
    """The interval of d at the family's level, its verdict (higher is better) and the
    level's coverage. ``hidden``: (depth, n_base, n_other, higher_is_better) when the
    runs do not record their checkpoints (the interval widened: analysis/hidden.py)."""
    level = TEST_ALPHA / max(1, family)
    half = t_quantile(1 - level / 2, df) * se
    lo, hi = d - half, d + half
    if hidden is not None:
        depth, n_base, n_other, higher = hidden
        lo, hi = widen(
            lo,
            hi,
            n_base=n_base,
            n_other=n_other,
            d=depth,
            family=max(1, family),
            higher_is_better=higher,
        )
    edge = math.log1p(margin)
    if lo > 0:
        verdict = Verdict.BETTER
    elif hi < 0:
        verdict = Verdict.WORSE
    elif -edge < lo and hi < edge:
        verdict = Verdict.EQUIVALENT
    else:
        verdict = Verdict.UNDECIDED
    return lo, hi, verdict, 1 - level


def _oriented(verdict: Verdict, higher_is_better: bool) -> Verdict:
    if higher_is_better or not verdict.decided:
        return verdict
    return Verdict.WORSE if verdict is Verdict.BETTER else Verdict.BETTER


def compare(
    base: Sequence[float | None],
    other: Sequence[float | None],
    *,
    higher_is_better: bool = True,
    margin: float = MARGIN,
    family: int = 1,
    strata: tuple[Sequence[str | None], Sequence[str | None]] | None = None,
) -> Comparison:
    """B against A at the level of a family of ``family`` comparisons (see the module).
    ``strata``: each run's stratum (its checkpoints in the window; None: not recorded),
    aligned with ``base`` and ``other``."""
    if strata is not None:
        labels_a = [s for v, s in zip(base, strata[0], strict=False) if _positive([v])]
        labels_b = [s for v, s in zip(other, strata[1], strict=False) if _positive([v])]
        kinds = set(labels_a) | set(labels_b)
        if kinds and None not in kinds:
            named = sorted(str(k) for k in kinds)
            return _stratified(base, other, strata, higher_is_better, margin, family, named)
        # asked and not recorded: a slow mode the runs missed is allowed for
        return _compare(base, other, higher_is_better, margin, family, hidden=bool(kinds))
    return _compare(base, other, higher_is_better, margin, family)


def _compare(
    base: Sequence[float | None],
    other: Sequence[float | None],
    higher_is_better: bool,
    margin: float,
    family: int,
    estimand: str = "",
    hidden: bool = False,
) -> Comparison:
    a, b = _positive(base), _positive(other)
    deep = hidden_depth(a, b) if hidden else None
    na, nb = len(a), len(b)

    def result(
        ratio: float | None,
        verdict: Verdict,
        why: str,
        *,
        d: float | None = None,
        se: float | None = None,
        df: float | None = None,
        ci: tuple[float, float] | None = None,
        p: float | None = None,
        level: float = 1 - TEST_ALPHA,
    ) -> Comparison:
        return Comparison(
            na,
            nb,
            ratio,
            math.exp(ci[0]) if ci else None,
            math.exp(ci[1]) if ci else None,
            p,
            margin,
            verdict,
            why,
            higher_is_better,
            adjusted_p=None if p is None else min(1.0, p * family),
            family=family,
            d=d,
            se=se,
            df=df,
            level=level,
            estimand=estimand,
            hidden_depth=deep,
        )

    if na == 0 or nb == 0:
        return result(None, Verdict.NONE, f"no verdict: nothing to compare (n={na} vs {nb})")
    la, lb = [math.log(v) for v in a], [math.log(v) for v in b]
    d = statistics.fmean(lb) - statistics.fmean(la)
    too_few = f"no verdict: n={na} vs {nb}; a verdict needs at least {MIN_N_VERDICT} runs a side"
    if na < MIN_N_VERDICT or nb < MIN_N_VERDICT:
        return result(math.exp(d), Verdict.NONE, too_few)
    w = welch(la, lb)
    if w.se <= 0:
        return result(
            math.exp(d),
            Verdict.NONE,
            f"no verdict: every run gave the same value on each side (n={na} vs {nb}): the "
            "figure is quantised (a histogram bucket), there is no spread to test against",
        )
    df = min(na, nb) - 1  # Hsu's (see the module)
    lo, hi, verdict, level = _judge(
        d, w.se, df, family, margin, None if deep is None else (deep, na, nb, higher_is_better)
    )
    p = t_two_sided_p(d / w.se, df)
    verdict = _oriented(verdict, higher_is_better)
    why = _why(verdict, margin, deep, na, nb, family)
    return result(math.exp(d), verdict, why, d=d, se=w.se, df=df, ci=(lo, hi), p=p, level=level)


def stratum_words(label: str) -> str:
    """A stratum's name as the words say it: 'windows without a checkpoint'."""
    if label == "0":
        return "windows without a checkpoint"
    if label == "1+":
        return "windows with a checkpoint"
    if label == "cycles":
        return "windows of whole checkpoint cycles"
    return f"windows with {label} checkpoint{'s' if label != '1' else ''}"


def _stratified(
    base: Sequence[float | None],
    other: Sequence[float | None],
    strata: tuple[Sequence[str | None], Sequence[str | None]],
    higher_is_better: bool,
    margin: float,
    family: int,
    kinds: list[str],
) -> Comparison:
    """Compared where the sides share a stratum (see the module)."""

    def of(values: Sequence[float | None], labels: Sequence[str | None], k: str) -> list[float]:
        return [float(v) for v, s in zip(values, labels, strict=False) if s == k and v]

    labels = kinds
    if len(labels) == 1:
        # one shape: whole cycles (said with the runs' estimand), or one stratum (said here)
        where = "" if labels[0] == "cycles" else f"in {stratum_words(labels[0])}"
        return _compare(base, other, higher_is_better, margin, family, estimand=where)
    parts = tuple(
        (
            k,
            _compare(
                of(base, strata[0], k),
                of(other, strata[1], k),
                higher_is_better,
                margin,
                family * len(labels),
                f"in {stratum_words(k)}",
            ),
        )
        for k in labels
    )
    shape = ", ".join(
        f"{sum(1 for s in strata[0] if s == k)} vs {sum(1 for s in strata[1] if s == k)} runs "
        f"in {stratum_words(k)}"
        for k in labels
    )
    pooled = _compare(base, other, higher_is_better, margin, family)
    return _from_parts(dataclasses.replace(pooled, mixture=shape), parts)


def _from_parts(pooled: Comparison, parts: tuple[tuple[str, Comparison], ...]) -> Comparison:
    """A mixed comparison's verdict from its strata: decided only when every stratum was
    compared and all agree (the same whatever their mix), else none, said with the shape."""
    verdicts = {c.verdict for _, c in parts}
    if len(verdicts) == 1 and (verdict := next(iter(verdicts))).decided:
        return dataclasses.replace(
            pooled,
            verdict=verdict,
            reason=f"{parts[0][1].verdict_words()} in every stratum",
            estimand="in windows with and without a checkpoint alike",
            strata=parts,
        )
    decided = [
        f"{c.verdict_words()} {k_words}"
        for k, c in parts
        if c.verdict.decided
        for k_words in [f"in {stratum_words(k)}"]
    ]
    why = (
        f"no verdict: the runs are not of one shape ({pooled.mixture})"
        + (f"; {'; '.join(decided)}" if decided else "")
        + ": measure whole checkpoint cycles (cycles = N) for one answer"
    )
    return dataclasses.replace(pooled, verdict=Verdict.NONE, reason=why, strata=parts)


def in_family(c: Comparison | None, family: int) -> Comparison | None:
    """The comparison taken again as one of ``family`` (its interval at the family's
    level, its verdict from that interval; a mixed one's strata likewise)."""
    if c is None or c.method != "welch":
        return c
    again = (
        _again(c, family)
        if c.d is not None and c.se is not None and c.df is not None
        else (dataclasses.replace(c, family=family))
    )
    if not c.strata:
        return again
    parts = tuple((k, in_family(p, family * len(c.strata)) or p) for k, p in c.strata)
    return _from_parts(again, parts)


def _again(c: Comparison, family: int) -> Comparison:
    assert c.d is not None and c.se is not None and c.df is not None
    deep = c.hidden_depth
    lo, hi, verdict, level = _judge(
        c.d,
        c.se,
        c.df,
        family,
        c.margin,
        None if deep is None else (deep, c.n_base, c.n_other, c.higher_is_better),
    )
    verdict = _oriented(verdict, c.higher_is_better)
    why = _why(verdict, c.margin, deep, c.n_base, c.n_other, family)
    return dataclasses.replace(
        c,
        ci_low=math.exp(lo),
        ci_high=math.exp(hi),
        verdict=verdict,
        reason=why,
        family=family,
        level=level,
        adjusted_p=None if c.p_value is None else min(1.0, c.p_value * family),
    )


def _why(verdict: Verdict, margin: float, deep: float | None, na: int, nb: int, family: int) -> str:
    """The reason of a verdict that its interval alone does not say."""
    if verdict is Verdict.EQUIVALENT:
        return f"equivalent within ±{margin * 100:.1f}%"
    if verdict is not Verdict.UNDECIDED:
        return ""
    if deep is not None:
        return f"undecided: {hidden_words(na, nb, deep, max(1, family))}"
    return "undecided: too noisy to tell"


def family_wise(comparisons: Sequence[Comparison | None]) -> list[Comparison | None]:
    """The comparisons of one family (every cell of a group against its baseline) judged
    together: each interval at TEST_ALPHA / m for the m comparisons that have one
    (Bonferroni: the chance of any false verdict in the family stays within the level,
    whatever the comparisons share; they share the baseline)."""
    m = sum(1 for c in comparisons if c is not None and c.ratio is not None)
    if m < 2:
        return list(comparisons)
    return [in_family(c, m) for c in comparisons]


def combine_blocks(ratios: Sequence[float]) -> tuple[float, float, float] | None:
    """Blocks (hosts) each giving a ratio: their geometric mean with a 95% t interval."""
    vals = [r for r in ratios if r > 0 and math.isfinite(r)]
    if not vals:
        return None
    logs = [math.log(v) for v in vals]
    centre = statistics.fmean(logs)
    if len(vals) < 2:
        return math.exp(centre), math.nan, math.nan
    half = t_quantile(0.975, len(vals) - 1) * statistics.stdev(logs) / math.sqrt(len(vals))
    return math.exp(centre), math.exp(centre - half), math.exp(centre + half)
