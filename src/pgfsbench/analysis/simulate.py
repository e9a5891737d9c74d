"""Campaigns of synthetic runs through the real verdict code, to measure what its verdicts
are worth in the noise storage really has (pure).

Both paths a campaign takes: `repetitions = "auto"` (analysis/auto.plan_round, round after
round, as the engine runs it) and a fixed number of runs (analysis/compare.compare and
family_wise, as the summary takes them). A world says how runs are drawn: log-normal
noise (or Student's t with 3 df), unequal noise between cells, drift over the campaign,
AR(1) noise between successive runs, runs a neighbour disturbed (and the judge caught),
and mixtures: each window holds a checkpoint with some probability, and the cells it
affects lose a share of their throughput in those windows, their mean log kept at the
others' (truly alike on the campaign's estimand). Whether a run says its stratum
(``labelled``) is part of the world.

What is counted, per simulated family: a **false verdict** (a cell called faster or
slower against the truth of what the verdict names: the campaign's estimand, or the
stratum it was compared in), whether the cell that truly differs was **found**, whether
the final interval **covered** the truth, and the runs made. bench/sequential_verdicts.py
runs the grid; tests/unit/test_sequential.py a short part of it, with bounds near what is
measured.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pgfsbench.analysis.auto import (
    AutoSettings,
    AutoState,
    Comparable,
    RunFact,
    plan_round,
)
from pgfsbench.analysis.compare import Comparison, Verdict, compare, family_wise
from pgfsbench.analysis.sequential import (
    BASELINE,
    STRATA_WITH_CYCLES,
    STRATA_WITHOUT_CYCLES,
    Sequential,
    Settled,
)

DISTURBED_FACTOR = 0.6  # a run a neighbour disturbed: 40% slower


@dataclass(frozen=True)
class World:
    """How runs are drawn (see the module)."""

    name: str
    cells: int
    cv: float = 0.02
    effect: float = 0.0  # the first cell's true ratio - 1 (0: every cell the baseline's twin)
    cv_baseline: float | None = None
    cv_first: float | None = None
    drift_per_run: float = 0.0  # relative drift of every cell, per run made
    heavy_tail: bool = False  # Student's t (3 df) on the log scale instead of normal
    ar1: float = 0.0  # correlation of the noise of successive runs (in the order made)
    disturbed_per_cell: int = 0  # runs of each cell a neighbour disturbed (judged so)
    mix_p: float = 0.0  # the chance a window holds a checkpoint
    mix_drop: tuple[float, float] = (0.0, 0.0)  # an affected cell's loss then (uniform)
    mix_who: str = "none"  # "all", "baseline", "first" (cell) or "none"
    labelled: bool = True  # each run says its stratum (its checkpoints in the window)
    most: int = 8  # repetitions_max (auto)
    cycles: bool = False  # whole-cycle windows: one stratum by design

    def cv_of(self, cell: str) -> float:
        if cell == BASELINE and self.cv_baseline is not None:
            return self.cv_baseline
        if cell == "c0" and self.cv_first is not None:
            return self.cv_first
        return self.cv

    def affected(self, cell: str) -> bool:
        return (
            self.mix_who == "all"
            or (self.mix_who == "baseline" and cell == BASELINE)
            or (self.mix_who == "first" and cell == "c0")
        )

    def mean_log_drop(self) -> float:
        """E[ln(1 - U(a, b))]: an affected cell's mean log loss in a window with a checkpoint."""
        a, b = self.mix_drop
        if b <= a:
            return math.log1p(-a)
        return (_antiderivative(b) - _antiderivative(a)) / (b - a)

    def shift(self, cell: str, stratum: str) -> float:
        """A cell's true mean log in a stratum ("0", "1+") or overall ("all")."""
        base = math.log1p(self.effect) if cell == "c0" else 0.0
        if not self.affected(cell) or self.mix_p <= 0:
            return base
        centre = self.mix_p * self.mean_log_drop()  # the mean log kept at the others'
        if stratum == "1+":
            return base + self.mean_log_drop() - centre
        if stratum == "0":
            return base - centre
        return base


def _antiderivative(x: float) -> float:
    """An antiderivative of ln(1 - x)."""
    return -((1 - x) * math.log1p(-x)) - x


