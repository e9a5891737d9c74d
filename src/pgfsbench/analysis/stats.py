"""Statistics over repetitions (pure): the centre, the spread, and a 95% confidence
interval of the mean, so that a number is never shown without how far to trust it.

The interval is a t interval on the logarithm of the values (throughputs and latencies are
ratios-scaled and skewed: the log makes them symmetric, and its interval is one of the
geometric mean), and a bootstrap of the mean when there are 5 values or more.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_MIN_N = 5
BOOTSTRAP_RESAMPLES = 4000


@dataclass(frozen=True)
class Estimate:
    """What the repetitions of one cell say about one figure."""

    n: int
    median: float
    low: float  # the smallest value
    high: float  # the largest value
    mean: float
    cv: float | None  # coefficient of variation (stdev / mean); None with one value
    ci_low: float | None  # 95% confidence interval of the mean; None with one value
    ci_high: float | None
    method: str  # "t on log", "t", "bootstrap" or "single value"
    # the geometric mean and its t interval on log values: what `compare` tests (its ratio
    # is one of geometric means); None when a value is not positive
    gmean: float | None = None
    gci_low: float | None = None
    gci_high: float | None = None

    @property
    def rel_range(self) -> float:
        """(max - min) / median: how much the repetitions disagree."""
        return (self.high - self.low) / self.median if self.median else 0.0

    @property
    def ci_half_pct(self) -> float | None:
        """Half the interval's width, in % of the mean."""
        if self.ci_low is None or self.ci_high is None or not self.mean:
            return None
        return (self.ci_high - self.ci_low) / 2 / abs(self.mean) * 100


def _finite(values: Iterable[float | None]) -> list[float]:
    return [float(v) for v in values if v is not None and math.isfinite(float(v))]


def _seed(vals: list[float]) -> int:
    """A seed from the values themselves: the same data gives the same interval."""
    return int(abs(hash(tuple(round(v, 9) for v in vals)))) % (2**32)


def t_quantile(q: float, df: float) -> float:
    """Student's t quantile: scipy.special's inverse of the t distribution function (the
    same value as scipy.stats.t.ppf; scipy.stats alone takes over a second to import, and
    every command that summarises pays it)."""
    from scipy import special

    return float(special.stdtrit(df, q))


def t_two_sided_p(t: float, df: float) -> float:
    """P(|T| >= |t|) for Student's t with ``df`` degrees of freedom (= 2 t.sf(|t|, df))."""
    from scipy import special

    return float(2 * special.stdtr(df, -abs(t)))


@dataclass(frozen=True)
class Welch:
    """mean(b) - mean(a), its standard error from each side's own variance, and the
    Welch-Satterthwaite degrees of freedom (0 when there is no spread at all)."""

    d: float
    se: float
    df: float


def welch(a: Sequence[float], b: Sequence[float]) -> Welch:
    """Welch's difference of two samples (each of 2 values or more): the one place
    pgfsbench computes it (compare's fixed-sample test, the confidence sequences)."""
    na, nb = len(a), len(b)
    ma, mb = statistics.fmean(a), statistics.fmean(b)
    va = sum((x - ma) ** 2 for x in a) / (na - 1) / na
    vb = sum((x - mb) ** 2 for x in b) / (nb - 1) / nb
    se2 = va + vb
    if se2 <= 0:
        return Welch(mb - ma, 0.0, 0.0)
    df = se2 * se2 / (va * va / (na - 1) + vb * vb / (nb - 1))
    return Welch(mb - ma, math.sqrt(se2), df)


def t_interval_log(vals: list[float], level: float = 0.95) -> tuple[float, float]:
    logs = np.log(vals)
    n = len(vals)
    half = t_quantile((1 + level) / 2, n - 1) * float(logs.std(ddof=1)) / math.sqrt(n)
    centre = float(logs.mean())
    return math.exp(centre - half), math.exp(centre + half)


