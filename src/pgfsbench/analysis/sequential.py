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
**equivalent within ±m** (inside ±ln(1 + m), m the spec's practical margin,
equivalence_margin: 2% unless it says), or is **unsettled** when the campaign's budget
ends first.

What this presumes, and what is done where it does not hold:
- runs of one cell are independent draws of one shape, near-normal on the log scale: a
  mixture (a checkpoint in some windows and not in others) is not. When each run says how
  many checkpoints fell in its window (its stratum), a comparison is followed stratum by
  stratum (each at the group's level divided by the strata a design has: one for whole
  checkpoint cycles, two for shorter windows) and settles only when every stratum seen is
  settled; if they settle apart, that is the answer (**mixed**). When the runs do not
  record their strata, each look's interval is widened for a slow mode they may have
  missed (analysis/hidden.py: valid at every look, for a mode of any share up to its
  depth); whole-cycle windows remove the mixture at the source;
- two looks whose intervals do not meet (a chance of at most alpha when the model holds)
  say the model does not hold: the comparison stays **unsettled** from then on, said so,
  never narrowed to a point;
- the level is TEST_ALPHA (4%), one point below the 5% the words state, for the
  approximations; bench/sequential_verdicts.py measures the family-wise rate in worlds of
  mixtures, unequal noise, drift, AR(1) runs, heavy tails and disturbed runs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from pgfsbench.analysis.hidden import depth as hidden_depth
from pgfsbench.analysis.hidden import widen
from pgfsbench.analysis.stats import welch

ALPHA = 0.05  # family-wise, over a group's comparisons with its baseline, as stated
TEST_ALPHA = 0.04  # the level the sequences run at (see the module)
TAU2 = (0.25, 1.0, 4.0, 16.0, 64.0)  # prior scales of the standardised effect, mixed
MIN_RUNS = 3  # runs of a cell (and of the baseline) before any verdict
MIN_MARGIN = 0.02  # the practical margin unless the spec says (equivalence_margin)
_BISECT = 40  # halvings of the search interval (far below any printed digit)
# the strata a design can have: whole cycles one (the planned count; others are marked and
# made again), shorter windows two (no checkpoint in the window, one or more)
STRATA_WITH_CYCLES = 1
STRATA_WITHOUT_CYCLES = 2


class Settled(StrEnum):
    FASTER = "faster"
    SLOWER = "slower"
    EQUIVALENT = "equivalent"
    MIXED = "mixed"  # settled apart in its strata: faster in one, slower in another
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
    # the looks' intervals stopped meeting: the runs do not follow the model (said, and
    # never settled from then on)
    failed: bool = False
    # followed stratum by stratum: each stratum's own sequence
    strata: tuple[tuple[str, Sequential], ...] = ()
    estimand: str = ""
    # the runs do not record their checkpoints: each look's interval allowed for a slow
    # mode they may have missed (analysis/hidden.py)
    hidden: bool = False

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
            Settled.MIXED: "mixed",
            Settled.UNSETTLED: "unsettled",
        }[self.verdict]
        if self.failed:
            what = (
                "unsettled: two looks disagreed beyond chance, so the runs do not follow the "
                "model (not one shape, or drifting)"
            )
        if self.hidden and self.verdict is not Settled.MIXED:
            what += (
                " (allowing for a slow mode the runs may have missed: they do not record "
                "the checkpoints in their windows)"
            )
        if self.strata:
            what += (
                " (" + "; ".join(f"{v.verdict} in {stratum_name(k)}" for k, v in self.strata) + ")"
            )
        where = f", {self.estimand}" if self.estimand else ""
        return f"{base} {what} (anytime-valid, n={self.n_base} vs {self.n}{where})"


def stratum_name(label: str) -> str:
    from pgfsbench.analysis.compare import stratum_words

    return stratum_words(label)


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
    alpha: float = TEST_ALPHA,
    min_margin: float = MIN_MARGIN,
    before: Mapping[str, Sequential] | None = None,
    strata: Mapping[str, Sequence[str | None]] | None = None,
    designed_strata: int = STRATA_WITHOUT_CYCLES,
) -> dict[str, Sequential]:
    """Each cell against the baseline, from all the throughputs so far. ``before``: the
    verdicts of the campaign's previous look; each interval is intersected with the one
    before (the running intersection: a verdict once reached stays). ``strata``: each
    run's stratum by cell (BASELINE for the baseline's), aligned with the throughputs;
    ``designed_strata``: how many strata the design can give (see the module)."""
    level = alpha / max(1, len(cells))
    out: dict[str, Sequential] = {}
    labels_b = list((strata or {}).get(BASELINE) or [])
    for cell, values in cells.items():
        labels_c = list((strata or {}).get(cell) or [])
        prior = (before or {}).get(cell)
        kinds = set(labels_b) | set(labels_c)
        if (
            strata is not None
            and kinds
            and None not in kinds
            and len(labels_b) == len(baseline)
            and len(labels_c) == len(values)
        ):
            out[cell] = _stratified(
                cell,
                baseline,
                values,
                labels_b,
                labels_c,
                level,
                min_margin,
                prior,
                designed_strata,
            )
        else:
            # the runs' strata asked and not recorded: a slow mode they missed is allowed for
            hidden = len(cells) if strata is not None and None in kinds else None
            out[cell] = _one(cell, baseline, values, level, min_margin, prior, hidden=hidden)
    return out


