"""Why did throughput drop? Episodes of a run and their causes, weighed (pure).

**Episodes.** A *stall* is a stretch of seconds where throughput falls below
``stall_fraction`` (10%) of the run's median, 0 included; a *slowdown* one of at least
``slowdown_min_seconds`` (2) below ``slowdown_fraction`` (50%), or where the per-second
p99 latency rises above ten times its median. Dips a second apart are one episode. A
first or last second that the series does not cover whole is not a dip by itself.

**Causes.** Every known cause is a hypothesis with clues for it and against it, read from
the evidence of the episode's seconds *compared with the rest of the run* (what is always
there explains nothing): wait events, who blocks the lock waiters, processes stuck in the
kernel and where, the processes outside the benchmark, the devices under test and the
disk beneath them, Dirty/Writeback, pressure stall information, checkpoints, snapshots.
Some clues are decisive because no competitor produces them (a writer asleep in the
kernel until its filesystem thaws; a lock held by a transaction that does nothing); some
only fit (nothing written: every full stop looks like that). The cause named is the best
supported; "high" confidence needs a decisive clue, nothing solid against it, and every
competitor far behind. Causes that are one mechanism (a checkpoint writing through a
capped device while new WAL segments are zero-filled) are named together, not as rivals.
When nothing fits, the answer is "unknown", with the evidence that was not recorded.
"""

from pgfsbench.analysis.stalls.causes import (
    HYPOTHESES,
    describe_blocker,
    describe_session,
    write_surge,
)
from pgfsbench.analysis.stalls.episodes import (
    episodes_of,
    find_stalls,
    flagged_seconds,
    thresholds_of,
)
from pgfsbench.analysis.stalls.evidence import Context, top
from pgfsbench.analysis.stalls.model import (
    BY_PLACE_ONLY,
    CAUSES,
    DIRTY_WCHANS,
    FAMILIES,
    FREEZE_WCHANS,
    IO_LOAD,
    IO_WAITS,
    IO_WCHANS,
    RECLAIM_WCHANS,
    Clue,
    Finding,
    StallEpisode,
    family_of,
    wchan_kind,
)
from pgfsbench.analysis.stalls.thresholds import (
    DEFAULT_THRESHOLDS,
    GOOD,
    LATENCY_FACTOR,
    MERGE_GAP_S,
    STRONG,
    WEAK,
)
from pgfsbench.analysis.stalls.weighing import Verdict, weigh

__all__ = [
    "BY_PLACE_ONLY",
    "CAUSES",
    "DEFAULT_THRESHOLDS",
    "DIRTY_WCHANS",
    "FAMILIES",
    "FREEZE_WCHANS",
    "GOOD",
    "HYPOTHESES",
    "IO_LOAD",
    "IO_WAITS",
    "IO_WCHANS",
    "LATENCY_FACTOR",
    "MERGE_GAP_S",
    "RECLAIM_WCHANS",
    "STRONG",
    "WEAK",
    "Clue",
    "Context",
    "Finding",
    "StallEpisode",
    "Verdict",
    "describe_blocker",
    "describe_session",
    "episodes_of",
    "family_of",
    "find_stalls",
    "flagged_seconds",
    "thresholds_of",
    "top",
    "wchan_kind",
    "weigh",
    "write_surge",
]
