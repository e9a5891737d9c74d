"""A run that changes level: some of its seconds at one throughput, the rest at another
(pure).

A stall or a slowdown is a dip below the run's median. When a run changes level for a
long while (a neighbour runs a CPU hog for 13 of 20 seconds, a backup reads the disk from
the middle of the phase on, the page cache fills up), the median lies on the lower level
or between the two and no second of the lower one looks like a dip against it. So the
run's per-second throughput is first searched for an *epidemic* change: the one segment
of consecutive seconds whose level differs most from the rest (the largest standardized
difference of means between the segment and the seconds outside it, `_max_t`; a segment
that reaches the phase's start or end is a single change point, one in the middle a dip
with a level before and after it), each side at least MIN_SIDE_S seconds, kept when the
two truly differ by at least MIN_CHANGE.

"Truly differ" is a permutation test of the largest statistic itself: the series' seconds
shuffled PERMUTATIONS times, each searched the same way (a test on the very segment the
search chose would find a "change" in most noise). Its threshold is MAX_PVALUE where the
run is long enough for a p that small to exist at all, else twice the smallest p the run
can reach (a 3-second side against 17 can never reach 0.001 by ranks; no shuffle test of a
10-second run goes below 1/42): `threshold`; a run too short for any p under
LOOSEST_PVALUE is not tested. Long runs are searched in bins of whole seconds (at most
MAX_POINTS of them: a 5-minute phase in 5-second bins), which keeps the search cheap and
the test valid (the bins are shuffled). Episodes are then judged against the higher level,
the undisturbed one: the lower level becomes an episode, with its cause found as any
episode's is, against the seconds at the higher level.
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from functools import cache

import numpy as np

MIN_SIDE_S = 3  # a level lasts at least this many seconds (shorter is a dip, not a level)
# the two sides must differ beyond chance: about the strictness of `history`'s change points
MAX_PVALUE = 0.001
# where the run cannot reach MAX_PVALUE, twice the smallest p it can reach, up to this; a
# run whose smallest reachable p is above half of it is not tested
LOOSEST_PVALUE = 0.01
# shuffles of the series for the p-value: the smallest p they can give, 1 / (n + 1), well
# below MAX_PVALUE (a shuffle as extreme as the run, which a 20-second run gives one time in
# some 10,000, must not decide alone)
PERMUTATIONS = 4999
MORE_PERMUTATIONS = 19999  # where the p is near the threshold (`_shuffled_p`)
PERMUTATION_BATCH = 250  # shuffles at a time (a shuffle as large stops the test early)
# and by this share of the higher level: smaller shifts are noise or the run's own drift
# (episodes need the lower level below slowdown_fraction, 50% by default, anyway)
MIN_CHANGE = 0.3
MAX_POINTS = 60  # longer series are searched in bins of whole seconds


@dataclass(frozen=True)
class LevelShift:
    """Where the run changed level: seconds ``start`` to ``end`` (exclusive, indices of the
    series) at ``inside``, the others at ``outside``. A segment that starts at 0 or ends at
    ``n`` is one change point."""

    start: int
    end: int
    n: int
    inside: float  # median throughput of the segment
    outside: float  # median throughput of the rest
    p: float  # the permutation p of the largest t
    threshold: float = MAX_PVALUE  # the p it had to be below

    @property
    def reference(self) -> float:
        """The undisturbed level: the higher one."""
        return max(self.inside, self.outside)

    @property
    def at(self) -> int:
        """The change point of a one-sided shift (the first second of the second level);
        the segment's start otherwise."""
        return self.end if self.start == 0 else self.start

    @property
    def before(self) -> float:
        """The level of the first second."""
        return self.inside if self.start == 0 else self.outside

    @property
    def after(self) -> float:
        """The level of the last second."""
        return self.inside if self.end == self.n else self.outside

    @property
    def one_sided(self) -> bool:
        return self.start == 0 or self.end == self.n

    def text(self, unit: str = "tps") -> str:
        if self.one_sided:
            return (
                f"level shift at {self.at} s: {self.before:,.0f} -> {self.after:,.0f} {unit} "
                f"(p={self.p:.2g})"
            )
        return (
            f"level change from {self.start} s to {self.end} s: {self.outside:,.0f} -> "
            f"{self.inside:,.0f} -> {self.outside:,.0f} {unit} (p={self.p:.2g})"
        )


@cache
def _segments(n: int, min_side: int) -> tuple[np.ndarray, np.ndarray]:
    """Every segment [a, b) of at least ``min_side`` points leaving at least as many."""
    a, b = np.triu_indices(n + 1, k=min_side)
    keep = (n - (b - a)) >= min_side
    return a[keep], b[keep]