def _logs(values: Sequence[float]) -> list[float]:
    return [math.log(v) for v in values if v > 0]


def _one(
    cell: str,
    baseline: Sequence[float],
    values: Sequence[float],
    level: float,
    margin: float,
    prior: Sequential | None,
    estimand: str = "",
    hidden: int | None = None,
) -> Sequential:
    """One comparison's sequence after this look (see the module). ``hidden``: the
    family's size when the runs do not record their strata: each look's interval is
    widened for a slow mode the runs may have missed (analysis/hidden.py)."""
    logs_b, y = _logs(baseline), _logs(values)
    d = _mean(y) - _mean(logs_b) if y and logs_b else 0.0

    def make(lo: float | None, hi: float | None, verdict: Settled, failed: bool) -> Sequential:
        return Sequential(
            cell,
            len(y),
            len(logs_b),
            math.exp(d),
            math.exp(lo) if lo is not None else None,
            math.exp(hi) if hi is not None else None,
            margin,
            verdict,
            level,
            failed=failed,
            estimand=estimand,
            hidden=hidden is not None,
        )

    if prior is not None and prior.failed:
        return make(None, None, Settled.UNSETTLED, True)
    lo, hi = -math.inf, math.inf
    if prior is not None and prior.low is not None and prior.high is not None:
        lo, hi = math.log(prior.low), math.log(prior.high)
    if len(y) >= MIN_RUNS and len(logs_b) >= MIN_RUNS:
        n_eff = 1.0 / (1.0 / len(y) + 1.0 / len(logs_b))
        w = welch(logs_b, y)
        found = interval(d, w.se, w.df, n_eff, level)
        if found is not None and hidden is not None:
            found = widen(
                *found,
                n_base=len(logs_b),
                n_other=len(y),
                d=hidden_depth(baseline, values),
                family=hidden,
            )
        if found is not None:
            lo, hi = max(lo, found[0]), min(hi, found[1])
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return make(None, None, Settled.UNSETTLED, False)
    if lo > hi:  # disjoint looks: the model fails (a chance of at most alpha if it holds)
        return make(None, None, Settled.UNSETTLED, True)
    return make(lo, hi, _settle(lo, hi, margin), False)


def _stratified(
    cell: str,
    baseline: Sequence[float],
    values: Sequence[float],
    labels_b: Sequence[str | None],
    labels_c: Sequence[str | None],
    level: float,
    margin: float,
    prior: Sequential | None,
    designed: int,
) -> Sequential:
    """A comparison followed stratum by stratum, each at level / designed."""
    kinds = sorted({str(k) for k in [*labels_b, *labels_c]})
    before = dict(prior.strata) if prior is not None else {}
    parts = tuple(
        (
            k,
            _one(
                cell,
                [v for v, s in zip(baseline, labels_b, strict=True) if s == k],
                [v for v, s in zip(values, labels_c, strict=True) if s == k],
                level / max(designed, len(kinds)),
                margin,
                before.get(k),
                f"in {stratum_name(k)}",
            ),
        )
        for k in kinds
    )
    pooled = _one(cell, baseline, values, level, margin, None)
    settled = {v.verdict for _, v in parts}
    if len(parts) == 1:
        only = parts[0][1]
        return dataclasses.replace(
            only, n=pooled.n, n_base=pooled.n_base, ratio=only.ratio, estimand=only.estimand
        )
    if Settled.UNSETTLED in settled:
        verdict = Settled.UNSETTLED
    elif len(settled) == 1:
        verdict = next(iter(settled))
    else:
        verdict = Settled.MIXED
    return dataclasses.replace(
        pooled,
        low=None,
        high=None,
        verdict=verdict,
        strata=parts,
        estimand="stratum by stratum (checkpoints in the window)",
    )


def _settle(lo: float, hi: float, margin: float) -> Settled:
    """Faster, slower or equivalent within ±margin from the interval (log scale)."""
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
        spreads = [(spread or {}).get(c) for c in plan]
        share = baseline_share(
            len(plan),
            (spread or {}).get(baseline),
            [s for s in spreads if s is not None] if None not in spreads else [],
        )
        # the baseline's cap follows its noise as its share does: a noisy baseline may
        # make up to `most` times its larger share (a cap of most x √k kept a noisy ext4
        # at 8 runs whatever the budget)
        limit = most * share
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
