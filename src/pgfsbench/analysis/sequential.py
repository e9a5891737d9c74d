"""Verdicts that stay true however a campaign stops: anytime-valid confidence sequences for
each cell against its group's baseline (pure).

`repetitions = "auto"` looks at the data after every round and stops when it is settled. A
fixed-sample test looked at that way finds "differences" between identical cells far more
often than its 5% (each look is another chance). A confidence sequence is an interval that
covers the true difference at every look at once, with probability 1 - alpha, so that a
campaign may stop whenever it likes (Ville's inequality).

The model, per comparable group (a baseline b, cells c = 1..k): y = ln(throughput) of each
undisturbed run. For cell c: d = mean(y_c) - mean(y_b), n_eff = 1 / (1/n_c + 1/n_b),
t(delta) = (d - delta) / se with Welch's standard error se = sqrt(s_c²/n_c + s_b²/n_b),
each side's own variance, and nu its Welch-Satterthwaite degrees of freedom. (A variance
pooled over the group, as the linear model has it, is exact only when every cell is as
noisy as the others; storage cells rarely are, and one noisy cell among steady ones was
then called faster or slower in 17-46% of simulated matrices of identical cells:
bench/sequential_verdicts.py.) The e-value against H0: difference = delta is the Bayes
factor of the t test with a normal prior on the standardised effect (Gönen, Johnson, Lu
and Westfall 2005; Lindon et al. 2022, "anytime-valid linear models"):

    E(delta) = sqrt(r) * ((1 + t²/nu) / (1 + r t²/nu)) ** ((nu + 1) / 2),  r = 1 / (1 + n_eff tau²)

averaged over a few prior scales tau² (a mixture of e-values is an e-value: no effect size
is guessed). The sequence is {delta : E(delta) < k / alpha} (Bonferroni over the group's k
comparisons: valid whatever their dependence, at any stopping time), intersected over the
looks so far. A comparison ends as **faster** (the interval above 0), **slower** (below),
**equivalent within ±m** (inside ±ln(1 + m), m = max(2%, the measured noise of the
comparison's two sides)), or is
**unsettled** when the campaign's budget ends first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

ALPHA = 0.05  # family-wise, over a group's comparisons with its baseline
TAU2 = (0.25, 1.0, 4.0, 16.0, 64.0)  # prior scales of the standardised effect, mixed
MIN_RUNS = 3  # runs of a cell (and of the baseline) before any verdict
MIN_MARGIN = 0.02  # an equivalence margin is never below 2%
_BISECT = 40  # halvings of the search interval (far below any printed digit)


class Settled(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    UNSETTLED = "unsettled"


@dataclass(frozen=True)
class Sequential:
    """One cell against its baseline, as the confidence sequence says after the runs seen."""

    cell: str
    n: int
    n_base: int
    ratio: float  # exp(d): the ratio of geometric means, cell / baseline
    low: float | None  # the interval of the ratio (None: not yet finite)
    high: float | None
    margin: float  # m of "equivalent within ±m"
    verdict: Settled
    alpha: float  # the level of this comparison (alpha / k)

    def words(self) -> str:
        ci = (
            f" [{(self.low - 1) * 100:+.1f}%, {(self.high - 1) * 100:+.1f}%]"
            if self.low is not None and self.high is not None
            else " [interval not yet finite]"
        )
        base = f"{(self.ratio - 1) * 100:+.1f}%{ci}"
        what = {
            Settled.FASTER: "faster",
            Settled.SLOWER: "slower",
            Settled.EQUIVALENT: f"equivalent within ±{self.margin * 100:.1f}%",
            Settled.UNSETTLED: "unsettled",
        }[self.verdict]
        return f"{base} {what} (anytime-valid, n={self.n_base} vs {self.n})"


def e_value(t: float, nu: float, n_eff: float, tau2s: Sequence[float] = TAU2) -> float:
    """The mixture e-value of a t statistic (see the module)."""
    total = 0.0
    q = t * t / nu
    for tau2 in tau2s:
        r = 1.0 / (1.0 + n_eff * tau2)
        total += math.sqrt(r) * math.exp((nu + 1) / 2 * (math.log1p(q) - math.log1p(r * q)))
    return total / len(tau2s)


def interval(
    d: float, se: float, nu: float, n_eff: float, alpha: float
) -> tuple[float, float] | None:
    """The deltas whose e-value stays below 1/alpha: d ± h, h found by bisection on the
    t scale (the e-value grows with |t|); None when no finite h exists (the e-value's
    limit as |t| grows is below 1/alpha: too few runs)."""
    if se <= 0 or nu < 1:
        return None
    limit = sum(
        math.sqrt(r) * r ** (-(nu + 1) / 2) for r in (1.0 / (1.0 + n_eff * tau2) for tau2 in TAU2)
    ) / len(TAU2)
    if limit <= 1 / alpha:
        return None
    lo, hi = 0.0, 1.0
    while e_value(hi, nu, n_eff) < 1 / alpha:
        hi *= 2
        if hi > 1e12:
            return None
    for _ in range(_BISECT):
        mid = (lo + hi) / 2
        if e_value(mid, nu, n_eff) < 1 / alpha:
            lo = mid
        else:
            hi = mid
    h = hi * se
    return d - h, d + h


def _mean(x: Sequence[float]) -> float:
    return sum(x) / len(x)


BASELINE = ""  # the baseline's key where cells and the baseline are counted together


def group_verdicts(
    baseline: Sequence[float],
    cells: Mapping[str, Sequence[float]],
    *,
    alpha: float = ALPHA,
    min_margin: float = MIN_MARGIN,
    before: Mapping[str, Sequential] | None = None,
) -> dict[str, Sequential]:
    """Each cell against the baseline, from all the throughputs so far. ``before``: the
    verdicts of the campaign's previous look; each interval is intersected with the one
    before (the running intersection: a verdict once reached stays)."""
    logs_b = [math.log(v) for v in baseline if v > 0]
    logs = {c: [math.log(v) for v in vals if v > 0] for c, vals in cells.items()}
    level = alpha / max(1, len(logs))
    out: dict[str, Sequential] = {}
    for cell, y in logs.items():
        prior = (before or {}).get(cell)
        lo, hi = -math.inf, math.inf
        if prior is not None and prior.low is not None and prior.high is not None:
            lo, hi = math.log(prior.low), math.log(prior.high)
        d = _mean(y) - _mean(logs_b) if y and logs_b else 0.0
        margin = noise_margin(logs_b, y, min_margin)
        if len(y) >= MIN_RUNS and len(logs_b) >= MIN_RUNS:
            n_eff = 1.0 / (1.0 / len(y) + 1.0 / len(logs_b))
            se, nu = welch(logs_b, y)
            found = interval(d, se, nu, n_eff, level)
            if found is not None:
                lo, hi = max(lo, found[0]), min(hi, found[1])
        finite = math.isfinite(lo) and math.isfinite(hi)
        if finite and lo > hi:  # disjoint looks (a chance of at most alpha): the last
            lo = hi = d
        out[cell] = Sequential(
            cell,
            len(y),
            len(logs_b),
            math.exp(d),
            math.exp(lo) if finite else None,
            math.exp(hi) if finite else None,
            margin,
            _settle(lo, hi, margin) if finite else Settled.UNSETTLED,
            level,
        )
    return out


def _settle(lo: float, hi: float, margin: float) -> Settled:
    if lo > 0:
        return Settled.FASTER
    if hi < 0:
        return Settled.SLOWER
    edge = math.log1p(margin)
    if -edge < lo and hi < edge:
        return Settled.EQUIVALENT
    return Settled.UNSETTLED


def next_round(
    verdicts: Mapping[str, Sequential],
    counts: Mapping[str, int],
    baseline: str,
    most: int,
    spread: Mapping[str, float] | None = None,
) -> dict[str, int]:
    """How many runs each cell gets in the next round (none: the campaign is settled or
    at its limits). A cell with fewer than MIN_RUNS runs always gets one; an unsettled one
    gets one until it has ``most``; the baseline gets about √k while k comparisons are
    open (Dunnett's allocation), until it has ``most`` times that share. ``spread``: each
    cell's run-to-run sd of log throughput so far; a baseline noisier than the open cells
    gets more of the round, one steadier fewer (see ``baseline_share``), never past that
    limit."""
    open_cells = [
        c
        for c, v in verdicts.items()
        if counts.get(c, 0) < most and (v.verdict is Settled.UNSETTLED or v.n < MIN_RUNS)
    ]
    plan = dict.fromkeys(open_cells, 1)
    missing = [c for c in verdicts if counts.get(c, 0) < MIN_RUNS and c not in plan]
    plan.update(dict.fromkeys(missing, 1))
    if plan:
        limit = most * baseline_share(len(plan))
        spreads = [(spread or {}).get(c) for c in plan]
        share = baseline_share(
            len(plan),
            (spread or {}).get(baseline),
            [s for s in spreads if s is not None] if None not in spreads else [],
        )
        if counts.get(baseline, 0) < limit:
            plan[baseline] = min(share, limit - counts.get(baseline, 0))
    return plan


def spreads(data: Mapping[str, Sequence[float]]) -> dict[str, float]:
    """Each cell's run-to-run sd of log throughput, where it has MIN_RUNS runs or more."""
    out: dict[str, float] = {}
    for cell, values in data.items():
        logs = [math.log(v) for v in values if v > 0]
        if len(logs) >= MIN_RUNS:
            out[cell] = math.sqrt(_ss(logs) / (len(logs) - 1))
    return out


def noise_margin(a: Sequence[float], b: Sequence[float], least: float) -> float:
    """m of "equivalent within ±m": the comparison's measured noise (the run-to-run sd of
    its two sides, pooled, as a ratio), never below ``least``."""
    dof = max(0, len(a) - 1) + max(0, len(b) - 1)
    ss = (_ss(a) if len(a) >= 2 else 0.0) + (_ss(b) if len(b) >= 2 else 0.0)
    return max(least, math.expm1(math.sqrt(ss / dof))) if dof >= 1 else least


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """The standard error of mean(b) - mean(a) from each side's own variance, and its
    Welch-Satterthwaite degrees of freedom."""
    va, vb = _ss(a) / (len(a) - 1) / len(a), _ss(b) / (len(b) - 1) / len(b)
    se2 = va + vb
    if se2 <= 0:
        return 0.0, 0.0
    nu = se2 * se2 / (va * va / (len(a) - 1) + vb * vb / (len(b) - 1))
    return math.sqrt(se2), nu


def _ss(x: Sequence[float]) -> float:
    m = _mean(x)
    return sum((v - m) ** 2 for v in x)


SHARE_MOST = 3  # a noisy baseline's share of a round: at most this many times √k


def baseline_share(
    open_comparisons: int, base_sd: float | None = None, cell_sds: Sequence[float] = ()
) -> int:
    """Runs of the baseline in a round: about √k for k comparisons still open (Dunnett's
    optimal allocation n_0 / n = √k), at least one. Given the sds (log scale) of the
    baseline and of the open cells, √k times their ratio: the allocation that makes the
    comparisons' variances (s_0²/n_0 + s_c²/n_c) least for the runs made, the baseline's
    sd against the open cells' root mean square, the ratio kept within [1/3, 3]. The sds
    are the runs' spread, never their means: the allocation says nothing of which cell
    is faster."""
    root = math.sqrt(max(1, open_comparisons))
    if base_sd is not None and cell_sds and base_sd > 0:
        rms = math.sqrt(sum(s * s for s in cell_sds) / len(cell_sds))
        ratio = base_sd / rms if rms > 0 else SHARE_MOST
        root *= min(SHARE_MOST, max(1 / SHARE_MOST, ratio))
    return max(1, round(root))
