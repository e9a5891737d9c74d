"""Samplers running beside pgbench: PostgreSQL counters (1 s), wait events (10 Hz), OS (1 s).

Each is a thread that ticks on a deadline schedule and stops on an event, so it never
drifts and never delays the end of a run. Samples carry wall-clock times; `series` turns
them into per-second series aligned on the measured phase's start.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq
from psycopg.rows import dict_row

from pgfsbench.collect.procfs import (
    VMSTAT_RECLAIM,
    cpu_percentages,
    disk_rates,
    parse_diskstats,
    parse_meminfo,
    parse_stat,
    parse_vmstat,
    process_cpu_seconds,
)
from pgfsbench.postgres.instance import sql

STATEMENT_TIMEOUT = "-c statement_timeout=5000"  # a stalled server must not hold us up


class Ticker(threading.Thread):
    """Calls ``tick`` every ``interval`` seconds (on a deadline schedule) until stopped."""

    def __init__(self, name: str, interval: float, tick: Callable[[], None]):
        super().__init__(name=name, daemon=True)
        self.interval = interval
        self._tick = tick
        self._stop_event = threading.Event()
        self.errors: list[str] = []
        self.cpu_seconds = 0.0  # what the ticks cost this thread (the observer's own cost)

    def run(self) -> None:
        next_at = time.monotonic()
        while not self._stop_event.is_set():
            cpu = time.thread_time()
            try:
                self._tick()
            except Exception as exc:  # a sampler must never break the run it watches
                if len(self.errors) < 20:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
            self.cpu_seconds += time.thread_time() - cpu
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (machine overloaded): skip, do not burst
                next_at = time.monotonic()
                delay = 0
            self._stop_event.wait(delay)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(timeout=10)


@dataclass
class PgSamples:
    counters: list[dict[str, Any]] = field(default_factory=list)
    waits: list[tuple[float, Counter[str]]] = field(default_factory=list)  # per 10 Hz sample
    errors: list[str] = field(default_factory=list)


# libpq type OIDs read as numbers, as psycopg's loaders and `_num` would give them
_INT_OIDS = frozenset({20, 21, 23, 26})  # int8, int2, int4, oid
_FLOAT_OIDS = frozenset({700, 701, 1700})  # float4, float8, numeric (as float, like _num)
_BOOL_OID = 16


def _value(raw: bytes | None, oid: int) -> Any:
    """One text-format value of a libpq result as Python."""
    if raw is None:
        return None
    if oid in _INT_OIDS:
        return int(raw)
    if oid in _FLOAT_OIDS:
        return float(raw)
    if oid == _BOOL_OID:
        return raw == b"t"
    return raw.decode()


def _checked(pgconn: pq.abc.PGconn, res: pq.abc.PGresult,
             status: pq.ExecStatus) -> pq.abc.PGresult:
    """The result, or the server's error raised as psycopg would raise it (QueryCanceled
    for a statement timeout...), so a sampler's errors read the same whichever path."""
    if res.status == status:
        return res
    message = (res.error_message or pgconn.error_message).decode(errors="replace").strip()
    code = res.error_field(pq.DiagnosticField.SQLSTATE)
    cls: type[psycopg.Error] = psycopg.OperationalError
    if code:
        with contextlib.suppress(KeyError):
            cls = psycopg.errors.lookup(code.decode())
    raise cls(message or f"libpq: {pq.ExecStatus(res.status).name}")