def smallest_p(n: int, min_side: int = MIN_SIDE_S) -> float:
    """The smallest p-value a shuffle test of the largest t can give on ``n`` distinct
    values: a segment of m holding the m lowest has, among the n!/(m!(n-m)!) ways to place
    them, n - m + 1 as extreme (the segments of that length)."""
    best = 1.0
    for m in range(min_side, n - min_side + 1):
        best = min(best, (n - m + 1) / math.comb(n, m))
    return best


def threshold(n: int, min_side: int = MIN_SIDE_S) -> float | None:
    """The p a change must be below on ``n`` points, or None when no test of ``n`` points
    can be convincing (see the module)."""
    reachable = max(smallest_p(n, min_side), 1 / (PERMUTATIONS + 1))
    if reachable < MAX_PVALUE / 2:
        return MAX_PVALUE
    if 2 * reachable <= LOOSEST_PVALUE:
        return 2 * reachable
    return None


def _max_t(x: np.ndarray, min_side: int) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``x``, the largest standardized difference of a segment's mean from
    the rest's, and the segment's index in ``_segments``: |S_ab - m S / n| / sqrt(m (n - m)
    / n) for a segment of m points summing to S_ab, S the row's sum (the likelihood ratio of
    a change of mean of known variance; the variance, the same in every shuffle of a row,
    is left out)."""
    n = x.shape[1]
    a, b = _segments(n, min_side)
    c1 = np.concatenate([np.zeros((x.shape[0], 1)), np.cumsum(x, axis=1)], axis=1)
    m = (b - a).astype(float)
    t = np.abs(c1[:, b] - c1[:, a] - c1[:, -1:] * (m / n)) / np.sqrt(m * (n - m) / n)
    at = np.argmax(t, axis=1)
    return t[np.arange(t.shape[0]), at], at


def _shuffled_p(
    x: np.ndarray, t: float, side: int, limit: float, rng: np.random.Generator
) -> float | None:
    """The share of shuffles of ``x`` whose largest statistic reaches ``t`` (with the
    observed one counted), or None once it cannot end below ``limit``. PERMUTATIONS first;
    a p within three times the limit is estimated again from MORE_PERMUTATIONS (near its
    threshold a short run's p, some 0.001, is about a handful of shuffles: their chance
    must not decide)."""
    as_large = done = 0
    for total in (PERMUTATIONS, MORE_PERMUTATIONS):
        while done < total:
            rows = min(PERMUTATION_BATCH, total - done)
            null_t, _ = _max_t(rng.permuted(np.broadcast_to(x, (rows, x.size)), axis=1), side)
            as_large += int(np.count_nonzero(null_t >= t))
            done += rows
            if (1 + as_large) / (total + 1) >= limit:
                return None  # already too likely by chance: the rest cannot change that
        p = (1 + as_large) / (done + 1)
        if p * 3 < limit:
            return p
    return p


def level_shift(values: np.ndarray, min_side: int = MIN_SIDE_S) -> LevelShift | None:
    """The segment of a per-second series at another level than the rest, or None (see the
    module). Seconds without a value are left out of the test but keep their place."""
    idx = np.flatnonzero(np.isfinite(values))
    x = values[idx].astype(float)
    width = max(1, math.ceil(x.size / MAX_POINTS))  # seconds a point
    if width > 1:  # whole bins; the last, partial one left out of the search
        x = x[: x.size // width * width].reshape(-1, width).mean(axis=1)
    side = max(1, math.ceil(min_side / width))
    n = x.size
    if n < 2 * side:
        return None
    limit = threshold(n, side)
    if limit is None:
        return None
    best_t, best_i = _max_t(x[None, :], side)
    if not best_t[0] > 0:
        return None
    segs = _segments(n, side)
    a, b = int(segs[0][best_i[0]]), int(segs[1][best_i[0]])
    inside = np.zeros(n, dtype=bool)
    inside[a:b] = True
    level, rest = float(np.median(x[inside])), float(np.median(x[~inside]))
    high = max(level, rest)
    if high <= 0 or abs(level - rest) / high < MIN_CHANGE:
        return None
    # the p of the largest t: how often a shuffle of the same points (no change of level)
    # gives as large a largest t, the shuffles seeded by the data (the same run, the same p)
    rng = np.random.default_rng(zlib.crc32(x.round(6).tobytes()))
    p = _shuffled_p(x, float(best_t[0]), side, limit, rng)
    if p is None:
        return None
    # back to the series' seconds: the segment's first and the first of the next level
    first = 0 if a == 0 else int(idx[a * width])
    end = int(values.size) if b == n else int(idx[b * width])
    # the levels from the seconds themselves
    secs = np.zeros(values.size, dtype=bool)
    secs[first:end] = True
    finite = np.isfinite(values)
    level = float(np.median(values[secs & finite]))
    rest = float(np.median(values[~secs & finite]))
    return LevelShift(first, end, int(values.size), level, rest, p, limit)
