"""Campaigns of synthetic throughputs through the real stopping and verdict code
(analysis/sequential.py: `next_round` and `group_verdicts`, as `repetitions = "auto"` runs
them), to measure what its verdicts are worth: how often identical cells are called
faster or slower (family-wise, per matrix), how often a true difference is found, and how
many runs it takes. bench/sequential_verdicts.py runs the issue's grid; a unit test runs
a small part of it."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from pgfsbench.analysis.sequential import (
    BASELINE,
    Sequential,
    Settled,
    group_verdicts,
    next_round,
    spreads,
)


@dataclass(frozen=True)
class Outcome:
    """One simulated matrix."""

    false_verdict: bool  # an identical cell called faster or slower
    found: bool  # the cell that truly differs called faster or slower the right way
    runs: int  # runs made, the baseline's included
    rounds: int


@dataclass(frozen=True)
class World:
    """How throughputs are drawn: log-normal around 1000 (or heavy-tailed), with a
    coefficient of variation, a drift over the campaign, and the first cell's true
    difference (0: every cell is the baseline's twin)."""

    cells: int
    cv: float
    effect: float = 0.0  # the first cell's true ratio - 1
    drift_per_run: float = 0.0  # relative drift of every cell, per run made
    heavy_tail: bool = False  # Student's t (3 df) on the log scale instead of normal
    most: int = 8  # repetitions_max
    # unequal noise: the baseline's own CV, and the first cell's (None: ``cv``)
    cv_baseline: float | None = None
    cv_first: float | None = None

    def cv_of(self, cell: str, first: str) -> float:
        if cell == BASELINE and self.cv_baseline is not None:
            return self.cv_baseline
        if cell == first and self.cv_first is not None:
            return self.cv_first
        return self.cv


def simulate(world: World, rng: np.random.Generator) -> Outcome:
    names = [f"c{i}" for i in range(world.cells)]
    data: dict[str, list[float]] = {BASELINE: [], **{c: [] for c in names}}
    made = 0

    def draw(cell: str) -> float:
        nonlocal made
        if world.heavy_tail:  # scaled so that its sd is sigma (t3: variance 3)
            z = float(rng.standard_t(3)) / math.sqrt(3)
        else:
            z = float(rng.standard_normal())
        true = 1000.0 * (1 + world.effect if cell == names[0] else 1.0)
        sigma = math.sqrt(math.log1p(world.cv_of(cell, names[0]) ** 2))
        made += 1
        return true * (1 + world.drift_per_run * made) * math.exp(sigma * z)

    before: dict[str, Sequential] | None = None
    rounds = 0
    while True:
        verdicts = group_verdicts(data[BASELINE], {c: data[c] for c in names}, before=before)
        plan = next_round(
            verdicts, {c: len(v) for c, v in data.items()}, BASELINE, world.most, spreads(data)
        )
        if not plan:
            break
        order = [c for c, n in plan.items() for _ in range(n)]
        rng.shuffle(order)  # each round in a random order, as the campaign runs it
        for cell in order:
            data[cell].append(draw(cell))
        before = verdicts
        rounds += 1
    twins = names[1:] if world.effect else names
    false = any(verdicts[c].verdict in (Settled.FASTER, Settled.SLOWER) for c in twins)
    wanted = Settled.FASTER if world.effect > 0 else Settled.SLOWER
    found = bool(world.effect) and verdicts[names[0]].verdict is wanted
    return Outcome(false, found, sum(len(v) for v in data.values()), rounds)


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
    matrices: int
    false_rate: float
    false_ci: tuple[float, float]
    power: float | None
    runs_per_matrix: float


def run_many(world: World, matrices: int, seed: int) -> Summary:
    rng = np.random.default_rng(seed)
    outcomes: Sequence[Outcome] = [simulate(world, rng) for _ in range(matrices)]
    false = sum(o.false_verdict for o in outcomes)
    found = sum(o.found for o in outcomes)
    return Summary(
        world,
        matrices,
        false / matrices,
        wilson(false, matrices),
        found / matrices if world.effect else None,
        sum(o.runs for o in outcomes) / matrices,
    )