class Statements:
    """The sampler's queries, prepared once on its connection and run through libpq.

    The samplers are most of what observing costs, and at 10 Hz psycopg's cursors
    (adaptation, row makers, the prepared-statement cache) cost more than the round trip:
    on a 2-core VM under a select-only load of ~50,000 TPS, the 10 Hz sampler thread used
    0.33% of a core through cursors and 0.16% through libpq, same queries, both prepared.
    """

    def __init__(self, pgconn: pq.abc.PGconn, queries: dict[str, str]):
        self._pgconn = pgconn
        for name, query in queries.items():
            _checked(pgconn, pgconn.prepare(name.encode(), query.encode()),
                     pq.ExecStatus.COMMAND_OK)

    def rows(self, name: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Column names and rows of one execution of the statement ``name``."""
        res = _checked(self._pgconn, self._pgconn.exec_prepared(name.encode(), None),
                       pq.ExecStatus.TUPLES_OK)
        oids = [res.ftype(j) for j in range(res.nfields)]
        names = [(res.fname(j) or b"?").decode() for j in range(res.nfields)]
        rows = [tuple(_value(res.get_value(i, j), oid) for j, oid in enumerate(oids))
                for i in range(res.ntuples)]
        res.clear()
        return names, rows

    def row(self, name: str) -> dict[str, Any] | None:
        """The first row of one execution, by column name."""
        names, rows = self.rows(name)
        return dict(zip(names, rows[0], strict=True)) if rows else None


class PgSampler:
    """One connection: counters every second, pg_stat_activity wait events at 10 Hz."""

    def __init__(self, conninfo: str, major: int, wait_hz: float = 10.0):
        self.conninfo = conninfo
        self.major = major
        self.samples = PgSamples()
        self._conn: psycopg.Connection[Any] | None = None
        self._statements: Statements | None = None
        self.backend_pid: int | None = None  # the server process answering the sampler
        self._counters_sql = sql("counters_18" if major >= 18 else
                                 "counters_17" if major >= 17 else "counters")
        # merged into each counters row: pg_stat_io totals (16+), AIOs in flight (18+)
        self._extra = [n for n, since in (("io_totals", 16), ("aios", 18)) if major >= since]
        self._count = 0
        self.own_commits = 0
        self._per_counter = max(1, round(wait_hz))
        self._ticker = Ticker("pg-sampler", 1.0 / wait_hz, self._tick)

    def start(self) -> None:
        self._conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10,
                                     application_name="pgfsbench sampler",
                                     options="-c statement_timeout=2000")
        self.backend_pid = self._conn.info.backend_pid
        self._statements = Statements(self._conn.pgconn, {
            "waits": sql("wait_events"), "counters": self._counters_sql,
            **{name: sql(name) for name in self._extra}})
        self._ticker.start()

    def _tick(self) -> None:
        assert self._statements is not None
        now = time.time()
        _, rows = self._statements.rows("waits")
        self.own_commits += 1  # each autocommit statement is a transaction of its own
        self.samples.waits.append((now, Counter({str(e): int(n) for e, n in rows})))
        if self._count % self._per_counter == 0:
            row = self._statements.row("counters")
            self.own_commits += 1
            for extra in self._extra:
                more = self._statements.row(extra)
                if row is not None and more is not None:
                    row = {**row, **more}
                self.own_commits += 1
            if row:
                # the sampler's own transactions, subtracted from xact_commit in the series
                self.samples.counters.append({**row, "own_commits": self.own_commits})
        self._count += 1

    def snapshot(self) -> dict[str, Any] | None:
        """The counters now (called at the measured phase's start and end)."""
        with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10,
                             options=STATEMENT_TIMEOUT) as conn, \
                conn.cursor(row_factory=dict_row) as cur:
            row = cur.execute(self._counters_sql).fetchone()
            return {k: _num(v) for k, v in row.items()} if row else None

    def stat_io(self) -> list[dict[str, Any]]:
        if self.major < 16:
            return []
        with psycopg.connect(self.conninfo, autocommit=True, connect_timeout=10,
                             options=STATEMENT_TIMEOUT) as conn, \
                conn.cursor(row_factory=dict_row) as cur:
            return [{k: _num(v) for k, v in r.items()} for r in cur.execute(sql("stat_io"))]

    @property
    def cpu_seconds(self) -> float:
        return self._ticker.cpu_seconds

    def backend_cpu_seconds(self) -> float | None:
        """What answering the sampler's queries has cost the server so far (its backend's
        CPU time: the other half of the observer's cost, outside pgfsbench's process)."""
        return None if self.backend_pid is None else process_cpu_seconds(self.backend_pid)

    def stop(self) -> PgSamples:
        self._ticker.stop()
        self.samples.errors = self._ticker.errors
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
        return self.samples


def _num(v: Any) -> Any:
    if v is None or isinstance(v, int | float | str):
        return v
    try:
        return float(v)  # Decimal, numeric
    except (TypeError, ValueError):
        return str(v)


@dataclass
class OsSample:
    t: float
    stat: str
    diskstats: str
    meminfo: str
    vmstat: str


class OsSampler:
    """/proc/stat, /proc/diskstats, /proc/meminfo and /proc/vmstat every second (raw text;
    parsed after the run so the sampler costs next to nothing while pgbench runs)."""

    FILES = ("stat", "diskstats", "meminfo", "vmstat")

    def __init__(self, proc: Path = Path("/proc")):
        self.proc = proc
        self.samples: list[OsSample] = []
        self._ticker = Ticker("os-sampler", 1.0, self._tick)

    def _tick(self) -> None:
        t = time.time()
        texts = [(self.proc / f).read_text() for f in self.FILES]
        self.samples.append(OsSample(t, *texts))

    def start(self) -> None:
        self._tick()
        self._ticker.start()

    def stop(self) -> list[OsSample]:
        self._ticker.stop()
        return self.samples

    @property
    def cpu_seconds(self) -> float:
        return self._ticker.cpu_seconds


# ---------------------------------------------------------------- samples -> series

Series = dict[str, tuple[float, list[Any]]]  # name -> (t0, values), step 1 s


def _aligned(times: list[float], start: float) -> tuple[float, list[int]]:
    """Offsets of sample times from ``start`` rounded to whole seconds."""
    offsets = [round(t - start) for t in times]
    return (float(offsets[0]) if offsets else 0.0), offsets


def _place(offsets: list[int], values: list[Any]) -> tuple[float, list[Any]]:
    """Values at integer offsets -> (t0, dense list), gaps as None, duplicates keep the last."""
    if not offsets:
        return 0.0, []
    first, last = min(offsets), max(offsets)
    dense: list[Any] = [None] * (last - first + 1)
    for off, v in zip(offsets, values, strict=True):
        dense[off - first] = v
    return float(first), dense


def os_series(samples: list[OsSample], start: float, devices: list[str]) -> Series:
    """CPU, the devices under test, dirty/writeback memory and reclaim, per second."""
    out: Series = {}
    if len(samples) < 2:
        return out
    times: list[float] = []
    rows: dict[str, list[Any]] = {}
    parsed = [(s.t, parse_stat(s.stat), parse_diskstats(s.diskstats), parse_meminfo(s.meminfo),
               parse_vmstat(s.vmstat)) for s in samples]
    for (t0, c0, d0, _m0, v0), (t1, c1, d1, m1, v1) in itertools.pairwise(parsed):
        times.append(t1)
        cpu = cpu_percentages(c0, c1)
        for k in ("user", "system", "iowait", "idle"):
            rows.setdefault(f"cpu_{k}_pct", []).append(cpu[k])
        total = {"read_mbps": 0.0, "write_mbps": 0.0, "read_iops": 0.0, "write_iops": 0.0}
        for dev in devices:
            if dev in d0 and dev in d1:
                r = disk_rates(d0[dev], d1[dev], t1 - t0)
                for k, v in r.items():
                    rows.setdefault(f"disk.{dev}.{k}", []).append(v)
                if not rows.get("_primary"):
                    rows.setdefault("disk_await_ms", []).append(r["await_ms"])
                    rows.setdefault("disk_util_pct", []).append(r["util_pct"])
                    rows["_primary"] = [dev]
                for k in total:
                    total[k] += r[k]
        rows.pop("_primary", None)
        for k, v in total.items():
            rows.setdefault(f"disk_{k}", []).append(round(v, 3))
        rows.setdefault("dirty_kb", []).append(m1.get("Dirty"))
        rows.setdefault("writeback_kb", []).append(m1.get("Writeback"))
        for k in VMSTAT_RECLAIM:
            if k in v1 and k in v0 and not k.startswith("nr_"):
                rows.setdefault(f"vm_{k}", []).append(v1[k] - v0[k])
    _, offsets = _aligned(times, start)
    for name, values in rows.items():
        if len(values) == len(offsets):
            out[name] = _place(offsets, values)
    return out


RATE_COUNTERS = {
    "wal_bytes": ("wal_mbps", 1e-6), "wal_fpi": ("wal_fpi_per_s", 1.0),
    "wal_records": ("wal_records_per_s", 1.0), "xact_commit": ("commits_per_s", 1.0),
    "buffers_checkpoint": ("checkpoint_buffers_per_s", 1.0),
    "buffers_clean": ("bgwriter_buffers_per_s", 1.0),
    "buffers_backend": ("backend_buffers_per_s", 1.0), "blks_read": ("blks_read_per_s", 1.0),
    "wal_sync": ("wal_syncs_per_s", 1.0), "wal_write": ("wal_writes_per_s", 1.0),
    "temp_bytes": ("temp_mbps", 1e-6),
    "io_reads": ("io_reads_per_s", 1.0), "io_writes": ("io_writes_per_s", 1.0),
    "io_writebacks": ("io_writebacks_per_s", 1.0), "io_fsyncs": ("io_fsyncs_per_s", 1.0),
}
# values sampled as they are (not rates)
GAUGES = {"aio_in_flight": "aio_in_flight", "aio_reads_in_flight": "aio_reads_in_flight"}


def pg_series(samples: PgSamples, start: float) -> Series:
    out: Series = {}
    c = samples.counters
    if len(c) >= 2:
        times = [float(r["t"]) for r in c[1:]]
        _, offsets = _aligned(times, start)
        for key, (name, scale) in RATE_COUNTERS.items():
            if key not in c[0]:
                continue
            values: list[float | None] = []
            for a, b in itertools.pairwise(c):
                dt = float(b["t"]) - float(a["t"]) or 1.0
                if a.get(key) is None or b.get(key) is None:
                    values.append(None)
                    continue
                delta = float(b[key]) - float(a[key])
                if key == "xact_commit":  # not the sampler's own transactions
                    delta -= float(b.get("own_commits", 0)) - float(a.get("own_commits", 0))
                values.append(round(max(0.0, delta) * scale / dt, 3))
            out[name] = _place(offsets, values)
        for key, name in GAUGES.items():
            if key in c[0]:
                out[name] = _place(offsets, [None if b.get(key) is None else float(b[key])
                                             for b in c[1:]])
    if samples.waits:
        per_second: dict[int, list[Counter[str]]] = {}
        for t, counts in samples.waits:
            per_second.setdefault(int((t - start) // 1) + 1, []).append(counts)
        offsets = sorted(per_second)
        waits: list[dict[str, float]] = []
        for off in offsets:
            group = per_second[off]
            total: Counter[str] = Counter()
            for counts in group:
                total.update(counts)
            # average number of backends in each state during that second
            waits.append({e: round(n / len(group), 2) for e, n in sorted(total.items())})
        out["waits"] = _place(offsets, waits)
    return out


def counter_delta(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str) -> int | None:
    if not a or not b or a.get(key) is None or b.get(key) is None:
        return None
    return int(float(b[key]) - float(a[key]))