@dataclass
class _Draw:
    world: World
    rng: np.random.Generator
    made: int = 0
    last_z: float = 0.0
    disturbed_left: dict[str, int] = field(default_factory=dict)

    def run(self, cell: str, repetition: int) -> RunFact:
        w = self.world
        e = (
            float(self.rng.standard_t(3)) / math.sqrt(3)
            if w.heavy_tail
            else float(self.rng.standard_normal())
        )
        z = w.ar1 * self.last_z + math.sqrt(1 - w.ar1 * w.ar1) * e
        self.last_z = z
        self.made += 1
        hit = self.rng.random() < w.mix_p
        stratum = "1+" if hit else "0"
        log_y = w.shift(cell, stratum) + math.sqrt(math.log1p(w.cv_of(cell) ** 2)) * z
        if hit and w.affected(cell):  # the loss itself, around its mean (uniform)
            a, b = w.mix_drop
            log_y += math.log1p(-float(self.rng.uniform(a, b))) - w.mean_log_drop()
        y = 1000.0 * math.exp(log_y) * (1 + w.drift_per_run * self.made)
        left = self.disturbed_left.setdefault(cell, w.disturbed_per_cell)
        disturbed = left > 0 and self.rng.random() < 0.5
        if disturbed:
            self.disturbed_left[cell] = left - 1
            y *= DISTURBED_FACTOR
        label = ("cycles" if w.cycles else stratum) if w.labelled else None
        return RunFact(cell, repetition, True, y, disturbed, label)


@dataclass(frozen=True)
class Outcome:
    """One simulated family."""

    false_verdict: bool  # any cell called faster or slower against the truth it names
    found: bool  # the cell that truly differs called so, the right way
    covered: int  # final intervals that covered the truth
    intervals: int  # final intervals (finite ones)
    runs: int  # runs made, the baseline's included


def _truth(world: World, cell: str, estimand: str) -> float:
    """The true log ratio cell / baseline for what a verdict names."""
    stratum = (
        "0"
        if "without a checkpoint" in estimand
        else "1+"
        if "with a checkpoint" in estimand
        else "all"
    )
    return world.shift(cell, stratum) - world.shift(BASELINE, stratum)


def _wrong(verdict_up: bool | None, truth: float) -> bool:
    """A decided verdict (up: faster) against the truth (a difference of 0 is none)."""
    if verdict_up is None:
        return False
    return truth <= 1e-12 if verdict_up else truth >= -1e-12


def _judge_fixed(world: World, cell: str, c: Comparison | None) -> tuple[bool, bool, int, int]:
    if c is None:
        return False, False, 0, 0
    up = None if not c.verdict.decided else c.verdict is Verdict.BETTER
    if c.strata and c.verdict.decided:  # "in every stratum": wrong if wrong in any
        wrong = any(_wrong(up, _truth(world, cell, p.estimand)) for _, p in c.strata)
    else:
        wrong = _wrong(up, _truth(world, cell, c.estimand))
    covered = intervals = 0
    if c.ci_low is not None and c.ci_high is not None and not c.strata:
        intervals = 1
        t = _truth(world, cell, c.estimand)
        covered = int(math.log(c.ci_low) <= t <= math.log(c.ci_high))
    found = cell == "c0" and bool(world.effect) and up is (world.effect > 0) and not wrong
    return wrong, found, covered, intervals


def _judge_auto(world: World, cell: str, v: Sequential) -> tuple[bool, bool, int, int]:
    up = {Settled.FASTER: True, Settled.SLOWER: False}.get(v.verdict)
    if v.strata and up is not None:
        wrong = any(_wrong(up, _truth(world, cell, p.estimand)) for _, p in v.strata)
    else:
        wrong = _wrong(up, _truth(world, cell, v.estimand))
    covered = intervals = 0
    if v.low is not None and v.high is not None:
        intervals = 1
        t = _truth(world, cell, v.estimand)
        covered = int(math.log(v.low) <= t <= math.log(v.high))
    found = cell == "c0" and bool(world.effect) and up is (world.effect > 0) and not wrong
    return wrong, found, covered, intervals


