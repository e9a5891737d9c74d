"""Why did TPS drop? Stall episodes of a run and their probable causes (pure).

An episode is a stretch of seconds where throughput falls below a fraction of the run's
median (0 included), or where the per-second p99 latency rises above a multiple of its
median; episodes closer than a couple of seconds are one. For each, the evidence of the
same seconds is weighed for every known cause, and the best is named with a confidence:

- the filesystem not accepting writes: backends waiting on I/O while nothing reaches the
  devices (the signature of a frozen filesystem or a dead device);
- a checkpoint in its write or sync phase (from the server log and the checkpointer's
  counters);
- WAL segment creation (WALInit* waits: zero-filling new segments);
- a dirty-page writeback surge (Dirty falling fast, Writeback up, the disk busy);
- page reclaim (direct reclaim, allocation stalls);
- lock waits; CPU saturation; the device at its limit; a snapshot taken then;
- "unknown" when nothing fits, saying which evidence was missing.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from pgfsbench.analysis.series import Aligned, median_finite

MIN_USUAL_WRITE_MBPS = 0.2  # below this, "nothing written" is the run's normal state

CAUSES = {
    "fs_not_accepting_writes": "the filesystem was not accepting writes",
    "checkpoint": "a checkpoint",
    "wal_segment_creation": "WAL segment creation (zero-filling new segments)",
    "writeback": "a dirty-page writeback surge",
    "reclaim": "page reclaim (memory pressure)",
    "locks": "lock waits",
    "cpu": "CPU saturation",
    "device_saturated": "the device at its limit",
    "snapshot": "a snapshot taken during the run",
    "unknown": "unknown",
}


@dataclass(frozen=True)
class Cause:
    key: str
    score: float  # 0..1: how well the evidence fits
    evidence: tuple[str, ...]

    @property
    def text(self) -> str:
        return CAUSES[self.key]


@dataclass(frozen=True)
class StallEpisode:
    start_s: float  # seconds into the measured phase
    end_s: float
    min_tps: float
    delayed_tx: int  # transactions short of the run's median pace during the episode
    max_latency_ms: float | None
    cause: str  # a key of CAUSES
    confidence: str  # high, medium, low
    evidence: tuple[str, ...]
    alternatives: tuple[tuple[str, float], ...] = ()
    missing: tuple[str, ...] = ()

    @property
    def cause_text(self) -> str:
        return CAUSES[self.cause]

    @property
    def label(self) -> str:
        return f"stall {self.start_s:g}–{self.end_s:g} s: {self.cause_text}"

    def as_dict(self) -> dict[str, Any]:
        return {"start_s": self.start_s, "end_s": self.end_s, "min_tps": self.min_tps,
                "delayed_tx": self.delayed_tx, "max_latency_ms": self.max_latency_ms,
                "cause": self.cause, "cause_text": self.cause_text,
                "confidence": self.confidence, "evidence": list(self.evidence),
                "alternatives": [{"cause": k, "score": round(s, 2)}
                                 for k, s in self.alternatives],
                "missing_evidence": list(self.missing)}


# ---------------------------------------------------------------- finding episodes


def flagged_seconds(al: Aligned, tps_fraction: float, latency_factor: float) -> np.ndarray:
    tps = al.throughput()
    flags = np.zeros(al.seconds, dtype=bool)
    med = median_finite(tps)
    if math.isfinite(med):
        finite = np.isfinite(tps)
        flags |= finite & ((tps < tps_fraction * med) if med > 0 else (tps <= 0))
    p99 = al.get("lat_p99_ms")
    med99 = median_finite(p99)
    if math.isfinite(med99) and med99 > 0:
        flags |= np.isfinite(p99) & (p99 > latency_factor * med99)
    return flags


def episodes_of(flags: np.ndarray, merge_gap_s: int) -> list[tuple[int, int]]:
    """(first, last) indices of runs of flagged seconds, merged across short gaps."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(flags):
        if flags[i]:
            j = i
            while j + 1 < len(flags) and flags[j + 1]:
                j += 1
            if spans and i - spans[-1][1] - 1 < merge_gap_s:
                spans[-1] = (spans[-1][0], j)
            else:
                spans.append((i, j))
            i = j + 1
        else:
            i += 1
    return spans


def find_stalls(al: Aligned, *, tps_fraction: float = 0.1, latency_factor: float = 10.0,
                merge_gap_s: int = 2) -> list[StallEpisode]:
    if al.seconds == 0:
        return []
    spans = episodes_of(flagged_seconds(al, tps_fraction, latency_factor), merge_gap_s)
    inside = np.zeros(al.seconds, dtype=bool)
    for a, b in spans:
        inside[a:b + 1] = True
    return [_episode(al, a, b, ~inside) for a, b in spans]