def t_interval(vals: list[float], level: float = 0.95) -> tuple[float, float]:
    arr = np.array(vals)
    n = len(vals)
    half = t_quantile((1 + level) / 2, n - 1) * float(arr.std(ddof=1)) / math.sqrt(n)
    return float(arr.mean()) - half, float(arr.mean()) + half


def bootstrap_interval(vals: list[float], level: float = 0.95) -> tuple[float, float]:
    rng = np.random.default_rng(_seed(vals))
    arr = np.array(vals)
    means = rng.choice(arr, size=(BOOTSTRAP_RESAMPLES, len(arr)), replace=True).mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


SIGNED_RANK_EXACT_MAX_N = 300  # above, the normal approximation (error < 1 rank)


def signed_rank_critical(n: int, level: float = 0.95) -> int | None:
    """The largest k with P(W <= k) <= (1 - level) / 2, W being the Wilcoxon signed-rank
    statistic of n values with no effect: exact up to SIGNED_RANK_EXACT_MAX_N (the
    distribution of the sum of a random subset of 1..n, built one rank at a time), the
    normal approximation with continuity correction above. None when n is too small for
    this level (below 6 at 95%: even W = 0 is too likely)."""
    tail = (1 - level) / 2
    if n > SIGNED_RANK_EXACT_MAX_N:
        from scipy import special

        mean, sd = n * (n + 1) / 4, math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        k = math.floor(mean - 0.5 + sd * float(special.ndtri(tail)))
        return k if k >= 0 else None
    prob = np.zeros(n * (n + 1) // 2 + 1)
    prob[0] = 1.0
    for rank in range(1, n + 1):  # each rank in or out of the positive set, 1/2 each
        shifted = np.zeros_like(prob)
        shifted[rank:] = prob[:-rank]
        prob = (prob + shifted) / 2
    below = np.nonzero(np.cumsum(prob) <= tail * (1 + 1e-12))[0]
    return int(below[-1]) if below.size else None


def hodges_lehmann(
    vals: list[float], level: float = 0.95
) -> tuple[float, float | None, float | None]:
    """The Hodges-Lehmann estimate of the centre of paired differences (the median of the
    Walsh averages (x_i + x_j) / 2, i <= j) with its distribution-free confidence interval
    (the Walsh averages at the Wilcoxon signed-rank critical value: the shifts the
    signed-rank test would not reject). A few outlying values barely move it, where they
    drag a mean and widen its t interval; on well-behaved data both agree. No interval
    when there are too few values for the level."""
    arr = np.asarray(vals, dtype=float)
    i, j = np.triu_indices(arr.size)
    walsh = np.sort((arr[i] + arr[j]) / 2)
    centre = float(np.median(walsh))
    k = signed_rank_critical(arr.size, level)
    if k is None:
        return centre, None, None
    return centre, float(walsh[k]), float(walsh[walsh.size - 1 - k])


def estimate(values: Iterable[float | None]) -> Estimate | None:
    vals = _finite(values)
    if not vals:
        return None
    n = len(vals)
    mean = statistics.fmean(vals)
    median = statistics.median(vals)
    positive = min(vals) > 0
    gmean = math.exp(statistics.fmean(math.log(v) for v in vals)) if positive else None
    if n == 1:
        return Estimate(1, median, vals[0], vals[0], mean, None, None, None, "single value", gmean)
    sd = statistics.stdev(vals)
    cv = sd / mean if mean else None
    if n >= BOOTSTRAP_MIN_N:
        lo, hi = bootstrap_interval(vals)
        method = "bootstrap"
    elif min(vals) > 0:
        lo, hi = t_interval_log(vals)
        method = "t on log"
    else:
        lo, hi = t_interval(vals)
        method = "t"
    glo, ghi = t_interval_log(vals) if positive else (None, None)
    return Estimate(n, median, min(vals), max(vals), mean, cv, lo, hi, method, gmean, glo, ghi)
