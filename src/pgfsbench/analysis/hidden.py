"""What a slow mode that a few runs happened to miss could hide, when the runs do not record
its cause (pure).

A disk's runs are a mixture: a window holds a checkpoint's writes and fsyncs or it does
not, and the runs that hold one are 20-50% slower. When each run records the checkpoints
in its window (its stratum, collect/window.py), the comparisons follow each stratum with
its own (analysis/compare.py, analysis/sequential.py). When the runs do not say (no server
log, an older result), a sample that happened to miss the slow mode looks exactly like a
faster, steadier cell: three fast runs of a baseline whose runs are slow one time in five
(a chance of 0.8³ = 51%) beside a steady cell at the same mean log gave "slower" in 8-28%
of simulated families (bench/sequential_verdicts.py), and no test on those runs alone can
tell the two apart.

What is done then: each side's interval is widened, on the side a missed slow mode would
move it, by what such a mode could shift its mean log:

    a(n) = D · (1 - beta ** (1 / n))

where 1 - beta^(1/n) is the largest share of runs a slow mode can have and still be
missed by all n runs with a chance of at least beta, and D its depth on the log scale.
The guarantee holds for a slow mode of any share: a mode more common than that share is
missed with a chance below beta; a rarer one moves the mean log by less than a(n). beta
is HIDDEN_ALPHA (one point of the family-wise 5%; the intervals take the other four)
divided over the sides of the family (the baseline and each cell: k + 1). The chance
only falls as runs are added (missed by n runs, missed by fewer), so the widening is
valid at every look of a sequence too.

D is the deeper of HIDDEN_DEPTH (a checkpoint in the window costs a disk 20-30% here:
ext4 on the emulated 7,200 rpm disk; the seeds' hard disks up to about 30%) and the
deepest spread either side's runs show (a storage whose runs differ by more has shown
that its modes are deeper). What this presumes: the hidden mode is slow (a stall, a
checkpoint), never fast; a mode deeper than D that none of the runs shows is not
allowed for. The cost: at 3 runs a side only differences beyond about 30% are decided,
at 10 about 15%, at 40 about 5%; "equivalent within ±2%" needs over a hundred. Whole
checkpoint cycles, or the server's log read, remove the need.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

HIDDEN_DEPTH = 0.30  # a slow mode costs at most this share of throughput (unless seen deeper)
HIDDEN_ALPHA = 0.01  # the family-wise level's share for "the runs missed a slow mode"


def unseen_share(n: int, beta: float) -> float:
    """The largest share of runs a mode can have and be missed by n runs with a chance of
    at least beta (1 with no runs)."""
    if n <= 0:
        return 1.0
    return 1.0 - math.pow(beta, 1.0 / n)


def depth(*sides: Sequence[float]) -> float:
    """D (log scale): HIDDEN_DEPTH or the deepest spread of log throughput a side shows."""
    deepest = -math.log1p(-HIDDEN_DEPTH)
    for side in sides:
        logs = [math.log(v) for v in side if v > 0]
        if len(logs) >= 2:
            deepest = max(deepest, max(logs) - min(logs))
    return deepest


def allowance(n: int, d: float, sides: int) -> float:
    """What a slow mode missed by n runs could shift a side's mean log by, at the family's
    share of HIDDEN_ALPHA over its ``sides`` sides (the baseline and each cell)."""
    return d * unseen_share(n, HIDDEN_ALPHA / max(1, sides))


def widen(
    lo: float,
    hi: float,
    *,
    n_base: int,
    n_other: int,
    d: float,
    family: int,
    higher_is_better: bool = True,
) -> tuple[float, float]:
    """The interval of log(other / base) widened for a slow mode either side may hide: a
    baseline that hides one looks better than it is, so the truth may lie further to the
    other's better side; a cell that hides one, further to its worse side. For throughput
    (higher is better) a slow mode is a low one; for a latency, a high one."""
    a_base = allowance(n_base, d, family + 1)
    a_other = allowance(n_other, d, family + 1)
    if higher_is_better:
        return lo - a_other, hi + a_base
    return lo - a_base, hi + a_other


def words(n_base: int, n_other: int, d: float, family: int) -> str:
    """Why an interval is wider than its runs' spread, in words."""
    shares = (unseen_share(n, HIDDEN_ALPHA / (family + 1)) for n in (n_base, n_other))
    base_share, other_share = shares
    return (
        "the runs do not record the checkpoints in their windows, so the interval allows "
        f"for a slow mode (up to {(1 - math.exp(-d)) * 100:.0f}% slower) that they may have "
        f"missed (in up to {base_share * 100:.0f}% of the baseline's runs, "
        f"{other_share * 100:.0f}% of this cell's): read the server's log or measure whole "
        "checkpoint cycles (cycles = N)"
    )
