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

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypedDict

import numpy as np

from pgfsbench.analysis.levels import level_shift
from pgfsbench.analysis.outside import top_outside
from pgfsbench.analysis.series import Aligned, median_finite
from pgfsbench.spec.kinds import filesystem_wait_channels

STRONG, GOOD, WEAK = 1.0, 0.6, 0.3  # how much a clue weighs
DEFAULT_THRESHOLDS = {"stall_fraction": 0.1, "slowdown_fraction": 0.5, "slowdown_min_seconds": 2.0}
LATENCY_FACTOR = 10.0  # a second whose p99 is this many times the run's: a slowdown
MERGE_GAP_S = 1  # dips this many normal seconds apart are one episode

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


# ---------------------------------------------------------------- finding episodes


def thresholds_of(al: Aligned) -> tuple[float, float, int]:
    """(stall fraction, slowdown fraction, slowdown minimum seconds) of the run's spec."""
    t = {**DEFAULT_THRESHOLDS, **al.thresholds}
    return t["stall_fraction"], t["slowdown_fraction"], max(1, int(t["slowdown_min_seconds"]))


def flagged_seconds(
    al: Aligned,
    fraction: float,
    latency_factor: float = LATENCY_FACTOR,
    reference: float | None = None,
) -> np.ndarray:
    """Seconds below ``fraction`` of the reference throughput (the run's median, or the
    undisturbed level of a run that changed level), or with a p99 above
    ``latency_factor`` times its median (when ``latency_factor`` > 0)."""
    tps = al.throughput()
    flags = np.zeros(al.seconds, dtype=bool)
    med = median_finite(tps) if reference is None else reference
    if math.isfinite(med):
        finite = np.isfinite(tps)
        flags |= finite & ((tps < fraction * med) if med > 0 else (tps <= 0))
    if latency_factor > 0:
        p99 = al.get("lat_p99_ms")
        med99 = median_finite(p99)
        if math.isfinite(med99) and med99 > 0:
            flags |= np.isfinite(p99) & (p99 > latency_factor * med99)
    return flags