def _episode(al: Aligned, a: int, b: int, outside: np.ndarray) -> StallEpisode:
    tps = al.throughput()
    med = median_finite(tps[outside]) if outside.any() else median_finite(tps)
    window = tps[a:b + 1]
    finite = window[np.isfinite(window)]
    delayed = float(np.sum(np.clip(med - finite, 0, None))) if math.isfinite(med) else 0.0
    lat = al.get("lat_max_ms")[a:min(al.seconds, b + 2)]  # delayed ones finish just after
    lat = lat[np.isfinite(lat)]
    ctx = Context(al, a, b, outside)
    causes = sorted((c for f in CAUSE_TESTS if (c := f(ctx)) is not None),
                    key=lambda c: -c.score)
    best = causes[0] if causes and causes[0].score >= 0.3 else None
    if best is None:
        best = Cause("unknown", 0.0, ("no known cause fits the evidence of these seconds",))
        confidence = "low"
    else:
        confidence = "high" if best.score >= 0.7 else "medium" if best.score >= 0.45 else "low"
        if len(causes) > 1 and causes[1].score >= best.score - 0.1 and confidence != "low":
            confidence = "medium" if confidence == "high" else "low"  # ambiguous
    return StallEpisode(
        start_s=float(a), end_s=float(b + 1),
        min_tps=float(finite.min()) if finite.size else 0.0,
        delayed_tx=round(delayed), max_latency_ms=float(lat.max()) if lat.size else None,
        cause=best.key, confidence=confidence, evidence=best.evidence,
        alternatives=tuple((c.key, c.score) for c in causes if c is not best and c.score >= 0.3),
        missing=tuple(ctx.missing()))


# ---------------------------------------------------------------- the evidence


class Context:
    """The seconds of one episode, and the rest of the run to compare them with."""

    def __init__(self, al: Aligned, a: int, b: int, outside: np.ndarray):
        self.al, self.a, self.b, self.outside = al, a, b, outside

    def mean_in(self, name: str) -> float:
        v = self.al.get(name)[self.a:self.b + 1]
        v = v[np.isfinite(v)]
        return float(v.mean()) if v.size else math.nan

    def max_in(self, name: str) -> float:
        v = self.al.get(name)[self.a:self.b + 1]
        v = v[np.isfinite(v)]
        return float(v.max()) if v.size else math.nan

    def median_out(self, name: str) -> float:
        v = self.al.get(name)
        return median_finite(v[self.outside]) if self.outside.any() else math.nan

    def waits(self) -> dict[str, float]:
        """Average backends per wait event over the episode."""
        secs = self.al.waits[self.a:self.b + 1] if self.al.waits else []
        total: dict[str, float] = {}
        for sec in secs:
            for event, n in sec.items():
                total[event] = total.get(event, 0.0) + float(n)
        return {e: n / len(secs) for e, n in total.items()} if secs else {}

    def waiting(self) -> dict[str, float]:
        """Backends waiting on something other than the CPU or their client."""
        return {e: n for e, n in self.waits().items()
                if not e.startswith(("CPU/", "Client/", "Activity/"))}

    def at_limit(self) -> str | None:
        """Writes held at the device's emulated cap during the episode (None: not)."""
        for name, unit, series in (("write_mbps", "MB/s", "disk_write_mbps"),
                                   ("write_iops", "IOPS", "disk_write_iops")):
            cap = self.al.limits.get(name)
            if cap and self.al.has(series):
                peak = self.max_in(series)
                if math.isfinite(peak) and peak >= 0.9 * cap:
                    return (f"writes at the device's emulated limit ({peak:,.1f} of "
                            f"{cap:,.0f} {unit})")
        return None

    def missing(self) -> list[str]:
        out = []
        if not self.al.waits:
            out.append("wait events (samplers off)")
        if not self.al.has("disk_write_mbps"):
            out.append("device I/O")
        if not self.al.has("dirty_kb"):
            out.append("dirty and writeback memory")
        if not self.al.has("lat_p99_ms"):
            out.append("per-second latency (transaction log)")
        return out

    def span(self) -> tuple[float, float]:
        return float(self.a), float(self.b + 1)


def _top(waits: dict[str, float], k: int = 4) -> str:
    return ", ".join(f"{e} {n:.1f}" for e, n in sorted(waits.items(), key=lambda x: -x[1])[:k])


