"""pgbouncer's own view, every second: how many clients wait for a server connection and
for how long (the pooler's latency), how many server connections work (pure parsers of
SHOW STATS / SHOW POOLS rows; the sampler is a Ticker like the others)."""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pgfsbench.collect.samplers import Job, Series, Ticker, _aligned, _place

Console = Callable[[str], list[dict[str, object]]]


@dataclass
class PoolerSample:
    t: float
    stats: dict[str, float]  # SHOW STATS, cumulative, for the database
    pools: dict[str, float]  # SHOW POOLS, now, summed over the database's pools


def stats_row(rows: list[dict[str, object]], database: str) -> dict[str, float]:
    """The database's SHOW STATS counters as floats (pgbouncer sends numerics)."""
    for row in rows:
        if row.get("database") == database:
            out = {}
            for k, v in row.items():
                if k == "database" or v is None or isinstance(v, bool):
                    continue
                try:
                    out[k] = float(str(v))
                except (TypeError, ValueError):
                    continue
            return out
    return {}


def pools_sum(rows: list[dict[str, object]], database: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for row in rows:
        if row.get("database") != database:
            continue
        for k in (
            "cl_active",
            "cl_waiting",
            "sv_active",
            "sv_idle",
            "sv_used",
            "maxwait",
            "maxwait_us",
        ):
            if k in row and row[k] is not None:
                out[k] = out.get(k, 0.0) + float(str(row[k]))
    return out


class PoolerSampler:
    def __init__(self, console: Console, database: str, *, batch: bool = True):
        self.console = console
        self.database = database
        self.samples: list[PoolerSample] = []
        self._job = Job("pooler", 1, self._tick)
        self._ticker = Ticker("pooler-sampler", 1.0, [self._job], batch=batch)

    def _tick(self) -> None:
        t = time.time()
        stats = stats_row(self.console("SHOW STATS"), self.database)
        pools = pools_sum(self.console("SHOW POOLS"), self.database)
        self.samples.append(PoolerSample(t, stats, pools))

    def start(self) -> None:
        self._ticker.start()

    def stop(self) -> list[PoolerSample]:
        self._ticker.stop()
        return self.samples

    @property
    def cpu_seconds(self) -> float:
        return self._ticker.cpu_seconds

    @property
    def errors(self) -> list[str]:
        return self._job.errors


@dataclass
class PoolerFigures:
    series: Series = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)


def pooler_series(samples: list[PoolerSample], start: float) -> PoolerFigures:
    """Per second: transactions through the pooler, the average wait of a client for a
    server connection (ms per transaction), clients waiting, server connections busy."""
    out = PoolerFigures()
    if len(samples) < 2:
        return out
    times = [s.t for s in samples[1:]]
    _, offsets = _aligned(times, start)
    xacts: list[float | None] = []
    waits: list[float | None] = []
    for a, b in itertools.pairwise(samples):
        dt = (b.t - a.t) or 1.0
        dx = b.stats.get("total_xact_count", 0) - a.stats.get("total_xact_count", 0)
        dw = b.stats.get("total_wait_time", 0) - a.stats.get("total_wait_time", 0)
        xacts.append(round(dx / dt, 1))
        waits.append(round(dw / dx / 1000.0, 3) if dx > 0 else None)
    out.series["pooler_tps"] = _place(offsets, xacts)
    out.series["pooler_wait_ms"] = _place(offsets, waits)
    for key, name in (
        ("cl_waiting", "pooler_clients_waiting"),
        ("sv_active", "pooler_servers_active"),
        ("cl_active", "pooler_clients_active"),
    ):
        out.series[name] = _place(offsets, [s.pools.get(key) for s in samples[1:]])
    first, last = samples[0].stats, samples[-1].stats
    with contextlib.suppress(ZeroDivisionError):
        dx = last.get("total_xact_count", 0) - first.get("total_xact_count", 0)
        out.totals = {
            "transactions": dx,
            "avg_wait_ms": round(
                (last.get("total_wait_time", 0) - first.get("total_wait_time", 0)) / dx / 1000.0, 3
            ),
        }
    return out
