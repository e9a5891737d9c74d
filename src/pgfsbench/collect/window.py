"""What a run's measured window held: its checkpoints, whole cycles or not (pure).

A window of whole checkpoint cycles (`cycles = N`) starts where a timed checkpoint starts
(one cycle after the CHECKPOINT that ended the warm-up) and ends where the N-th after it
would: it holds N checkpoints that started inside it, each timed. A requested one
(max_wal_size reached within a cycle, or anyone's CHECKPOINT) or another count is said
with the run ("marked"). A window of a given duration holds a checkpoint or not, by the
phase of the cycle it fell in: its stratum ("0" or "1+") says which, so that verdicts
compare like with like (analysis/compare.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

# how far a checkpoint's start may sit outside the window and still be its own: the
# checkpointer starts a timed checkpoint within a second of its time, and the workload's
# measured phase starts a moment after it was asked to
TOLERANCE_S = 3.0


def _started(c: dict[str, Any]) -> float | None:
    s = c.get("started_s")
    return float(s) if isinstance(s, int | float) else None


def _kind(reason: str) -> str:
    words = reason.split()
    if "time" in words:
        return "timed"
    if "wal" in words or "xlog" in words:
        return "requested (WAL: max_wal_size)"
    return "requested"


def window_facts(
    *,
    cycles: int,
    cycle_s: float | None,
    duration_s: float,
    estimand: str,
    checkpoints: Sequence[dict[str, Any]],
    tps: Sequence[float | None] = (),
    read: bool = True,
) -> dict[str, Any]:
    """The window's checkpoints (started inside it, or running at its start), its stratum,
    whether it is marked and why, and the throughput of each cycle. ``read``: the server's
    log was read (if not, a window of a given duration has no stratum: none listed is not
    none held)."""
    inside = []
    running_at_start = []
    for c in checkpoints:
        start = _started(c)
        end = c.get("ended_s")
        if start is not None and -TOLERANCE_S <= start < duration_s - TOLERANCE_S:
            inside.append(c)
        elif start is not None and start < -TOLERANCE_S and (end is None or end > 0):
            running_at_start.append(c)
    listed = [
        {
            "started_s": _started(c),
            "kind": _kind(str(c.get("reason") or "")),
            "write_s": c.get("write_s"),
            "sync_s": c.get("sync_s"),
            "buffers": c.get("buffers"),
        }
        for c in inside
    ]
    timed = sum(1 for c in listed if c["kind"] == "timed")
    requested = len(listed) - timed
    facts: dict[str, Any] = {
        "estimand": estimand,
        "kind": "cycles" if cycles else "duration",
        "cycles": cycles,
        "cycle_s": cycle_s,
        "duration_s": duration_s,
        "checkpoints": listed,
        "timed": timed,
        "requested": requested,
        "running_at_start": len(running_at_start),
    }
    marks = []
    if cycles:
        facts["stratum"] = "cycles"
        if not read:
            marks.append("the server's log could not be read: the checkpoints are not known")
        elif requested:
            marks.append(
                f"{requested} requested checkpoint(s) in the window (WAL filled max_wal_size "
                "within a cycle, or a CHECKPOINT): the cycles are not only timed ones"
            )
        if read and len(listed) != cycles:
            marks.append(f"{len(listed)} checkpoints started in the window, {cycles} planned")
        if cycle_s and tps:
            per_cycle = []
            for i in range(cycles):
                part = [v for v in tps[int(i * cycle_s) : int((i + 1) * cycle_s)] if v is not None]
                per_cycle.append(round(statistics.fmean(part), 3) if part else None)
            facts["per_cycle_tps"] = per_cycle
    elif read:
        facts["stratum"] = "1+" if (inside or running_at_start) else "0"
    else:
        facts["stratum_unknown"] = "the server's log could not be read"
    if marks:
        facts["marked"] = "; ".join(marks)
    return facts