def _fs_not_accepting_writes(c: Context) -> Cause | None:
    """Throughput stopped and nothing reached the devices for most of the episode (its
    first and last seconds are often partly before or after the freeze)."""
    if not c.al.has("disk_write_mbps"):
        return None
    window = c.al.get("disk_write_mbps")[c.a:c.b + 1]
    window = window[np.isfinite(window)]
    usual = c.median_out("disk_write_mbps")
    if not math.isfinite(usual) or usual < MIN_USUAL_WRITE_MBPS:
        return None  # a run that hardly writes (reads, a dump) says nothing by not writing
    floor = max(0.05, 0.05 * usual)
    quiet = int((window <= floor).sum())
    tps = c.al.throughput()[c.a:c.b + 1]
    med_tps = median_finite(c.al.throughput()[c.outside]) if c.outside.any() else math.nan
    stopped = bool(np.nanmin(tps) <= 0.05 * med_tps) if math.isfinite(med_tps) else True
    if not window.size or quiet == 0 or quiet * 2 < window.size or not stopped:
        return None
    evidence = [f"nothing written to the devices under test in {quiet} of the episode's "
                f"{window.size} second(s) (median {usual:.1f} MB/s the rest of the run)"]
    util = c.mean_in("disk_util_pct")
    if math.isfinite(util):
        evidence.append(f"device utilisation {util:.0f}% on average")
    waiting = c.waiting()
    io = {e: n for e, n in waiting.items() if e.startswith(("IO/", "LWLock/", "Lock/"))}
    if not c.al.waits:
        return Cause("fs_not_accepting_writes", 0.6, tuple(evidence))
    if sum(io.values()) < 0.5:
        return Cause("fs_not_accepting_writes", 0.35, tuple(evidence))
    evidence.append(f"backends waiting meanwhile: {_top(io)}")
    return Cause("fs_not_accepting_writes", 0.9, tuple(evidence))


def _checkpoint(c: Context) -> Cause | None:
    lo, hi = c.span()
    best: Cause | None = None
    for cp in c.al.checkpoints:
        start, sync, end = cp.start, cp.sync_start, cp.ended_s
        if end < lo - 1 or start > hi + 1:
            continue
        in_sync = sync <= hi + 1 and end >= lo - 0.5
        phase = "sync" if in_sync else "write"
        score = 0.75 if in_sync else 0.55
        buf_in, buf_out = c.mean_in("checkpoint_buffers_per_s"), \
            c.median_out("checkpoint_buffers_per_s")
        evidence = [f"checkpoint ({cp.reason or 'unknown reason'}) from {start:+.1f} s to "
                    f"{end:+.1f} s: write {cp.write_s:g} s, sync {cp.sync_s:g} s, "
                    f"{cp.buffers} buffers; the episode falls in its {phase} phase"]
        if math.isfinite(buf_in) and buf_in > 2 * max(buf_out if math.isfinite(buf_out)
                                                      else 0, 1):
            score += 0.1
            evidence.append(f"checkpointer writing {buf_in:,.0f} buffers/s (median "
                            f"{buf_out if math.isfinite(buf_out) else 0:,.0f})")
        util = c.mean_in("disk_util_pct")
        if math.isfinite(util) and util >= 90:
            score += 0.05
            evidence.append(f"device utilisation {util:.0f}%")
        at_limit = c.at_limit()
        if at_limit:
            score += 0.1
            evidence.append(at_limit)
        writes, usual = c.mean_in("disk_write_mbps"), c.median_out("disk_write_mbps")
        if math.isfinite(writes) and writes <= max(0.05, 0.05 * (usual if math.isfinite(usual)
                                                                 else 0)):
            score *= 0.4  # nothing reached the disk: the checkpoint could not be writing
        cause = Cause("checkpoint", min(score, 0.9), tuple(evidence))
        if best is None or cause.score > best.score:
            best = cause
    return best


def _wal_segment_creation(c: Context) -> Cause | None:
    waiting = c.waiting()
    total = sum(waiting.values())
    init = sum(n for e, n in waiting.items() if e.startswith("IO/WALInit"))
    if total <= 0 or init <= 0:
        return None
    share = init / total
    if share < 0.05:
        return None
    evidence = [f"backends waiting on WAL segment creation: {init:.1f} on average "
                f"({share * 100:.0f}% of those waiting: {_top(waiting)})"]
    added = [cp.wal_added for cp in c.al.checkpoints if cp.wal_added]
    if added:
        evidence.append(f"checkpoints report {sum(added)} WAL file(s) added")
    return Cause("wal_segment_creation", 0.75 if share >= 0.2 else 0.45, tuple(evidence))


