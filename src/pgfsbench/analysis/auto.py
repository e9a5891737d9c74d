"""`repetitions = "auto"`: the policy that decides, round after round, which cells run again
(pure; the engine gives it the runs made and makes the runs it asks for).

A cell is one identity throughout (its id: the runs of a cluster cell on two node types, or
with one failed Node read, are one cell's, never two groups that overwrite each other).
Only ok, undisturbed runs are evidence; each comparable group's cells are compared with its
baseline by their confidence sequences (analysis/sequential.py), stratum by stratum when
each run says how many checkpoints fell in its window. A cell alone in its group stops when
its own interval is within ci_target_pct. The budget's last round is cut to the runs that
fit, the cells with the fewest valid runs first; a cell whose runs are mostly disturbed
stops at twice its cap, said. bench/sequential_verdicts.py and analysis/simulate.py drive
this very code with synthetic runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pgfsbench.analysis.sequential import (
    BASELINE,
    MIN_MARGIN,
    STRATA_WITHOUT_CYCLES,
    Sequential,
    Settled,
    baseline_share,
    group_verdicts,
    next_round,
    spreads,
)


@dataclass(frozen=True)
class RunFact:
    """What the policy knows of one run."""

    cell: str
    repetition: int
    ok: bool
    throughput: float | None
    disturbed: bool = False
    stratum: str | None = None  # checkpoints in its window (None: not recorded)

    @property
    def valid(self) -> bool:
        return self.ok and bool(self.throughput) and not self.disturbed


@dataclass(frozen=True)
class Comparable:
    """A comparable group: its baseline and the candidates compared with it (None: no
    baseline, each cell decided by its own interval)."""

    key: str
    baseline: str | None
    cells: tuple[str, ...]


@dataclass(frozen=True)
class AutoSettings:
    least: int = 3  # repetitions_min
    most: int = 8  # repetitions_max
    ci_target_pct: float = 2.0
    margin: float = MIN_MARGIN  # equivalence_margin
    designed_strata: int = STRATA_WITHOUT_CYCLES


@dataclass
class AutoState:
    """What `repetitions = "auto"` carries from one round to the next."""

    seed: int  # the rounds' random order
    rounds: int = 0
    stopped: dict[str, str] = field(default_factory=dict)  # cell -> why it needs no more
    # per comparable group: its cells' verdicts at the last look (intersected at the next)
    before: dict[str, dict[str, Sequential]] = field(default_factory=dict)
    verdicts: dict[str, Sequential] = field(default_factory=dict)  # cell -> the last
    baselines: dict[str, str] = field(default_factory=dict)  # cell -> its baseline
    budget_spent: bool = False
    interrupted: bool = False  # stopped by its user (Ctrl-C, SIGTERM) between looks
    # the campaign's active seconds at the last look, its earlier parts' (before a
    # --resume) included: what the budget counts
    active_s: float = 0.0


def _by_cell(facts: Sequence[RunFact]) -> dict[str, list[RunFact]]:
    out: dict[str, list[RunFact]] = {}
    for f in facts:
        out.setdefault(f.cell, []).append(f)
    return out


def plan_round(
    facts: Sequence[RunFact],
    groups: Sequence[Comparable],
    s: AutoSettings,
    state: AutoState,
    *,
    final: bool = False,
) -> dict[str, int]:
    """The runs each cell gets next (none: settled or at its limits). ``final``: the
    budget is spent: the verdicts of all the runs, each cell that wanted more said to
    have stopped for the budget, and no round."""
    rows = _by_cell(facts)
    valid = {c: [f for f in rs if f.valid] for c, rs in rows.items()}
    wanted: dict[str, int] = {}
    for g in groups:
        if g.baseline is None:
            for cell in g.cells:
                if cell in state.stopped:
                    continue
                why = auto_stop_reason(rows.get(cell, []), s.most, s.ci_target_pct, s.least)
                if why is None:
                    wanted[cell] = 1
                else:
                    state.stopped[cell] = why
            continue
        base = g.baseline
        values = {c: [float(f.throughput or 0) for f in valid.get(c, [])] for c in [base, *g.cells]}
        labels = {c: [f.stratum for f in valid.get(c, [])] for c in [base, *g.cells]}
        verdicts = group_verdicts(
            values[base],
            {c: values[c] for c in g.cells},
            before=state.before.get(g.key),
            strata={BASELINE: labels[base], **{c: labels[c] for c in g.cells}},
            min_margin=s.margin,
            designed_strata=s.designed_strata,
        )
        state.before[g.key] = verdicts
        state.verdicts.update(verdicts)
        state.baselines.update(dict.fromkeys(g.cells, base))
        counts = {c: len(values[c]) for c in [base, *verdicts]}
        spread = spreads(values)
        base_sd, cell_sds = spread.get(base), [spread[c] for c in verdicts if c in spread]
        for cell, n in next_round(verdicts, counts, base, s.most, spread).items():
            made = len(rows.get(cell, []))
            share = (
                baseline_share(
                    len(verdicts), base_sd, cell_sds if len(cell_sds) == len(verdicts) else []
                )
                if cell == base
                else 1
            )
            if made >= 2 * s.most * share:
                state.stopped[cell] = f"{made} runs made, too many of them disturbed or failed"
                continue
            wanted[cell] = n
        for cell, v in verdicts.items():
            if cell not in wanted:
                state.stopped.setdefault(
                    cell,
                    v.words()
                    if v.verdict is not Settled.UNSETTLED
                    else f"unsettled at the maximum of {s.most} runs ({v.words()})",
                )
    if final:
        for cell in wanted:
            last = state.verdicts.get(cell)
            said = f" ({last.words()})" if last is not None else ""
            state.stopped.setdefault(cell, "the budget was spent" + said)
        return {}
    state.rounds += 1
    return wanted


T = TypeVar("T")


def cut_round(
    more: Sequence[T], fit: int, valid: Mapping[str, int], cell_of: Callable[[T], str]
) -> list[T]:
    """The ``fit`` runs of a round the budget leaves room for: those of the cells with the
    fewest valid runs first (a failed or disturbed run is no evidence: a cell below the
    runs a verdict needs is not left there while another adds one more), in the round's
    own random order."""
    seen: dict[str, int] = {}
    keyed = []
    for i, r in enumerate(more):
        cell = cell_of(r)
        keyed.append((valid.get(cell, 0) + seen.get(cell, 0), i))
        seen[cell] = seen.get(cell, 0) + 1
    chosen = {i for _, i in sorted(keyed)[: max(0, fit)]}
    return [r for i, r in enumerate(more) if i in chosen]


def auto_stop_reason(
    rows: Sequence[RunFact], most: int, target_pct: float, least: int = 2
) -> str | None:
    """Why a cell compared with nothing needs no more runs (None: one more). Only valid runs
    count, and at least ``least`` of them: a disturbed run is run again."""
    from pgfsbench.analysis.stats import estimate

    ok = [f.throughput for f in rows if f.valid]
    est = estimate(ok)
    half = est.ci_half_pct if est is not None else None
    if half is not None and half <= target_pct and len(ok) >= least:
        return f"95% CI ±{half:.1f}% <= {target_pct:g}% after {len(ok)} ok runs"
    if len(rows) >= most:
        what = f"95% CI ±{half:.1f}%" if half is not None else f"{len(ok)} ok run(s)"
        return f"reached the maximum of {most} runs ({what})"
    return None


def notes(s: AutoSettings, state: AutoState, budget_s: float | None) -> dict[str, object]:
    """The campaign's notes: how `auto` stopped each cell and each verdict (the summary,
    compare and the reports give them for this campaign)."""
    return {
        "rule": "anytime-valid",
        "min": s.least,
        "max": s.most,
        "ci_target_pct": s.ci_target_pct,
        "margin": s.margin,
        "budget_s": budget_s,
        "budget_spent": state.budget_spent,
        "active_s": round(state.active_s, 1),
        "interrupted": state.interrupted,
        "seed": state.seed,
        "rounds": state.rounds,
        "stopped": state.stopped,
        "verdicts": {
            cell: {
                "baseline": state.baselines.get(cell),
                "verdict": str(v.verdict),
                "ratio": v.ratio,
                "low": v.low,
                "high": v.high,
                "margin": v.margin,
                "alpha": v.alpha,
                "n": v.n,
                "n_base": v.n_base,
                "failed": v.failed,
                "estimand": v.estimand,
                "strata": {k: str(p.verdict) for k, p in v.strata},
                "words": v.words(),
            }
            for cell, v in state.verdicts.items()
        },
    }


def budget_fit(elapsed: float, budget_s: float, runs_made: int, wanted: int) -> int:
    """How many runs of a round fit in what is left of the budget, at the pace so far."""
    if not math.isfinite(budget_s) or runs_made == 0:
        return wanted
    per_run = elapsed / runs_made
    return int((budget_s - elapsed) // per_run) if per_run > 0 else wanted


def _seconds(stamp: str | None) -> float | None:
    from datetime import UTC, datetime

    if not stamp:
        return None
    try:
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()


def spent_before(
    earlier: Mapping[str, object] | None,
    runs: Sequence[tuple[str | None, str | None]],
    began: float,
) -> tuple[float, int]:
    """What a resumed campaign's earlier parts spent of its budget, and how many runs they
    made: the active seconds their notes counted (set-up and loads included), or, when a
    part was killed before it wrote them, at least the time its runs took. ``runs``: each
    run's (started_at, ended_at); ``began``: this part's start (epoch seconds)."""
    noted = earlier.get("active_s") if earlier is not None else None
    took = 0.0
    made = 0
    for start, end in runs:
        a, b = _seconds(start), _seconds(end)
        if a is None or a >= began:
            continue
        made += 1
        if b is not None and b > a:
            took += b - a
    return max(float(noted) if isinstance(noted, int | float) else 0.0, took), made