def episodes_of(flags: np.ndarray, merge_gap_s: int) -> list[tuple[int, int]]:
    """(first, last) indices of runs of flagged seconds, merged across gaps of at most
    ``merge_gap_s`` seconds."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(flags):
        if flags[i]:
            j = i
            while j + 1 < len(flags) and flags[j + 1]:
                j += 1
            if spans and i - spans[-1][1] - 1 <= merge_gap_s:
                spans[-1] = (spans[-1][0], j)
            else:
                spans.append((i, j))
            i = j + 1
        else:
            i += 1
    return spans


def _partial_edges(al: Aligned) -> set[int]:
    """Seconds the throughput series may not cover whole: the first and last of the
    transaction log's (its seconds are the log's, not the measured phase's); the tools'
    own progress reports cover whole seconds."""
    if al.has("tps") or al.seconds == 0:
        return set()
    finite = np.flatnonzero(np.isfinite(al.get("tps_log")))
    return {int(finite[0]), int(finite[-1])} if finite.size else set()


def find_stalls(
    al: Aligned,
    *,
    stall_fraction: float | None = None,
    slowdown_fraction: float | None = None,
    slowdown_min_seconds: int | None = None,
    latency_factor: float = LATENCY_FACTOR,
    merge_gap_s: int = MERGE_GAP_S,
) -> list[StallEpisode]:
    """The run's stalls and slowdowns, each with its cause (thresholds: the run's own,
    else the defaults)."""
    if al.seconds == 0:
        return []
    sf, df, dmin = thresholds_of(al)
    sf = sf if stall_fraction is None else stall_fraction
    df = df if slowdown_fraction is None else slowdown_fraction
    dmin = dmin if slowdown_min_seconds is None else slowdown_min_seconds
    # a run that changed level is judged against its undisturbed (higher) level: the lower
    # one is then an episode like any other, with its cause (analysis/levels.py)
    shift = level_shift(al.throughput())
    reference = shift.reference if shift is not None else None
    stall = flagged_seconds(al, sf, 0.0, reference)
    slow = flagged_seconds(al, df, latency_factor, reference) | stall
    for edge in _partial_edges(al):  # a partial second is not a dip by itself
        stall[edge] = slow[edge] = False
    spans = []
    for a, b in episodes_of(slow, merge_gap_s):
        is_stall = bool(stall[a : b + 1].any())
        if is_stall or b - a + 1 >= dmin:
            spans.append((a, b, "stall" if is_stall else "slowdown"))
    inside = np.zeros(al.seconds, dtype=bool)
    for a, b, _ in spans:
        inside[a : b + 1] = True
    return [_episode(al, a, b, kind, inside) for a, b, kind in spans]


def _episode(al: Aligned, a: int, b: int, kind: str, inside: np.ndarray) -> StallEpisode:
    tps = al.throughput()
    outside = ~inside
    med = median_finite(tps[outside]) if outside.any() else median_finite(tps)
    window = tps[a : b + 1]
    finite = window[np.isfinite(window)]
    delayed = float(np.sum(np.clip(med - finite, 0, None))) if math.isfinite(med) else 0.0
    lat = al.get("lat_max_ms")[a : min(al.seconds, b + 2)]  # delayed ones finish just after
    lat = lat[np.isfinite(lat)]
    p99 = al.get("lat_p99_ms")
    p99_in = p99[a : min(al.seconds, b + 2)]
    p99_in = p99_in[np.isfinite(p99_in)]
    usual99 = median_finite(p99[outside]) if outside.any() else math.nan
    ctx = Context(al, a, b, inside)
    verdict = weigh([f for test in HYPOTHESES if (f := test(ctx)) is not None], ctx)
    return StallEpisode(
        start_s=float(a),
        end_s=float(b + 1),
        min_tps=float(finite.min()) if finite.size else 0.0,
        delayed_tx=round(delayed),
        max_latency_ms=float(lat.max()) if lat.size else None,
        kind=kind,
        median_tps=round(med, 1) if math.isfinite(med) else 0.0,
        p99_ms=float(p99_in.max()) if p99_in.size else None,
        usual_p99_ms=round(usual99, 3) if math.isfinite(usual99) else None,
        **verdict,
    )


# ---------------------------------------------------------------- weighing


class Verdict(TypedDict):
    """What weighing the findings of an episode concluded (a StallEpisode's cause fields)."""

    cause: str
    confidence: str
    evidence: tuple[str, ...]
    alternatives: tuple[tuple[str, float, str], ...]
    missing: tuple[str, ...]
    contributing: tuple[str, ...]
    blockers: tuple[dict[str, Any], ...]


def weigh(findings: list[Finding], ctx: Context) -> Verdict:
    """The cause, its confidence, evidence, the alternatives it beat and what is missing."""
    missing = tuple(ctx.missing())
    supported = sorted((f for f in findings if f.support and f.score > 0), key=lambda f: -f.score)
    best = supported[0] if supported else None
    if best is not None:  # what set the best one off comes first, when well supported
        root = next(
            (f for f in supported if best.key in f.explains and f.score >= 0.5 * best.score), None
        )
        best = root or best
    if best is None or best.score < 0.5:
        why = "no known cause fits the evidence of these seconds"
        if missing:
            why += f" ({', '.join(missing)} not recorded)"
        considered = sorted((f for f in findings if f.support), key=lambda f: -f.score)
        near = tuple((f.key, round(f.score, 2), f.why_not()) for f in considered[:4])
        return {
            "cause": "unknown",
            "confidence": "low",
            "evidence": (why,),
            "alternatives": near,
            "missing": missing,
            "contributing": (),
            "blockers": (),
        }
    family = family_of(best.key) | best.explains
    rivals = [
        f
        for f in findings
        if f.key not in family
        and f is not best
        and not (f.key in BY_PLACE_ONLY and best.decisive and not best.contested)
    ]
    runner_up = max((f.score for f in rivals if f.support), default=0.0)
    rival_decisive = any(f.decisive and not f.contested and f.score > 0 for f in rivals)
    if (
        best.decisive
        and not best.contested
        and (best.score >= 1.3 or runner_up <= 0)
        and runner_up <= 0.5 * best.score
        and not rival_decisive
    ):
        confidence = "high"
    elif best.score >= WEAK + GOOD - 1e-9 and runner_up <= 0.75 * best.score:
        confidence = "medium"
    else:
        confidence = "low"
    shown = {c.text for c in best.support}
    contributing = tuple(
        f.key
        for f in supported
        if f is not best
        and f.key in family
        and f.score >= 0.5
        and not {c.text for c in f.support} <= shown
    )
    beaten = [
        f
        for f in findings
        if f is not best and f.key not in contributing and (f.support or f.against)
    ]
    beaten.sort(key=lambda f: (-bool(f.support), -f.score))
    evidence = tuple(c.text for c in sorted(best.support, key=lambda c: -c.weight))
    evidence += tuple(f"against: {c.text}" for c in best.against)
    return {
        "cause": best.key,
        "confidence": confidence,
        "evidence": evidence,
        "alternatives": tuple((f.key, round(f.score, 2), f.why_not()) for f in beaten[:4]),
        "missing": missing,
        "contributing": contributing,
        "blockers": best.blockers,
    }


# ---------------------------------------------------------------- the evidence


class Context:
    """The seconds of one episode, and the rest of the run to compare them with (the
    seconds of no episode; those next to one are left out when enough remain)."""

    def __init__(self, al: Aligned, a: int, b: int, inside: np.ndarray):
        self.al, self.a, self.b = al, a, b
        calm = ~inside
        near = inside.copy()
        near[1:] |= inside[:-1]
        near[:-1] |= inside[1:]
        self.base = calm & ~near if (calm & ~near).sum() >= 3 else calm
        self.n = b - a + 1
        self.throughput_name = "tps" if al.has("tps") else "tps_log"

    # numeric series
    def _in(self, name: str, pad: int = 0) -> np.ndarray:
        v = self.al.get(name)[max(0, self.a - pad) : self.b + 1 + pad]
        out: np.ndarray = v[np.isfinite(v)]
        return out

    def mean_in(self, name: str, pad: int = 0) -> float:
        v = self._in(name, pad)
        return float(v.mean()) if v.size else math.nan

    def max_in(self, name: str) -> float:
        v = self._in(name)
        return float(v.max()) if v.size else math.nan

    def min_in(self, name: str) -> float:
        v = self._in(name)
        return float(v.min()) if v.size else math.nan

    def seconds_below(self, name: str, floor: float) -> int:
        """Seconds of the episode where a series was at or below ``floor``."""
        v = self._in(name)
        return int((v <= floor).sum())

    def min_tps_share(self) -> float:
        """The episode's lowest throughput as a share of the usual (0: a full stop)."""
        low, usual = self.min_in(self.throughput_name), self.usual(self.throughput_name)
        return low / usual if math.isfinite(low) and math.isfinite(usual) and usual > 0 else 1.0

    def usual(self, name: str) -> float:
        v = self.al.get(name)
        return median_finite(v[self.base]) if self.base.any() else math.nan

    def at(self, name: str, i: int) -> float:
        return float(self.al.get(name)[i]) if 0 <= i < self.al.seconds else math.nan

    def rose(self, name: str, factor: float, floor: float) -> tuple[float, float] | None:
        """(during, usual) when a series' mean in the episode is at least ``factor`` times
        its usual value and above ``floor``; None otherwise."""
        inside, usual = self.mean_in(name), self.usual(name)
        if not math.isfinite(inside) or inside < floor:
            return None
        u = usual if math.isfinite(usual) else 0.0
        return (inside, u) if inside >= factor * u else None

    # wait events
    def _mean_waits(self, seconds: Iterable[int]) -> dict[str, float]:
        total: dict[str, float] = {}
        idx = list(seconds)
        for i in idx:
            for event, n in self.al.waits[i].items():
                total[event] = total.get(event, 0.0) + float(n)
        return {e: n / len(idx) for e, n in total.items()} if idx else {}

    def waits_in(self) -> dict[str, float]:
        """Backends per wait event, on average over the episode."""
        if not self.al.waits:
            return {}
        return self._mean_waits(range(self.a, self.b + 1))

    def waits_usual(self) -> dict[str, float]:
        if not self.al.waits:
            return {}
        return self._mean_waits(np.flatnonzero(self.base).tolist())

    def excess_waits(self) -> dict[str, float]:
        """Backends per wait event above the rest of the run (not on the CPU or their
        client): what the episode added."""
        usual = self.waits_usual()
        return {
            e: n - usual.get(e, 0.0)
            for e, n in self.waits_in().items()
            if not e.startswith(("CPU/", "Client/", "Activity/")) and n - usual.get(e, 0.0) > 0.05
        }

    # structured series
    def structured_in(self, name: str) -> list[Any]:
        """A structured series' values during the episode (None where not sampled)."""
        values = self.al.structured.get(name) or []
        return values[self.a : self.b + 1]

    def blocked_in(self) -> tuple[int, dict[tuple[bool, str, str], float]]:
        """(seconds sampled, average processes in uninterruptible sleep per (benchmark?,
        wait kind, where)) over the episode."""
        sampled = [v for v in self.structured_in("blocked") if v is not None]
        totals: dict[tuple[bool, str, str], float] = {}
        for sec in sampled:
            for key, n in sec.items():
                who, wchan, where, _ = _blocked_key(key)
                k = (who == "benchmark", wchan_kind(wchan) + ":" + wchan, where)
                totals[k] = totals.get(k, 0.0) + n
        return len(sampled), {k: v / len(sampled) for k, v in totals.items()} if sampled else {}

    def seconds_blocked(self, kind: str, on_test: bool = True) -> int:
        """Sampled seconds of the episode where a benchmark process slept in the kernel in
        a wait of this kind (on a volume under test)."""
        count = 0
        for sec in self.structured_in("blocked"):
            if not sec:
                continue
            for key in sec:
                who, wchan, where, _ = _blocked_key(key)
                if (
                    who == "benchmark"
                    and wchan_kind(wchan) == kind
                    and (not on_test or where not in ("elsewhere", "unknown"))
                ):
                    count += 1
                    break
        return count

    def caps(self) -> list[tuple[str, float, float, str, bool, bool]]:
        """(series, cap, rate, unit, put on during the episode, at the cap the rest of the
        run too) of each I/O limit the devices under test wrote at. The limits are those
        in effect each second where recorded (a limit someone sets during a run counts),
        else the spec's. A throttle releases writes in bursts, so the rate is taken over
        the episode and 2 s either side (the seconds of it under the limit)."""
        found = []
        lo, hi = max(0, self.a - 2), min(self.al.seconds, self.b + 3)
        for name, unit, series in (
            ("write_mbps", "MB/s", "disk_write_mbps"),
            ("write_iops", "IOPS", "disk_write_iops"),
        ):
            if not self.al.has(series):
                continue
            rates, limits = self.al.get(series)[lo:hi], self.al.get(f"cap_{name}")[lo:hi]
            usual_rate = self.usual(series)
            if np.isfinite(limits).any():  # recorded each second
                under = np.isfinite(limits) & np.isfinite(rates)
                cap, rate = float(np.median(limits[under])), float(np.mean(rates[under]))
                before = self.usual(f"cap_{name}")
                new = not math.isfinite(before) or before > 1.5 * cap
                always = math.isfinite(before) and usual_rate >= 0.85 * before
            elif self.al.limits.get(name):
                cap, rate = float(self.al.limits[name]), self.mean_in(series, pad=2)
                new, always = False, usual_rate >= 0.85 * cap
            else:
                continue
            if math.isfinite(rate) and rate >= 0.85 * cap:
                found.append((series, cap, rate, unit, new, bool(always)))
        return found

    def cap(self) -> bool:
        return bool(self.caps())

    def cap_clue(self) -> Clue | None:
        parts = []
        for series, cap, rate, unit, new, always in self.caps():
            usual = self.usual(series)
            parts.append(
                f"{rate:,.1f} {unit} around the episode; cap {cap:,.4g} {unit}"
                + (", put on the device during the episode" if new else "")
                + "; "
                + (
                    "at the cap the rest of the run too"
                    if always
                    else f"{usual:,.1f} the rest of the run"
                    if math.isfinite(usual)
                    else "nothing the rest of the run"
                )
            )
        if not parts:
            return None
        return Clue(f"writes at the device's limit ({'; '.join(parts)})", GOOD)

    def io_waits(self) -> tuple[float, str]:
        """Backends waiting on I/O or WAL (above the rest of the run), and the top ones."""
        ex = {e: n for e, n in self.excess_waits().items() if e.startswith(IO_WAITS)}
        return sum(ex.values()), top(ex)

    def missing(self) -> list[str]:
        out = []
        if not self.al.waits:
            out.append("wait events (samplers off)")
        if not self.al.sampled("blocked"):
            out.append("the process table (processes stuck in the kernel, outside processes)")
        if not self.al.sampled("blockers"):
            out.append("lock blockers")
        if not self.al.has("disk_write_mbps"):
            out.append("device I/O")
        elif self.al.under_test and not self.al.beneath:
            pass  # real devices: nothing beneath them
        if not self.al.has("dirty_kb"):
            out.append("dirty and writeback memory")
        if not self.al.has("lat_p99_ms"):
            out.append("per-second latency (transaction log)")
        return out

    def span(self) -> tuple[float, float]:
        return float(self.a), float(self.b + 1)

    def calm_share(self, lo: float, hi: float) -> float:
        """The share of the rest of the run's seconds that overlap [lo, hi] (seconds of
        the measured phase): near 1 for something that was there all along."""
        idx = np.flatnonzero(self.base)
        if not idx.size:
            return math.nan
        return float(np.mean((idx + 1 > lo) & (idx < hi)))


def top(waits: dict[str, float], k: int = 4) -> str:
    return ", ".join(f"{e} {n:.1f}" for e, n in sorted(waits.items(), key=lambda x: -x[1])[:k])


def _mb(kb: float) -> str:
    return f"{kb / 1024:,.0f} MB"


# ---------------------------------------------------------------- the causes


def _fs_frozen(c: Context) -> Finding | None:
    f = Finding("fs_frozen")
    sampled, blocked = c.blocked_in()
    frozen = c.seconds_blocked("freeze")
    if frozen:
        who = {
            (k[1].split(":", 1)[1], k[2]): n
            for k, n in blocked.items()
            if k[0] and k[1].startswith("freeze:") and k[2] not in ("elsewhere", "unknown")
        }
        where = ", ".join(f"{n:.1f} in {w} on the {v} volume" for (w, v), n in who.items())
        f.support.append(
            Clue(
                f"benchmark processes asleep in the kernel waiting for the "
                f"filesystem to thaw in {frozen} of {sampled} sampled "
                f"second(s) ({where})",
                STRONG if frozen * 2 >= sampled else GOOD,
            )
        )
    writes, usual = c.mean_in("disk_write_mbps"), c.usual("disk_write_mbps")
    # an episode's first and last seconds are often partly before or after the freeze:
    # nothing written in most of its seconds is what a freeze looks like
    quiet = (
        c.seconds_below("disk_write_mbps", max(0.05, 0.05 * usual))
        if math.isfinite(usual) and usual >= 0.2
        else 0
    )
    nothing = quiet * 2 >= c.n and quiet > 0
    if frozen and nothing:
        f.support.append(
            Clue(
                f"nothing written to the devices under test in {quiet} of "
                f"{c.n} second(s) ({usual:.1f} MB/s the rest of the run)",
                GOOD,
            )
        )
    if frozen:
        io, names = c.io_waits()
        if io >= 0.5:
            f.support.append(Clue(f"backends waiting on I/O or WAL: {names}", GOOD))
    if sampled and not frozen and c.min_tps_share() <= 0.1:
        f.against.append(
            Clue(
                "no benchmark process was asleep in the kernel on a frozen "
                "filesystem (a freeze puts every writer there)",
                STRONG,
            )
        )
    elif not sampled and nothing:
        io, names = c.io_waits()
        if io >= 0.5:
            f.support.append(
                Clue(
                    f"nothing written to the devices under test "
                    f"({writes:.2f} MB/s, {usual:.1f} the rest of the run) "
                    f"while backends waited on I/O ({names}); the process "
                    "table, which tells a freeze apart, was not recorded",
                    WEAK,
                )
            )
    if math.isfinite(writes) and math.isfinite(usual) and usual > 0.2 and writes >= 0.5 * usual:
        f.against.append(
            Clue(
                f"the devices under test kept writing ({writes:.1f} MB/s, "
                f"{usual:.1f} the rest of the run)",
                GOOD,
            )
        )
    holder = _lock_holders(c)
    if holder:
        f.against.append(
            Clue(
                f"backends waited on a lock held by a session that was not "
                f"stuck in the kernel (pid {holder[0].get('pid')})",
                STRONG,
            )
        )
    return f if f.support or f.against else None


def _device_stalled(c: Context) -> Finding | None:
    """The device stopped completing I/O (dead, or holding requests): requests in flight,
    none completed, the benchmark asleep on I/O."""
    f = Finding("device_stalled")
    devices = c.al.under_test
    in_flight = sum(
        c.mean_in(f"disk.{d}.in_flight") for d in devices if c.al.has(f"disk.{d}.in_flight")
    )
    ios = c.mean_in("disk_write_iops") + (
        c.mean_in("disk_read_iops") if c.al.has("disk_read_iops") else 0.0
    )
    if not (math.isfinite(in_flight) and in_flight >= 1 and math.isfinite(ios) and ios < 1):
        return None
    f.support.append(
        Clue(
            f"{in_flight:.1f} request(s) in flight on the devices under test and none completed",
            GOOD,
        )
    )
    io_secs = c.seconds_blocked("io")
    if io_secs:
        f.support.append(
            Clue(
                f"benchmark processes asleep in the kernel waiting for I/O in {io_secs} second(s)",
                GOOD,
            )
        )
    if c.cap():
        f.against.append(
            Clue("the devices wrote at their emulated limit around it: throttled, not dead", STRONG)
        )
    return f


def _lock_holders(c: Context) -> list[dict[str, object]]:
    """The sessions at the root of the lock waits of the episode that were not slowed by
    I/O themselves: idle in a transaction, outside the workload, or busy with something
    else than I/O for a while. Aggregated over the episode's seconds, by pid."""
    roots: dict[Any, dict[str, Any]] = {}
    for sec in c.structured_in("blockers"):
        for b in sec or []:
            wait = str(b.get("wait") or "")
            if wait.startswith("Lock/"):
                continue  # in the middle of a chain: waits itself
            pid = b.get("pid")
            seen = roots.setdefault(pid, {**b, "seconds": 0})
            seen["seconds"] += 1
            seen["waiters"] = max(int(seen.get("waiters") or 0), int(b.get("waiters") or 0))
            for k in ("xact_s", "state_s"):
                if (b.get(k) or 0) > (seen.get(k) or 0):
                    seen[k] = b[k]
    held = []
    for r in roots.values():
        state, wait = str(r.get("state") or ""), str(r.get("wait") or "")
        idle = state.startswith("idle in transaction") and (r.get("state_s") or 0) >= 0.5
        busy_elsewhere = (
            state == "active"
            and not wait.startswith(IO_WAITS)
            and not wait.startswith("CPU/")
            and (r.get("state_s") or 0) >= 0.5
        )
        long_tx = (r.get("xact_s") or 0) >= max(1.0, 0.5 * c.n)
        if (
            r.get("origin") in ("outside", "prepared transaction")
            or idle
            or busy_elsewhere
            or (long_tx and not wait.startswith(IO_WAITS))
        ):
            held.append(r)
    return sorted(held, key=lambda r: (-int(r.get("waiters") or 0), -(r.get("xact_s") or 0)))


def describe_blocker(r: dict[str, Any]) -> str:
    origin = {
        "outside": "a session from outside the workload",
        "workload": "a workload session",
        "pgfsbench": "pgfsbench's own session",
    }.get(str(r.get("origin")), str(r.get("origin")))
    parts = [
        f"pid {r.get('pid')} ({origin}"
        + (f", application {r['app']!r}" if r.get("app") else "")
        + ")"
    ]
    state = r.get("state") or "?"
    parts.append(f"{state}" + (f" for {r['state_s']:g} s" if r.get("state_s") else ""))
    if state == "active":
        parts.append(f"waiting on {r.get('wait')}")
    if r.get("xact_s") is not None:
        parts.append(f"its transaction open {r['xact_s']:g} s")
    text = ", ".join(parts) + f", blocked {r.get('waiters')} backend(s)"
    if r.get("query"):
        text += f" (last statement: {r['query']})"
    return text


def _locks(c: Context) -> Finding | None:
    waits, usual = c.waits_in(), c.waits_usual()
    locks_in = sum(n for e, n in waits.items() if e.startswith("Lock/"))
    if locks_in < 0.5:
        return None
    locks_usual = sum(n for e, n in usual.items() if e.startswith("Lock/"))
    f = Finding("locks")
    excess = locks_in - locks_usual
    lock_events = top({e: n for e, n in waits.items() if e.startswith("Lock/")})
    if excess < max(0.5, 0.5 * locks_usual):
        f.against.append(
            Clue(
                f"lock waits as usual ({locks_in:.1f} backends, "
                f"{locks_usual:.1f} the rest of the run): they explain "
                "nothing",
                STRONG,
            )
        )
        return f
    # more lock waits follow any stall (transactions stuck in their commit keep their row
    # locks): only who holds them says whether the lock is the cause
    f.support.append(
        Clue(
            f"{locks_in:.1f} backends waiting on locks ({lock_events}), "
            f"{locks_usual:.1f} the rest of the run",
            WEAK,
        )
    )
    if not c.al.sampled("blockers"):
        return f
    held = _lock_holders(c)
    if held:
        f.blockers = tuple(held[:3])
        f.support.append(Clue("held by " + describe_blocker(held[0]), STRONG))
        return f
    io_roots = {
        str(b.get("wait"))
        for sec in c.structured_in("blockers")
        for b in sec or []
        if str(b.get("wait") or "").startswith(IO_WAITS)
    }
    if io_roots:
        f.against.append(
            Clue(
                "the sessions holding the locks were themselves waiting on "
                f"I/O ({', '.join(sorted(io_roots)[:3])}): the lock waits "
                "follow from a slower holder",
                GOOD,
            )
        )
    return f


def _checkpoint(c: Context) -> Finding | None:
    lo, hi = c.span()
    found = [cp for cp in c.al.checkpoints if not (cp.ended_s < lo - 1 or cp.start > hi + 1)]
    if not found:
        return None
    cp = max(found, key=lambda x: x.buffers)
    in_sync = not cp.running and cp.sync_start <= hi + 1 and cp.ended_s >= lo - 0.5
    f = Finding("checkpoint")
    f.support.append(
        Clue(
            f"checkpoint ({cp.reason or 'unknown reason'}) from {cp.start:+.1f} s, still "
            "running when the run ended"
            if cp.running
            else f"checkpoint ({cp.reason or 'unknown reason'}) from "
            f"{cp.start:+.1f} s to {cp.ended_s:+.1f} s: write {cp.write_s:g} s,"
            f" sync {cp.sync_s:g} s, {cp.buffers} buffers",
            WEAK,
        )
    )
    always = c.calm_share(cp.sync_start, cp.ended_s)
    # in its sync phase, and the rest of the run mostly not (NaN: no rest to compare)
    telling = in_sync and not always >= 0.5
    if in_sync and not telling:  # what is always there explains nothing
        f.against.append(
            Clue(
                f"its sync phase also covers {always:.0%} of the run's seconds without "
                "an episode: being in it does not set these seconds apart",
                WEAK,
            )
        )
    if telling:
        f.support.append(Clue("the episode falls in its sync phase", GOOD))
    surge = write_surge(c)
    if surge and in_sync:
        # what sets these seconds apart in a sync phase that lasts: one of its fsyncs
        # sending a file's dirty pages to the device at once
        f.support.append(Clue(f"{surge} while it was syncing: the burst of an fsync", GOOD))
    elif surge and cp.running:
        # its phase is not known before it ends, and a burst has other writers (the
        # kernel's writeback, a filesystem's own commit): it only fits
        f.support.append(
            Clue(f"{surge} while it was running (its phase is not known before it ends)", WEAK)
        )
    if -1 <= lo - cp.start <= 3 and not telling:
        f.support.append(
            Clue(f"the episode began {lo - cp.start:+.1f} s after the checkpoint started", GOOD)
        )
    _rose_clue(
        c,
        f,
        ("wal_fpi_per_s", 2.0, 50.0),
        "full-page images in WAL {:,.0f}/s ({:,.0f} the rest of the run): every page's "
        "first change after the checkpoint began",
    )
    _rose_clue(
        c,
        f,
        ("checkpoint_buffers_per_s", 2.0, 10.0),
        "checkpointer writing {:,.0f} buffers/s ({:,.0f} the rest of the run)",
    )
    _io_clues(c, f)
    writes = c.mean_in("disk_write_mbps", pad=1)
    if (
        math.isfinite(writes)
        and writes < 0.05
        and not c.cap()
        and not c.mean_in("writeback_kb") > 1024
    ):
        f.against.append(
            Clue(
                "the devices under test wrote nothing around it: the "
                "checkpoint cannot be what held them",
                GOOD,
            )
        )
    return f


def write_surge(c: Context) -> str | None:
    """The devices under test writing at least three times their usual rate (in MB/s or
    in writes a second) during the episode, in words; None when they did not."""
    mb = c.rose("disk_write_mbps", 3.0, 5.0)
    ops = c.rose("disk_write_iops", 3.0, 200.0)
    if not (mb or ops):
        return None
    during = [f"{c.mean_in('disk_write_mbps'):,.1f} MB/s"] if c.al.has("disk_write_mbps") else []
    usual = [f"{c.usual('disk_write_mbps'):,.1f}"] if c.al.has("disk_write_mbps") else []
    if c.al.has("disk_write_iops"):
        during.append(f"{c.mean_in('disk_write_iops'):,.0f} writes/s")
        usual.append(f"{c.usual('disk_write_iops'):,.0f}")
    return (
        f"the devices under test wrote {', '.join(during)} in it "
        f"({', '.join(usual)} the rest of the run)"
    )


def _io_clues(c: Context, f: Finding) -> None:
    """What any cause of more I/O than the device takes shares: the device at its cap or
    busy, backends waiting on I/O."""
    cap = c.cap_clue()
    if cap:
        f.support.append(cap)
    else:
        util = c.mean_in("disk_util_pct")
        aw = c.rose("disk_await_ms", 3.0, 0.5)
        if math.isfinite(util) and util >= 90 and aw:
            f.support.append(
                Clue(
                    f"devices under test {util:.0f}% busy, {aw[0]:.1f} ms a "
                    f"request ({aw[1]:.2f} the rest of the run)",
                    GOOD,
                )
            )
    io, names = c.io_waits()
    if io >= 0.5:
        f.support.append(
            Clue(f"backends waiting on I/O or WAL above the rest of the run: {names}", GOOD)
        )


def _wal_segment_creation(c: Context) -> Finding | None:
    ex = c.excess_waits()
    init = {e: n for e, n in ex.items() if e.startswith("IO/WALInit")}
    total_init = sum(init.values())
    if total_init < 0.05:
        return None
    share = total_init / max(sum(ex.values()), 1e-9)
    f = Finding("wal_segment_creation")
    f.support.append(
        Clue(
            f"backends waiting on WAL segment creation: {top(init)} "
            f"({share * 100:.0f}% of the waiting the episode added)",
            STRONG if total_init >= 0.3 or share >= 0.2 else GOOD if total_init >= 0.1 else WEAK,
        )
    )
    added = [cp.wal_added for cp in c.al.checkpoints if cp.wal_added]
    if added:
        f.support.append(Clue(f"checkpoints report {sum(added)} WAL file(s) added", WEAK))
    cap = c.cap_clue()
    if cap:
        f.support.append(cap)
    return f


def _writeback(c: Context) -> Finding | None:
    """The storage's own dirty pages written back in a surge."""
    if not (c.al.has("dirty_kb") and c.al.has("writeback_kb")):
        return None
    before, low = c.at("dirty_kb", c.a - 1), c.min_in("dirty_kb")
    throttled = c.seconds_blocked("dirty", on_test=False)
    f = Finding("writeback")
    if throttled:
        f.support.append(
            Clue(
                f"writers throttled by the kernel for dirty memory "
                f"(balance_dirty_pages) in {throttled} second(s)",
                STRONG,
            )
        )
    if (
        math.isfinite(before)
        and math.isfinite(low)
        and before >= 20 * 1024
        and (before - low) / before >= 0.3
    ):
        ours = c.rose("disk_write_mbps", 2.0, 1.0)
        wb = c.rose("writeback_kb", 2.0, 1024)
        if ours or wb:
            f.support.append(
                Clue(
                    f"Dirty fell from {_mb(before)} to {_mb(low)} while "
                    + (
                        f"the devices under test wrote {ours[0]:,.1f} MB/s ({ours[1]:,.1f} the "
                        "rest of the run)"
                        if ours
                        else f"Writeback rose to {_mb(c.max_in('writeback_kb'))}"
                    ),
                    GOOD,
                )
            )
    if not f.support:
        return None
    _io_clues(c, f)
    return f


def _beneath(c: Context, figure: str) -> tuple[float, float, float, float] | None:
    """(the disks beneath: during, usual; the part the storage under test does not
    explain: during, usual) for write_mbps or read_mbps."""
    if not c.al.beneath or not all(c.al.has(f"disk.{d}.{figure}") for d in c.al.beneath):
        return None
    total = sum((c.al.device(d, figure) for d in c.al.beneath), np.zeros(c.al.seconds))
    ours = c.al.get(f"disk_{figure}")
    other = np.clip(total - np.nan_to_num(ours), 0, None)
    sl = slice(c.a, c.b + 1)

    def med(v: np.ndarray) -> float:
        return median_finite(v[c.base]) if c.base.any() else 0.0

    return (float(np.nanmean(total[sl])), med(total), float(np.nanmean(other[sl])), med(other))


def _host_io(c: Context) -> Finding | None:
    """Another workload on the disk that holds the storage under test (or on its own
    devices): the disk beneath busier than the storage explains, outside processes doing
    I/O."""
    f = Finding("host_io")
    disks = ", ".join(c.al.beneath)
    io = c.rose("outside_write_mbps", 3.0, 10.0) or c.rose("outside_read_mbps", 3.0, 10.0)
    before, low = c.at("dirty_kb", c.a - 1), c.min_in("dirty_kb")
    host_writeback = math.isfinite(before) and before >= 100 * 1024 and low <= 0.7 * before
    # traffic on the disk beneath that neither a process outside the benchmark nor the
    # host's writeback explains is the kernel's, for the storage under test (a sparse
    # loop file's allocation): it counts only when one of them does
    explained = bool(io) or host_writeback
    extra = []
    for figure, verb in (("write_mbps", "wrote"), ("read_mbps", "read")):
        b = _beneath(c, figure)
        if b is None:
            continue
        total, _usual_total, other, usual_other = b
        if other >= max(20.0, 3 * usual_other):
            extra.append(
                Clue(
                    f"the disk beneath ({disks}) {verb} {total:,.1f} MB/s, "
                    f"{other:,.1f} of it not from the storage under test "
                    f"({usual_other:,.1f} the rest of the run)",
                    GOOD if explained else WEAK,
                )
            )
    f.support += extra
    aw = [
        (d, c.mean_in(f"disk.{d}.await_ms"), c.usual(f"disk.{d}.await_ms"))
        for d in c.al.beneath
        if c.al.has(f"disk.{d}.await_ms")
    ]
    slow = [(d, x, u) for d, x, u in aw if math.isfinite(x) and x >= max(1.0, 3 * u)]
    if slow and extra and explained:
        d, x, u = slow[0]
        f.support.append(Clue(f"{d} took {x:.2f} ms a request ({u:.2f} the rest of the run)", GOOD))
    if io:
        names = _top_outside(c, "io")
        f.support.append(
            Clue(
                f"processes outside the benchmark did {io[0]:,.1f} MB/s of I/O "
                f"({io[1]:,.1f} the rest of the run): {names}",
                STRONG if extra else GOOD,
            )
        )
    if host_writeback and extra:
        f.support.append(Clue(f"host writeback: Dirty fell from {_mb(before)} to {_mb(low)}", WEAK))
    if extra and not explained and c.al.sampled("outside_top"):
        f.against.append(
            Clue(
                "no process outside the benchmark did I/O and the host's dirty "
                "memory did not fall: the extra traffic is the kernel's, for "
                "the storage under test",
                GOOD,
            )
        )
    return f if f.support else None


def _top_outside(c: Context, by: str) -> str:
    """The outside processes that used the most CPU or I/O during the episode, those of one
    command line together."""
    named = top_outside(c.structured_in("outside_top"), c.n, by)
    return named or "not named (the process table was not recorded)"


def _rose_clue(
    c: Context,
    f: Finding,
    rule: tuple[str, float, float],
    text: str,
    weight: float = GOOD,
) -> None:
    """A clue for ``f`` when series ``rule[0]`` rose at least ``rule[1]`` times its usual
    value, above ``rule[2]``: ``text`` formatted with (during, usual)."""
    rose = c.rose(*rule)
    if rose:
        f.support.append(Clue(text.format(*rose), weight))


def _host_cpu(c: Context) -> Finding | None:
    used = c.rose("outside_cpu_pct", 2.0, 40.0)
    if not used or used[0] - used[1] < 40:
        return None
    f = Finding("host_cpu")
    idle = c.mean_in("cpu_idle_pct")
    squeezed = (math.isfinite(idle) and idle <= 10) or (
        c.rose("psi_cpu_some_pct", 2.0, 20.0) is not None
    )
    f.support.append(
        Clue(
            f"processes outside the benchmark used {used[0]:.0f}% of a CPU "
            f"({used[1]:.0f}% the rest of the run): "
            f"{_top_outside(c, 'cpu')}",
            STRONG if squeezed else GOOD,
        )
    )
    own = c.rose("own_cpu_pct", 0.0, 0.0)
    if own is not None:
        mine, usual = c.mean_in("own_cpu_pct"), c.usual("own_cpu_pct")
        if math.isfinite(usual) and mine <= 0.8 * usual:
            f.support.append(
                Clue(
                    f"the benchmark's processes got {mine:.0f}% of a CPU "
                    f"({usual:.0f}% the rest of the run)",
                    WEAK,
                )
            )
    if math.isfinite(idle) and idle >= 30:
        f.against.append(Clue(f"the CPUs were {idle:.0f}% idle", GOOD))
    return f


def _steal(c: Context) -> Finding | None:
    st = c.rose("cpu_steal_pct", 2.0, 10.0)
    if not st or st[0] - st[1] < 10:
        return None
    return Finding(
        "steal",
        [
            Clue(
                f"the hypervisor took {st[0]:.0f}% of the CPUs (steal; "
                f"{st[1]:.0f}% the rest of the run)",
                STRONG if st[0] - st[1] >= 20 else GOOD,
            )
        ],
    )


def _reclaim(c: Context) -> Finding | None:
    f = Finding("reclaim")
    names = [
        n
        for n in ("vm_allocstall_normal", "vm_allocstall_movable", "vm_pgscan_direct")
        if c.al.has(n)
    ]
    if names:
        inside = sum(float(np.nansum(c.al.get(n)[c.a : c.b + 1])) for n in names)
        outside = sum(float(np.nansum(c.al.get(n)[c.base])) for n in names)
        per_in, per_out = inside / c.n, outside / max(1, int(c.base.sum()))
        if inside > 0 and per_in >= 5 * per_out + 1:
            f.support.append(
                Clue(
                    f"direct reclaim during the episode: {per_in:,.0f} pages "
                    f"or stalls/s (allocstall, pgscan_direct; {per_out:,.1f}/s "
                    "the rest of the run)",
                    GOOD,
                )
            )
    _rose_clue(
        c,
        f,
        ("memcg_limit_hits_per_s", 5.0, 10.0),
        "PostgreSQL's memory cgroup hit its limit {:,.0f} times a second ({:,.0f} the rest "
        "of the run)",
    )
    for name, what in (
        ("memcg_refaults_per_s", "refaults of evicted pages"),
        ("memcg_majfaults_per_s", "major faults"),
    ):
        _rose_clue(
            c,
            f,
            (name, 5.0, 50.0),
            what + " in its memory cgroup {:,.0f}/s ({:,.0f} the rest of the run)",
            WEAK,
        )
    _rose_clue(
        c,
        f,
        ("psi_memory_some_pct", 4.0, 10.0),
        "tasks stalled on memory {:.0f}% of the time (pressure; {:.0f}% the rest of the run)",
        STRONG,
    )
    stuck = c.seconds_blocked("reclaim", on_test=False)
    if stuck:
        f.support.append(
            Clue(
                f"benchmark processes asleep in the kernel reclaiming memory in {stuck} second(s)",
                STRONG,
            )
        )
    return f if f.support else None


def _pooler(c: Context) -> Finding | None:
    """The pool full: clients queue in the pooler for a server connection."""
    waiting = c.rose("pooler_clients_waiting", 2.0, 0.5)
    if not waiting or waiting[0] - waiting[1] < 0.5:
        return None
    f = Finding("pooler")
    f.support.append(
        Clue(
            f"{waiting[0]:.1f} clients waited in the pooler for a server "
            f"connection ({waiting[1]:.1f} the rest of the run)",
            GOOD,
        )
    )
    active, usual = c.mean_in("pooler_servers_active"), c.usual("pooler_servers_active")
    if math.isfinite(active) and math.isfinite(usual) and active >= max(1.0, 0.9 * usual):
        f.support.append(
            Clue(
                f"every server connection of the pool busy ({active:.1f}, "
                f"{usual:.1f} the rest of the run)",
                GOOD,
            )
        )
    _rose_clue(
        c,
        f,
        ("pooler_wait_ms", 3.0, 1.0),
        "a client's wait for a connection {:,.1f} ms ({:,.2f} the rest of the run)",
    )
    return f


def _device_saturated(c: Context) -> Finding | None:
    f = Finding("device_saturated")
    _io_clues(c, f)
    throttled = [(cap, unit) for _, cap, _, unit, new, _ in c.caps() if new]
    if throttled:
        f.support.append(
            Clue(
                "an I/O limit was put on the devices under test during the "
                "episode (blkio: "
                + ", ".join(f"{cap:,.4g} {unit}" for cap, unit in throttled)
                + "; none as low the rest of the run)",
                STRONG,
            )
        )
    if not any("device's limit" in s.text or "busy" in s.text for s in f.support):
        return None
    b = _beneath(c, "write_mbps")
    if b is not None and b[2] >= max(20.0, 3 * b[3]):
        f.against.append(
            Clue(
                f"the disk beneath was busy with I/O not from the storage "
                f"under test ({b[2]:,.1f} MB/s of writes)",
                GOOD,
            )
        )
    return f


def _stopped(c: Context) -> Finding | None:
    """A process of the benchmark stopped (state T: SIGSTOP, a debugger): pgbench itself,
    a backend holding locks, the WAL writer..."""
    seconds = c.seconds_blocked("stopped", on_test=False)
    if not seconds:
        return None
    names: dict[str, float] = {}
    for sec in c.structured_in("blocked"):
        for key, n in (sec or {}).items():
            who, wchan, _, comm = _blocked_key(key)
            if who == "benchmark" and wchan == "stopped":
                names[comm or "?"] = max(names.get(comm or "?", 0), n)
    what = ", ".join(f"{n:g} {comm}" for comm, n in names.items())
    f = Finding(
        "stopped",
        [
            Clue(
                f"benchmark processes stopped (state T) in {seconds} of {c.n} second(s): {what}",
                STRONG if seconds * 2 >= c.n else GOOD,
            )
        ],
    )
    # a stopped client sends nothing more: its sessions stay idle in their transactions,
    # and the backends whose statements were already sent wait on their row locks. Those
    # lock waits are the stop's, not a cause of their own
    idle = [
        r
        for r in (_lock_holders(c) if c.al.sampled("blockers") else [])
        if r.get("origin") == "workload"
        and str(r.get("state") or "").startswith("idle in transaction")
    ]
    if idle:
        f.support.append(
            Clue(
                f"the locks others waited on were held by {len(idle)} workload "
                "session(s) idle in their transactions: their client sent "
                "nothing while it was stopped",
                GOOD,
            )
        )
        f.explains = frozenset({"locks"})
    return f


def _outside_session(c: Context) -> Finding | None:
    """Sessions from outside the workload at work in the server (a report, a bulk update,
    a VACUUM by hand): they take the server's CPU, I/O and WAL from the workload."""
    if not c.al.sampled("outside_sessions"):
        return None
    every = c.al.structured["outside_sessions"]
    during = [v for v in c.structured_in("outside_sessions") if v is not None]
    before = [v for i, v in enumerate(every) if c.base[i] and v is not None]
    busy_in = sum(len(v) for v in during) / max(1, len(during))
    busy_usual = sum(len(v) for v in before) / max(1, len(before))
    if not during or busy_in - busy_usual < 0.5:
        return None
    seen: dict[Any, dict[str, Any]] = {}
    for sec in during:
        for sess in sec:
            seen[sess.get("pid")] = {**seen.get(sess.get("pid"), {}), **sess}
    first = max(seen.values(), key=lambda x: x.get("state_s") or 0)
    f = Finding("outside_session")
    f.support.append(
        Clue(
            f"{busy_in:.1f} session(s) from outside the workload at work "
            f"({busy_usual:.1f} the rest of the run): " + describe_session(first),
            GOOD,
        )
    )
    cpu = _cpu_of(c, set(seen))
    if cpu >= 30:
        f.support.append(
            Clue(
                f"{'its backend' if len(seen) == 1 else 'their backends'} used {cpu:.0f}% of a CPU",
                GOOD,
            )
        )
    wal, commits = c.mean_in("wal_mbps"), c.mean_in("commits_per_s")
    wal_u, commits_u = c.usual("wal_mbps"), c.usual("commits_per_s")
    if (
        all(math.isfinite(x) for x in (wal, commits, wal_u, commits_u))
        and wal_u > 0
        and commits_u > 0
        and wal / max(commits, 1.0) >= 3 * wal_u / commits_u
        and wal >= 0.5 * wal_u
    ):
        f.support.append(
            Clue(
                f"WAL written at {wal:,.1f} MB/s while commits fell to "
                f"{commits:,.0f}/s ({wal_u:,.1f} MB/s for {commits_u:,.0f}/s "
                "the rest of the run): not the workload's",
                GOOD,
            )
        )
        f.explains = IO_LOAD  # its WAL and writes are what filled the device
    elif any(str(x.get("wait") or "").startswith(IO_WAITS) for x in seen.values()):
        f.explains = IO_LOAD
    return f


def _cpu_of(c: Context, pids: set[Any]) -> float:
    """The average CPU (% of one) the benchmark's processes ``pids`` used over the
    episode, from the top CPU users recorded each second."""
    total = 0.0
    for sec in c.structured_in("own_top"):
        total += sum(row[3] for row in sec or [] if row[0] in pids)
    return total / max(1, c.n)


def describe_session(r: dict[str, Any]) -> str:
    """A session of pg_stat_activity in words."""
    text = f"pid {r.get('pid')}" + (f" (application {r['app']!r})" if r.get("app") else "")
    text += f", {r.get('state') or '?'}"
    if r.get("state_s") is not None:
        text += f" for {r['state_s']:g} s"
    if r.get("state") == "active":
        text += f", waiting on {r.get('wait')}"
    if r.get("query"):
        text += f" (statement: {r['query']})"
    return text


def _snapshot(c: Context) -> Finding | None:
    lo, hi = c.span()
    hits = [
        e for e in c.al.events if e.kind == "snapshot" and e.start_s <= hi + 1 and e.end_s >= lo - 1
    ]
    if not hits:
        return None
    return Finding(
        "snapshot",
        [
            Clue(f"{e.label} at {e.start_s:+.1f} s (took {e.end_s - e.start_s:.1f} s)", STRONG)
            for e in hits
        ],
    )


def _start_up(c: Context) -> Finding | None:
    """The measured phase's first second: the tool connected its clients (pgbench's first
    progress interval includes that), then every client sent its first transaction at once,
    each in a new backend whose caches are cold. What makes that second slow is the start,
    not the storage, when it is the only second: each client's second transaction already
    runs warm."""
    start = c.al.start
    if start is None or c.a != 0:
        return None
    f = Finding("start_up")
    nxt = c.at(c.throughput_name, c.b + 1)
    usual = c.usual(c.throughput_name)
    f.support.append(
        Clue(
            f"the measured phase's first second{'s' if c.n > 1 else ''}: the tool "
            f"connected its {start.clients} clients in {start.connect_ms:,.0f} ms, then "
            "each sent its first transaction, in a new backend",
            WEAK,
        )
    )
    surge = write_surge(c)
    if surge:
        f.against.append(Clue(f"{surge}: clients connecting write nothing of the kind", GOOD))
    if start.connect_ms / 1000 >= 0.9 * c.n:
        f.support.append(
            Clue(f"connecting took {start.connect_ms:,.0f} ms of the episode's {c.n} s", STRONG)
        )
    elif c.n > 1:
        f.against.append(
            Clue(
                f"it lasted {c.n} s: longer than connecting ({start.connect_ms:,.0f} ms) "
                "and one transaction of each client",
                GOOD,
            )
        )
    elif math.isfinite(nxt) and math.isfinite(usual) and usual > 0:
        if nxt >= 0.5 * usual:
            f.support.append(
                Clue(
                    f"the first second only: the next ran at {nxt:,.0f} "
                    f"({usual:,.0f} the rest of the run)",
                    GOOD,
                )
            )
        else:
            f.against.append(
                Clue(f"the second after it was slow too ({nxt:,.0f}, usually {usual:,.0f})", WEAK)
            )
    return f


HYPOTHESES: tuple[Callable[[Context], Finding | None], ...] = (
    _fs_frozen,
    _device_stalled,
    _locks,
    _checkpoint,
    _wal_segment_creation,
    _writeback,
    _device_saturated,
    _host_io,
    _host_cpu,
    _steal,
    _reclaim,
    _pooler,
    _snapshot,
    _stopped,
    _outside_session,
    _start_up,
)