def fixed(world: World, n: int, rng: np.random.Generator) -> Outcome:
    """A campaign of ``n`` runs a cell, in random order, judged as the summary does."""
    draw = _Draw(world, rng)
    names = [f"c{i}" for i in range(world.cells)]
    order = [c for c in [BASELINE, *names] for _ in range(n)]
    rng.shuffle(order)
    rows: dict[str, list[RunFact]] = {c: [] for c in [BASELINE, *names]}
    for cell in order:
        rows[cell].append(draw.run(cell, len(rows[cell]) + 1))

    def vals(c: str) -> list[float]:
        return [float(f.throughput or 0) for f in rows[c]]

    def labels(c: str) -> list[str | None]:
        return [f.stratum for f in rows[c]]

    comps = family_wise(
        [compare(vals(BASELINE), vals(c), strata=(labels(BASELINE), labels(c))) for c in names]
    )
    judged = [_judge_fixed(world, c, x) for c, x in zip(names, comps, strict=True)]
    return Outcome(
        any(j[0] for j in judged),
        any(j[1] for j in judged),
        sum(j[2] for j in judged),
        sum(j[3] for j in judged),
        len(order),
    )


def auto(world: World, rng: np.random.Generator, least: int = 3) -> Outcome:
    """A `repetitions = "auto"` campaign: rounds of plan_round until it asks for none."""
    draw = _Draw(world, rng)
    names = [f"c{i}" for i in range(world.cells)]
    facts: list[RunFact] = []
    settings = AutoSettings(
        least=least,
        most=world.most,
        designed_strata=STRATA_WITH_CYCLES if world.cycles else STRATA_WITHOUT_CYCLES,
    )
    state = AutoState(seed=0)
    group = Comparable("g", BASELINE, tuple(names))
    counts = dict.fromkeys([BASELINE, *names], 0)
    while True:
        wanted = plan_round(facts, [group], settings, state)
        if not wanted:
            break
        order = [c for c, k in wanted.items() for _ in range(k)]
        rng.shuffle(order)  # each round in a random order, as the campaign runs it
        for cell in order:
            counts[cell] += 1
            facts.append(draw.run(cell, counts[cell]))
    judged = [_judge_auto(world, c, state.verdicts[c]) for c in names]
    return Outcome(
        any(j[0] for j in judged),
        any(j[1] for j in judged),
        sum(j[2] for j in judged),
        sum(j[3] for j in judged),
        len(facts),
    )


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a proportion (95%)."""
    if n == 0:
        return 0.0, 1.0
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class Summary:
    world: World
    path: str  # "auto" or "fixed N"
    families: int
    false_rate: float
    false_ci: tuple[float, float]
    power: float | None
    coverage: float | None
    runs_per_family: float
    intervals: int = 0  # the finite final intervals the coverage is counted over

    def as_dict(self) -> dict[str, object]:
        return {
            "world": self.world.name,
            "cells": self.world.cells,
            "path": self.path,
            "families": self.families,
            "false": round(self.false_rate, 4),
            "false_ci95": [round(self.false_ci[0], 4), round(self.false_ci[1], 4)],
            "power": None if self.power is None else round(self.power, 4),
            "coverage": None if self.coverage is None else round(self.coverage, 4),
            "intervals": self.intervals,
            "runs": round(self.runs_per_family, 1),
        }


def run_many(world: World, families: int, seed: int, path: str = "auto", least: int = 3) -> Summary:
    """``families`` simulated campaigns of a world on a path ("auto", or "fixed N")."""
    rng = np.random.default_rng(seed)
    outcomes: Sequence[Outcome]
    if path == "auto":
        outcomes = [auto(world, rng, least) for _ in range(families)]
    else:
        n = int(path.split()[1])
        outcomes = [fixed(world, n, rng) for _ in range(families)]
    false = sum(o.false_verdict for o in outcomes)
    found = sum(o.found for o in outcomes)
    intervals = sum(o.intervals for o in outcomes)
    return Summary(
        world,
        path,
        families,
        false / families,
        wilson(false, families),
        found / families if world.effect else None,
        sum(o.covered for o in outcomes) / intervals if intervals else None,
        sum(o.runs for o in outcomes) / families,
        intervals,
    )
