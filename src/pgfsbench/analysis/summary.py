"""One summary per cell over its repetitions: median and spread, never a lone number."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float
    n: int

    @property
    def rel_range(self) -> float:
        """(max - min) / median: how much the repetitions disagree."""
        return (self.high - self.low) / self.median if self.median else 0.0


def spread(values: Iterable[float | None]) -> Spread | None:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    return Spread(statistics.median(vals), min(vals), max(vals), len(vals))


@dataclass(frozen=True)
class CellSummary:
    cell: str
    storage: str
    fs: str
    postgres: str
    kernel: str
    workload: str
    runs: int
    ok: int
    tps: Spread | None
    latency_avg_ms: Spread | None
    latency_p99_ms: Spread | None
    load_seconds: Spread | None
    space_bytes: Spread | None
    implementation: str | None
    fuse: bool
    errors: tuple[str, ...]
    label: str = ""  # the cell without the dimensions that do not vary
    warnings: tuple[str, ...] = ()  # what changes the reading of its runs (busy host...)


def summarise(runs: Iterable[Mapping[str, Any]]) -> list[CellSummary]:
    """Group runs by cell (in first-seen order) and summarise the ok ones."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for r in runs:
        groups.setdefault(str(r["cell"]), []).append(r)
    result = []
    for cell, rows in groups.items():
        ok = [r for r in rows if r["status"] == "ok"]
        first = rows[0]
        result.append(CellSummary(
            cell=cell, storage=first["storage"], fs=first["fs"], postgres=first["postgres"],
            kernel=first["kernel"], workload=first["workload"], runs=len(rows), ok=len(ok),
            tps=spread(r["tps"] for r in ok),
            latency_avg_ms=spread(r["latency_avg_ms"] for r in ok),
            latency_p99_ms=spread((r.get("latency_ms") or {}).get("p99") for r in ok),
            load_seconds=spread(r["load_seconds"] for r in ok),
            space_bytes=spread(r["space_bytes"] for r in ok),
            implementation=next((r["implementation"] for r in rows if r.get("implementation")),
                                None),
            fuse=any(bool(r.get("fuse")) for r in rows),
            errors=tuple(dict.fromkeys(str(r["error"]) for r in rows
                                       if r["status"] != "ok" and r.get("error"))),
            warnings=tuple(dict.fromkeys(f"#{r['repetition']}: {w}" for r in rows
                                         for w in (r.get("warnings") or []))),
        ))
    return with_labels(result)


DIMS = ("storage", "postgres", "kernel", "workload")


def with_labels(cells: list[CellSummary]) -> list[CellSummary]:
    """Label each cell by the dimensions that vary across ``cells`` (storage at least)."""
    import dataclasses

    varying = [d for d in DIMS if len({getattr(c, d) for c in cells}) > 1] or ["storage"]
    return [dataclasses.replace(c, label="/".join(getattr(c, d) for d in varying))
            for c in cells]
