"""The diagnosis's thresholds and weights, each with the reason for its value."""

from __future__ import annotations

# How much a clue weighs. A STRONG clue is one no competing cause produces (a writer asleep
# in its filesystem's freeze; a lock held by a transaction that does nothing); GOOD fits
# this cause far better than the others; WEAK merely fits (every full stop writes nothing).
# "high" confidence needs a STRONG clue and every competitor far behind (weighing.py).
STRONG, GOOD, WEAK = 1.0, 0.6, 0.3
# The defaults of [defaults] stall_fraction, slowdown_fraction and slowdown_min_seconds
# (spec/models.py gives the reasons): a stall under 10% of the run's median, a slowdown
# under 50% for 2 s or more.
DEFAULT_THRESHOLDS = {"stall_fraction": 0.1, "slowdown_fraction": 0.5, "slowdown_min_seconds": 2.0}
# A second whose p99 latency is this many times the run's median p99 is a slowdown even
# at full throughput: the clients wait an order of magnitude longer than usual, well past
# the ordinary spread of a run's per-second p99.
LATENCY_FACTOR = 10.0
# Dips this many normal seconds apart are one episode: a checkpoint's sync or a freeze
# often lets one second through in the middle, and two causes one second apart are rare.
MERGE_GAP_S = 1
