"""A run that changes level: its first seconds at one throughput, the rest at another (pure).

A stall or a slowdown is a dip below the run's median. When the run changes level half-way
(a neighbour starts a CPU hog, a backup starts reading the disk, the page cache fills up),
the median lies on one level or between the two and no second of the lower one looks like
a dip against it. So the run's per-second throughput is first searched for one change
point: the split that best separates two levels (the largest Welch t statistic between the
two sides, each side at least MIN_SIDE_S seconds), kept when the two sides truly differ
(Mann-Whitney's p below MAX_PVALUE) by at least MIN_CHANGE. Episodes are then judged
against the higher level, the undisturbed one: the lower level becomes an episode, with its
cause found as any episode's is, against the seconds at the higher level.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

MIN_SIDE_S = 3  # a level lasts at least this many seconds (shorter is a dip, not a level)
# the two sides must differ beyond chance: about the strictness of `history`'s change points
MAX_PVALUE = 0.001
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


def level_shift(values: np.ndarray, min_side: int = MIN_SIDE_S) -> LevelShift | None:
    """The one change of level in a per-second series, or None (see the module). Seconds
    without a value are left out of the test but keep their place."""
    idx = np.flatnonzero(np.isfinite(values))
    x = values[idx]
    n = x.size
    if n < 2 * min_side:
        return None
    # Welch's t for every split, from cumulative sums (O(n))
    c1, c2 = np.cumsum(x), np.cumsum(x * x)
    best_k, best_t = -1, 0.0
    for k in range(min_side, n - min_side + 1):
        n1, n2 = k, n - k
        m1, m2 = c1[k - 1] / n1, (c1[-1] - c1[k - 1]) / n2
        v1 = max(0.0, c2[k - 1] / n1 - m1 * m1) * n1 / max(1, n1 - 1)
        v2 = max(0.0, (c2[-1] - c2[k - 1]) / n2 - m2 * m2) * n2 / max(1, n2 - 1)
        se = math.sqrt(v1 / n1 + v2 / n2)
        t = abs(m1 - m2) / se if se > 0 else (math.inf if m1 != m2 else 0.0)
        if t > best_t:
            best_k, best_t = k, t
    if best_k < 0:
        return None
    left, right = x[:best_k], x[best_k:]
    before, after = float(np.median(left)), float(np.median(right))
    high = max(before, after)
    if high <= 0 or abs(before - after) / high < MIN_CHANGE:
        return None
    from scipy import stats as sps

    p = float(sps.mannwhitneyu(left, right, alternative="two-sided").pvalue)
    if p >= MAX_PVALUE:
        return None
    return LevelShift(int(idx[best_k]), before, after, p)
