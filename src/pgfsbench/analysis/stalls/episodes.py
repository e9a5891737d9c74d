"""Finding a run's episodes: the seconds below its thresholds, merged into stalls and
slowdowns, each explained by the causes (causes.py) weighed together (weighing.py)."""

from __future__ import annotations

import math

import numpy as np

from pgfsbench.analysis.levels import MIN_CHANGE, MIN_SIDE_S, LevelShift, level_shift
from pgfsbench.analysis.series import Aligned, median_finite
from pgfsbench.analysis.stalls.causes import HYPOTHESES
from pgfsbench.analysis.stalls.evidence import Context
from pgfsbench.analysis.stalls.model import StallEpisode
from pgfsbench.analysis.stalls.thresholds import DEFAULT_THRESHOLDS, LATENCY_FACTOR, MERGE_GAP_S
from pgfsbench.analysis.stalls.weighing import weigh

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


# outside work in a second, for `calm_reference`: this share of a CPU, or this much I/O
# (the floors analysis/stalls/causes.py's host_cpu and analysis/disturbance.py's host I/O use)
BUSY_OUTSIDE_CPU_PCT = 40.0
BUSY_OUTSIDE_IO_MBPS = 5.0


def calm_reference(al: Aligned) -> float | None:
    """The throughput of the seconds without outside work, when outside work (the host
    signals alone, never the throughput: the process table, the host's CPU time less the
    benchmark's cgroup) came and went and its seconds were at least MIN_CHANGE below it:
    the reference a run's dips are judged against. A level the throughput alone cannot
    prove different (a 16-second run, 10 of them disturbed, reaches no p below 0.001) is
    still judged against the seconds the host says were the storage's. None otherwise."""
    if not al.has("outside_cpu_pct"):
        return None
    tps = al.throughput()
    cpu = al.get("outside_cpu_pct")
    io = np.nan_to_num(al.get("outside_write_mbps")) + np.nan_to_num(al.get("outside_read_mbps"))
    sampled = np.isfinite(cpu) & np.isfinite(tps)
    busy = sampled & ((cpu >= BUSY_OUTSIDE_CPU_PCT) | (io >= BUSY_OUTSIDE_IO_MBPS))
    calm = sampled & ~busy
    if not busy.any() or calm.sum() < MIN_SIDE_S:
        return None
    quiet, disturbed = median_finite(tps[calm]), median_finite(tps[busy])
    if not quiet > 0 or disturbed > (1 - MIN_CHANGE) * quiet:
        return None
    return quiet


# a run that fell for good after a higher stretch at its start shorter than this share of
# it started fast (see judged_by); from this share on, it was disturbed from then on
FAST_START_SHARE = 0.25


def judged_by(shift: LevelShift) -> bool:
    """Whether a run's other seconds are judged against a level change's higher level:
    a stretch below the rest in the middle (a dip, however long); a run that rose to stay
    (its start is the episode); a run that fell for good after at least a quarter of it
    (a neighbour from then on). Not a burst above the rest, nor a short fast start the
    run fell from (the load's pages still in the cache, no checkpoint yet, a warm-up too
    short): the lower level is then the run's own steady state (the host's signals may
    still say otherwise: calm_reference)."""
    if not shift.one_sided:
        return shift.inside < shift.outside
    if shift.before < shift.after:
        return True
    return shift.at >= FAST_START_SHARE * shift.n


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
    if shift is not None and not judged_by(shift):
        shift = None
    reference = shift.reference if shift is not None else calm_reference(al)
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