def _writeback(c: Context) -> Cause | None:
    if not (c.al.has("dirty_kb") and c.al.has("writeback_kb")):
        return None
    dirty = c.al.get("dirty_kb")
    before = dirty[max(0, c.a - 1)]
    low = np.nanmin(dirty[c.a:c.b + 1]) if np.isfinite(dirty[c.a:c.b + 1]).any() else math.nan
    if not (math.isfinite(before) and math.isfinite(low)) or before < 20 * 1024:
        return None
    drop = (before - low) / before
    wb_in, wb_out = c.max_in("writeback_kb"), c.median_out("writeback_kb")
    util = c.mean_in("disk_util_pct")
    busy = (math.isfinite(wb_in) and wb_in > 2 * max(wb_out if math.isfinite(wb_out) else 0,
                                                     1024)) or (math.isfinite(util)
                                                                and util >= 90)
    if drop < 0.3 or not busy:
        return None
    evidence = [f"Dirty fell from {before / 1024:,.0f} MB to {low / 1024:,.0f} MB "
                f"({drop * 100:.0f}%)", f"Writeback up to {wb_in / 1024:,.0f} MB"]
    if math.isfinite(util):
        evidence.append(f"device utilisation {util:.0f}%")
    return Cause("writeback", 0.65, tuple(evidence))


def _reclaim(c: Context) -> Cause | None:
    names = [n for n in ("vm_allocstall_normal", "vm_allocstall_movable", "vm_pgscan_direct")
             if c.al.has(n)]
    if not names:
        return None
    inside = sum(np.nansum(c.al.get(n)[c.a:c.b + 1]) for n in names)
    outside = sum(np.nansum(c.al.get(n)[c.outside]) for n in names)
    n_out = max(1, int(c.outside.sum()))
    per_in = inside / (c.b - c.a + 1)
    if inside <= 0 or per_in < 5 * (outside / n_out) + 1:
        return None
    return Cause("reclaim", 0.7, (f"direct reclaim during the episode: {per_in:,.0f} "
                                  f"pages or stalls/s (allocstall, pgscan_direct; "
                                  f"{outside / n_out:,.1f}/s the rest of the run)",))


def _locks(c: Context) -> Cause | None:
    waiting = c.waiting()
    total = sum(waiting.values())
    locks = sum(n for e, n in waiting.items() if e.startswith("Lock/"))
    if total <= 0 or locks / total < 0.5:
        return None
    return Cause("locks", 0.4, (f"{locks:.1f} backends waiting on locks ({_top(waiting)}); "
                                "lock waits are often a symptom of a slower holder",))


def _cpu(c: Context) -> Cause | None:
    idle, iowait = c.mean_in("cpu_idle_pct"), c.mean_in("cpu_iowait_pct")
    if not math.isfinite(idle) or idle >= 5 or (math.isfinite(iowait) and iowait >= 5):
        return None
    return Cause("cpu", 0.45, (f"CPU idle {idle:.1f}%, iowait {iowait:.1f}%",))


def _device_saturated(c: Context) -> Cause | None:
    util, await_in = c.mean_in("disk_util_pct"), c.mean_in("disk_await_ms")
    await_out = c.median_out("disk_await_ms")
    at_limit = c.at_limit()
    if at_limit:
        return Cause("device_saturated", 0.55, (at_limit,))
    if not math.isfinite(util) or util < 95:
        return None
    evidence = [f"device utilisation {util:.0f}%"]
    score = 0.4
    if math.isfinite(await_in) and math.isfinite(await_out) and await_in > 3 * max(await_out,
                                                                                     0.1):
        evidence.append(f"I/O wait {await_in:.1f} ms per request (median {await_out:.1f})")
        score = 0.5
    return Cause("device_saturated", score, tuple(evidence))


def _snapshot(c: Context) -> Cause | None:
    lo, hi = c.span()
    hits = [e for e in c.al.events if e.kind == "snapshot" and e.start_s <= hi + 1
            and e.end_s >= lo - 1]
    if not hits:
        return None
    return Cause("snapshot", 0.7, tuple(f"{e.label} at {e.start_s:+.1f} s (took "
                                        f"{e.end_s - e.start_s:.1f} s)" for e in hits))


CAUSE_TESTS: tuple[Callable[[Context], Cause | None], ...] = (
    _fs_not_accepting_writes, _checkpoint, _wal_segment_creation, _writeback, _reclaim,
    _locks, _cpu, _device_saturated, _snapshot)
