"""A run that changes level: its first seconds at one throughput, the rest at another (pure).

A stall or a slowdown is a dip below the run's median. When the run changes level half-way
(a neighbour starts a CPU hog, a backup starts reading the disk, the page cache fills up),
the median lies on one level or between the two and no second of the lower one looks like
a dip against it. So the run's per-second throughput is first searched for one change
point: the split that best separates two levels (the largest Welch t statistic between the
two sides, each side at least MIN_SIDE_S seconds), kept when the two sides truly differ
(p below MAX_PVALUE) by at least MIN_CHANGE. The p-value is that of the largest t itself,
by permutation: the series' seconds shuffled PERMUTATIONS times, each searched the same way
(a test on the very split the search chose would find a "change" in most noise; and
Mann-Whitney on a 3-second side can never go below p = 0.0018). Episodes are then judged
against the higher level, the undisturbed one: the lower level becomes an episode, with its
cause found as any episode's is, against the seconds at the higher level.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

MIN_SIDE_S = 3  # a level lasts at least this many seconds (shorter is a dip, not a level)
# the two sides must differ beyond chance: about the strictness of `history`'s change points
MAX_PVALUE = 0.001
# shuffles of the series for the p-value: the smallest p they can give, 1 / (n + 1), must be
# below MAX_PVALUE
PERMUTATIONS = 1999
PERMUTATION_BATCH = 250  # shuffles at a time (a shuffle as large stops the test early)
# and by this share of the higher level: smaller shifts are noise or the run's own drift
# (episodes need the lower level below slowdown_fraction, 50% by default, anyway)
MIN_CHANGE = 0.3


@dataclass(frozen=True)
class LevelShift:
    """Where the run changed level: second ``at`` (index) is the first of the second level."""

    at: int
    before: float  # median throughput before
    after: float  # median throughput after
    p: float  # Mann-Whitney's p of the two sides

    @property
    def reference(self) -> float:
        """The undisturbed level: the higher one."""
        return max(self.before, self.after)

    def text(self, unit: str = "tps") -> str:
        return (
            f"level shift at {self.at} s: {self.before:,.0f} -> {self.after:,.0f} {unit} "
            f"(p={self.p:.2g})"
        )


def _max_t(x: np.ndarray, min_side: int) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``x``, the largest Welch t over its splits and where it is."""
    n = x.shape[1]
    k = np.arange(min_side, n - min_side + 1)
    c1, c2 = np.cumsum(x, axis=1), np.cumsum(x * x, axis=1)
    s1, q1 = c1[:, k - 1], c2[:, k - 1]
    s2, q2 = c1[:, -1:] - s1, c2[:, -1:] - q1
    n1, n2 = k.astype(float), (n - k).astype(float)
    m1, m2 = s1 / n1, s2 / n2
    v1 = np.maximum(0.0, q1 / n1 - m1 * m1) * n1 / np.maximum(1.0, n1 - 1)
    v2 = np.maximum(0.0, q2 / n2 - m2 * m2) * n2 / np.maximum(1.0, n2 - 1)
    se = np.sqrt(v1 / n1 + v2 / n2)
    diff = np.abs(m1 - m2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(se > 0, diff / se, np.where(diff > 0, np.inf, 0.0))
    at = np.argmax(t, axis=1)
    return t[np.arange(t.shape[0]), at], k[at]


def level_shift(values: np.ndarray, min_side: int = MIN_SIDE_S) -> LevelShift | None:
    """The one change of level in a per-second series, or None (see the module). Seconds
    without a value are left out of the test but keep their place."""
    idx = np.flatnonzero(np.isfinite(values))
    x = values[idx].astype(float)
    n = x.size
    if n < 2 * min_side:
        return None
    best_t, best_k = _max_t(x[None, :], min_side)
    if not best_t[0] > 0:
        return None
    k = int(best_k[0])
    left, right = x[:k], x[k:]
    before, after = float(np.median(left)), float(np.median(right))
    high = max(before, after)
    if high <= 0 or abs(before - after) / high < MIN_CHANGE:
        return None
    # the p of the largest t: how often a shuffle of the same seconds (no change of level)
    # gives as large a largest t, the shuffles seeded by the data (the same run, the same p)
    rng = np.random.default_rng(zlib.crc32(x.round(6).tobytes()))
    as_large = 0
    for start in range(0, PERMUTATIONS, PERMUTATION_BATCH):
        rows = min(PERMUTATION_BATCH, PERMUTATIONS - start)
        null_t, _ = _max_t(rng.permuted(np.broadcast_to(x, (rows, n)), axis=1), min_side)
        as_large += int(np.count_nonzero(null_t >= best_t[0]))
        if (1 + as_large) / (PERMUTATIONS + 1) >= MAX_PVALUE:
            return None  # already too likely by chance: the rest cannot change that
    p = (1 + as_large) / (PERMUTATIONS + 1)
    return LevelShift(int(idx[k]), before, after, p)
