"""The diagnosis's words: the causes it can name, the wait channels it reads, a clue, a
finding (a cause with its clues for and against) and an episode."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pgfsbench.analysis.stalls.thresholds import GOOD, STRONG
from pgfsbench.spec.kinds import filesystem_wait_channels

CAUSES = {
    "fs_frozen": "the filesystem was frozen (not accepting writes)",
    "device_stalled": "the device stopped completing I/O",
    "locks": "lock waits behind a blocking transaction",
    "checkpoint": "a checkpoint",
    "wal_segment_creation": "WAL segment creation (zero-filling new segments)",
    "writeback": "a dirty-page writeback surge",
    "device_saturated": "the device at its limit",
    "host_io": "I/O by others on the same disk",
    "host_cpu": "CPU taken by other processes on this host",
    "steal": "CPU taken by the hypervisor (steal time)",
    "reclaim": "page reclaim (memory pressure)",
    "pooler": "clients waiting for a pooled server connection",
    "snapshot": "a snapshot taken during the run",
    "stopped": "a process of the benchmark was stopped (SIGSTOP or a debugger)",
    "outside_session": "work by sessions from outside the workload",
    "start_up": "the measured phase's start (the clients connecting, their first transactions)",
    "unknown": "unknown",
}
# causes read from the episode's place in the run only: they fit any episode there, so they
# do not lower the confidence in a decisive cause found for the same seconds
BY_PLACE_ONLY = frozenset({"start_up"})
# causes that are parts of one mechanism, named together: more I/O than the device takes;
# a session that holds locks because it was stopped
IO_LOAD = frozenset(
    {"checkpoint", "wal_segment_creation", "writeback", "device_saturated", "snapshot"}
)
FAMILIES = (IO_LOAD, frozenset({"stopped", "locks", "outside_session", "pooler"}))


def family_of(key: str) -> frozenset[str]:
    return next((f for f in FAMILIES if key in f), frozenset({key}))


# what a process in uninterruptible sleep waits for, by its kernel wait channel
FREEZE_WCHANS = (
    "percpu_rwsem_wait",
    "percpu_down_read",
    "__percpu_down_read",
    "sb_start_write",
    "__sb_start_write",
    "sb_wait_write",
    "freeze_super",
)
IO_WCHANS = (
    # each filesystem's own (ext4_, jbd2, xfs_, xlog, btrfs_, zio_...: spec/kinds.py)
    *filesystem_wait_channels(),
    "io_schedule",
    "folio_wait",
    "wait_on_page",
    "__wait_on_buffer",
    "bit_wait_io",
    "blk_mq_get_tag",
    "rq_qos_wait",
    "wbt_wait",
    "submit_bio_wait",
    "wait_for_completion_io",
    "blkdev_issue_flush",
    "filemap_fdatawait",
    "__filemap_fdatawait",
    "blk_",
    "throtl",
)
DIRTY_WCHANS = ("balance_dirty_pages",)
RECLAIM_WCHANS = (
    "shrink_",
    "try_to_free",
    "throttle_direct_reclaim",
    "mem_cgroup_",
    "__alloc_pages_slowpath",
    "reclaim_throttle",
    "congestion_wait",
)
# wait events of a backend that is doing I/O (its lock waiters wait because it is slow)
IO_WAITS = ("IO/", "LWLock/WAL", "LWLock/BufferIO", "LWLock/buffer_io")


def _blocked_key(key: str) -> tuple[str, str, str, str]:
    """A "blocked" series key: who (benchmark or outside), wait channel, volume, command."""
    parts = [*key.split("|"), "", "", ""]
    return parts[0], parts[1], parts[2], parts[3]


def wchan_kind(wchan: str) -> str:
    """freeze, io, dirty, reclaim, stopped or other."""
    if wchan == "stopped":
        return "stopped"
    for kind, names in (
        ("freeze", FREEZE_WCHANS),
        ("dirty", DIRTY_WCHANS),
        ("reclaim", RECLAIM_WCHANS),
        ("io", IO_WCHANS),
    ):
        if wchan.startswith(names):
            return kind
    return "other"


@dataclass(frozen=True)
class Clue:
    text: str
    weight: float


@dataclass
class Finding:
    """One cause weighed: what supports it and what speaks against it."""

    key: str
    support: list[Clue] = field(default_factory=list)
    against: list[Clue] = field(default_factory=list)
    blockers: tuple[dict[str, Any], ...] = ()
    # causes this one sets off, when its evidence says so (sessions from outside writing
    # WAL make new WAL segments and fill the device): named with it, not against it
    explains: frozenset[str] = frozenset()

    @property
    def score(self) -> float:
        return sum(c.weight for c in self.support) - sum(c.weight for c in self.against)

    @property
    def decisive(self) -> bool:
        """A clue no competitor produces, or several that each fit well."""
        return (
            any(c.weight >= STRONG for c in self.support)
            or sum(c.weight for c in self.support if c.weight >= GOOD) >= 3 * GOOD - 1e-9
        )

    @property
    def contested(self) -> bool:
        return any(c.weight >= GOOD for c in self.against)

    def why_not(self) -> str:
        """Why this cause lost, in words: its weightiest clue against, if any."""
        if self.against:
            return max(self.against, key=lambda c: c.weight).text
        return "weaker evidence"


@dataclass(frozen=True)
class StallEpisode:
    """A stall or a slowdown, with its cost and its cause."""

    start_s: float  # seconds into the measured phase
    end_s: float
    min_tps: float
    delayed_tx: int  # transactions short of the run's median pace during the episode
    max_latency_ms: float | None
    cause: str  # a key of CAUSES
    confidence: str  # high, medium, low
    evidence: tuple[str, ...]
    # the causes it beat: (key, score, why it lost)
    alternatives: tuple[tuple[str, float, str], ...] = ()
    missing: tuple[str, ...] = ()
    kind: str = "stall"  # or "slowdown"
    median_tps: float = 0.0  # the run's median, the episode's reference
    p99_ms: float | None = None  # the worst per-second p99 during the episode
    usual_p99_ms: float | None = None  # the median per-second p99 the rest of the run
    contributing: tuple[str, ...] = ()  # causes of the same mechanism, named with it
    blockers: tuple[dict[str, Any], ...] = ()  # a lock episode's blocking sessions

    @property
    def cause_text(self) -> str:
        text = CAUSES[self.cause]
        if self.contributing:
            text += " with " + " and ".join(CAUSES[c] for c in self.contributing)
        return text

    @property
    def length_s(self) -> float:
        return self.end_s - self.start_s

    @property
    def depth_pct(self) -> float:
        """How far below the median throughput it fell, in %."""
        if self.median_tps <= 0:
            return 100.0
        return round(100 * max(0.0, 1 - self.min_tps / self.median_tps), 1)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.start_s:g}–{self.end_s:g} s: {self.cause_text}"

    def ruled_out(self, most: int = 4) -> str:
        """The alternatives it beat and why, in one phrase."""
        return "; ".join(f"not {CAUSES[k]}: {why}" for k, _, why in self.alternatives[:most])

    def headline(self, unit: str = "tps") -> str:
        """What happened, with its cost: "stall at 5–9 s (min 0 tps, 100% below the median
        of 2,031; 8,124 transactions delayed; slowest transaction 3,980 ms (p99 3.2 ms the
        rest of the run))"."""
        parts = [
            f"min {self.min_tps:,.0f} {unit}, {self.depth_pct:.0f}% below the median "
            f"of {self.median_tps:,.0f}",
            f"{self.delayed_tx:,} transactions delayed",
        ]
        # the transactions held up finish when it ends: the slowest one says what it cost
        if self.max_latency_ms is not None:
            parts.append(
                f"slowest transaction {self.max_latency_ms:,.0f} ms"
                + (
                    f" (p99 {self.usual_p99_ms:,.1f} ms the rest of the run)"
                    if self.usual_p99_ms is not None
                    else ""
                )
            )
        return f"{self.kind} at {self.start_s:g}–{self.end_s:g} s ({'; '.join(parts)})"

    def verdict(self) -> str:
        """The cause and how sure: "the filesystem was frozen (high confidence)"."""
        return f"{self.cause_text} ({self.confidence} confidence)"

    def because(self, most: int = 2) -> str:
        """The evidence, in one phrase."""
        return "; ".join(self.evidence[:most])

    def as_dict(self) -> dict[str, object]:
        return {
            "kind": self.kind,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "length_s": self.length_s,
            "min_tps": self.min_tps,
            "median_tps": self.median_tps,
            "depth_pct": self.depth_pct,
            "delayed_tx": self.delayed_tx,
            "max_latency_ms": self.max_latency_ms,
            "p99_ms": self.p99_ms,
            "usual_p99_ms": self.usual_p99_ms,
            "cause": self.cause,
            "cause_text": self.cause_text,
            "contributing": list(self.contributing),
            "confidence": self.confidence,
            "evidence": list(self.evidence),
            "alternatives": [
                {"cause": k, "cause_text": CAUSES[k], "score": round(s, 2), "why_not": why}
                for k, s, why in self.alternatives
            ],
            "missing_evidence": list(self.missing),
            "blockers": [dict(b) for b in self.blockers],
            "headline": self.headline(),
            "verdict": self.verdict(),
        }
