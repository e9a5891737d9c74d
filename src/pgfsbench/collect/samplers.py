"""Samplers running beside pgbench: PostgreSQL counters (1 s), wait events (10 Hz), OS (1 s).

One thread (a Ticker) drives them on a deadline schedule and stops on an event, so it never
drifts and never delays the end of a run. Samples carry wall-clock times; `series` turns
them into per-second series aligned on the measured phase's start.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import pq

from pgfsbench.collect.container import rates as container_rates
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
from pgfsbench.postgres.instance import WORKLOAD_APPLICATION, sql
from pgfsbench.postgres.statements import normalise


def yield_on_wakeup(pid: int = 0) -> str | None:
    """Put a thread (0: the calling one) or a local process under SCHED_BATCH; None when
    done, else why not.

    Under SCHED_BATCH a task keeps its fair share of the CPU (the weight of nice 0, unlike
    nice 19, which starved the samplers under 175 clients), but its wake-up does not preempt
    the task running on that CPU: it runs when that task blocks or at the next scheduler
    tick. A sampler's tick then waits for pgbench or a backend to block on its socket
    instead of cutting into a request-reply chain of the workload it measures. A 10 Hz
    sample taken up to a scheduler tick (a few ms) late loses nothing.
    """
    try:
        os.sched_setscheduler(pid, os.SCHED_BATCH, os.sched_param(0))
    except (OSError, AttributeError) as exc:  # not Linux, or not allowed (another user's)
        return f"SCHED_BATCH: {type(exc).__name__}: {exc}"
    return None


@dataclass
class Job:
    """Something a Ticker does every ``every`` ticks, with the errors it met."""

    name: str
    every: int
    run: Callable[[], None]
    errors: list[str] = field(default_factory=list)


class Ticker(threading.Thread):
    """Runs its jobs every ``interval`` seconds (each job every ``every`` ticks) on a
    deadline schedule until stopped.

    One thread for all the samplers of a run: every wake-up of an observer costs the
    machine under test tens of microseconds of CPU on a VM (a 10 ms sleep costs 40-140 us
    of CPU here), so observing wakes it as seldom as the sampling rate allows.
    """

    def __init__(self, name: str, interval: float, jobs: list[Job], *, batch: bool = True):
        super().__init__(name=name, daemon=True)
        self.interval = interval
        self.jobs = jobs
        # SCHED_BATCH (see yield_on_wakeup): its wake-ups do not preempt the workload
        self.batch = batch
        self.sched_error: str | None = None
        # the wait between ticks is a poll on a pipe that stop() writes to: the cheapest
        # interruptible sleep Python has here (threading.Event.wait cost 146 us of CPU per
        # 100 ms wait on this 2-core VM, a kept poll object 85-96 us, C's nanosleep 57 us)
        self._wake_read = self._wake_write = -1  # made when it starts
        self._poller = select.poll()
        self._stopping = False
        self._cpu = 0.0

    def start(self) -> None:
        self._wake_read, self._wake_write = os.pipe()
        self._poller.register(self._wake_read, select.POLLIN)
        super().start()

    def run(self) -> None:
        if self.batch:
            self.sched_error = yield_on_wakeup(0)
        next_at = time.monotonic()
        count = 0
        while not self._stopping:
            # what this thread has used so far, its waits included, as it reads it itself
            # (no other thread may safely read the clock of a thread that may be ending)
            self._cpu = time.thread_time()
            for job in self.jobs:
                if count % job.every:
                    continue
                try:
                    job.run()
                except Exception as exc:  # a sampler must never break the run it watches
                    if len(job.errors) < 20:
                        job.errors.append(f"{type(exc).__name__}: {exc}")
            count += 1
            next_at += self.interval
            delay = next_at - time.monotonic()
            if delay < 0:  # fell behind (machine overloaded): skip, do not burst
                next_at = time.monotonic()
                delay = 0
            if self._poller.poll(delay * 1000):
                break
        self._cpu = time.thread_time()

    @property
    def cpu_seconds(self) -> float:
        """CPU time this thread has used: its jobs and its wake-ups (the observer's own
        cost), as of its last tick."""
        return self._cpu

    def stop(self) -> None:
        if not self._stopping:
            self._stopping = True
            if self._wake_write >= 0:
                os.write(self._wake_write, b"x")
        if self.is_alive():
            self.join(timeout=10)
        if not self.is_alive() and self._wake_read >= 0:
            os.close(self._wake_read)
            os.close(self._wake_write)
            self._wake_read = self._wake_write = -1


@dataclass
class PgSamples:
    counters: list[dict[str, Any]] = field(default_factory=list)
    # per 10 Hz sample: when it was asked for, and the server's answer as it came (the
    # wait_events query's one value, parsed only when read: see ``waits``)
    raw_waits: list[tuple[float, bytes | str | None]] = field(default_factory=list)
    # once a second: who blocks the backends waiting on a lock (blockers.sql, JSON text)
    raw_blockers: list[tuple[float, str | None]] = field(default_factory=list)
    # once a second: the sessions from outside the workload at work (outside_sessions.sql)
    raw_outside: list[tuple[float, str | None]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def waits(self) -> list[tuple[float, Counter[str]]]:
        """Each sample's backends by wait event."""
        return [(t, parse_waits(raw)) for t, raw in self.raw_waits]


def parse_waits(raw: bytes | str | None) -> Counter[str]:
    """The wait_events query's value: a line "count event" per wait event."""
    if raw is None:
        return Counter()
    text = raw.decode() if isinstance(raw, bytes) else raw
    out: Counter[str] = Counter()
    for line in text.split("\n"):
        n, _, event = line.partition(" ")
        if event:
            out[event] += int(n)
    return out


# libpq type OIDs read as numbers, as psycopg's loaders and `_num` would give them
_INT_OIDS = frozenset({20, 21, 23, 26})  # int8, int2, int4, oid
_FLOAT_OIDS = frozenset({700, 701, 1700})  # float4, float8, numeric (as float, like _num)
_BOOL_OID = 16
# result statuses as plain ints, compared at every tick (an enum's attribute is dearer)
_TUPLES_OK = int(pq.ExecStatus.TUPLES_OK)
_PIPELINE_SYNC = int(pq.ExecStatus.PIPELINE_SYNC)


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


def _error(pgconn: pq.abc.PGconn, res: pq.abc.PGresult | None) -> psycopg.Error:
    """The server's error as psycopg would raise it (QueryCanceled for a statement
    timeout...), so a sampler's errors read the same whichever path."""
    raw = (res.error_message if res is not None else b"") or pgconn.error_message
    message = raw.decode(errors="replace").strip()
    code = res.error_field(pq.DiagnosticField.SQLSTATE) if res is not None else None
    cls: type[psycopg.Error] = psycopg.OperationalError
    if code:
        with contextlib.suppress(KeyError):
            cls = psycopg.errors.lookup(code.decode())
    status = pq.ExecStatus(res.status).name if res is not None else "no result"
    return cls(message or f"libpq: {status}")


def _rows(res: pq.abc.PGresult) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Column names and typed rows of a result."""
    oids = [res.ftype(j) for j in range(res.nfields)]
    names = [(res.fname(j) or b"?").decode() for j in range(res.nfields)]
    rows = [
        tuple(_value(res.get_value(i, j), oid) for j, oid in enumerate(oids))
        for i in range(res.ntuples)
    ]
    return names, rows


Rows = tuple[list[str], list[tuple[Any, ...]]]


class Statements:
    """The sampler's queries, prepared once on its connection and run through libpq in
    pipeline mode: a batch is sent at one tick and its results read at the next, so the
    sampling thread never waits for the server (one wake-up per tick instead of two).

    The samplers are most of what observing costs, and at 10 Hz psycopg's cursors
    (adaptation, row makers, the prepared-statement cache) cost more than the round trip:
    on a 2-core VM under a select-only load of ~50,000 TPS, the 10 Hz sampler thread used
    0.33% of a core through cursors and 0.16% through libpq, same queries, both prepared.
    """

    def __init__(self, pgconn: pq.abc.PGconn, queries: dict[str, str]):
        if pq.version() < 140000:
            raise psycopg.NotSupportedError(
                f"libpq {pq.version()} has no pipeline mode (14 or later is needed)"
            )
        self._pgconn = pgconn
        self._names = {name: name.encode() for name in queries}
        for name, query in queries.items():
            res = pgconn.prepare(self._names[name], query.encode())
            if res.status != pq.ExecStatus.COMMAND_OK:
                raise _error(pgconn, res)
        pgconn.enter_pipeline_mode()
        self._sent: tuple[str, ...] | None = None  # the batch in flight
        self._results: list[pq.abc.PGresult] = []

    @property
    def in_flight(self) -> bool:
        return self._sent is not None

    def send(self, names: tuple[str, ...]) -> None:
        """Send one batch (one implicit transaction: one commit on the server)."""
        assert self._sent is None, "a batch is already in flight"
        for name in names:
            self._pgconn.send_query_prepared(self._names[name], None)
        self._pgconn.pipeline_sync()
        self._pgconn.flush()
        self._sent = names

    def _take(self) -> bool:
        """Read whatever has arrived, without waiting; True once the batch is whole."""
        pg = self._pgconn
        pg.consume_input()
        ended = False
        while not pg.is_busy():
            res = pg.get_result()
            if res is None:
                if ended:  # nothing more will come: the connection is gone
                    raise _error(pg, None)
                ended = True  # the end of one statement's results
                continue
            ended = False
            if res.status == _PIPELINE_SYNC:
                return True
            self._results.append(res)
        return False

    def receive(self, wait: float = 0.0) -> dict[str, Rows] | None:
        """The rows of the batch in flight, by statement; None while it is incomplete after
        ``wait`` seconds. A statement that failed raises the server's error, once the whole
        batch is in (the connection stays usable)."""
        if self._sent is None:
            return None
        deadline = time.monotonic() + wait
        while not self._take():
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            poller = select.poll()
            poller.register(self._pgconn.socket, select.POLLIN)
            poller.poll(left * 1000)
        names, results = self._sent, self._results
        self._sent, self._results = None, []
        out: dict[str, Rows] = {}
        failure: psycopg.Error | None = None
        for name, res in zip(names, results, strict=False):
            if res.status == pq.ExecStatus.TUPLES_OK:
                out[name] = _rows(res)
            elif res.status != pq.ExecStatus.PIPELINE_ABORTED and failure is None:
                failure = _error(self._pgconn, res)
            res.clear()
        if failure is not None:
            raise failure
        return out

    def receive_value(self) -> tuple[bool, bytes | None]:
        """The answer of a batch of one statement that returns one value, without waiting:
        (True, the value) once it is in, (False, None) while it is not. The path of each
        10 Hz tick: at a tick the thread wakes with its caches cold (a VM's sleep leaves
        them so), where every step costs several times what it costs hot, so it takes as
        few as it can (a tick of the general path cost 160 us of CPU here, this one 70)."""
        if self._sent is None or not self._take():
            return False, None
        results = self._results
        self._sent, self._results = None, []
        res = results[0] if results else None
        try:
            if res is None or res.status != _TUPLES_OK:
                raise _error(self._pgconn, res)
            return True, res.get_value(0, 0) if res.ntuples else None
        finally:
            for r in results:
                r.clear()

    def run(self, names: tuple[str, ...], timeout: float = 10.0) -> dict[str, Rows]:
        """Send one batch and wait for it (the batch in flight, if any, is read first and
        dropped)."""
        if self._sent is not None:
            with contextlib.suppress(psycopg.Error):
                self.receive(timeout)
            if self._sent is not None:
                raise psycopg.OperationalError(f"no answer in {timeout:g} s")
        self.send(names)
        got = self.receive(timeout)
        if got is None:
            raise psycopg.OperationalError(f"no answer in {timeout:g} s")
        return got


def first_row(got: dict[str, Rows], name: str) -> dict[str, object] | None:
    """The first row of one statement's rows, by column name."""
    names, rows = got.get(name, ([], []))
    return dict(zip(names, rows[0], strict=True)) if rows else None


class PgSampler:
    """One connection: wait events at each tick (10 Hz), counters once a second.

    Driven by a Ticker (``tick``); ``snapshot`` and ``stat_io`` may be called from another
    thread at the same time (a lock keeps the connection to one user at a time)."""

    def __init__(self, conninfo: str, major: int, counters_every: int = 10, *, batch: bool = True):
        self.conninfo = conninfo
        self.batch = batch  # its backend under SCHED_BATCH too, when the server is local
        self.backend_sched: str | None = None  # what became of that
        self.counters_every = counters_every
        self._ticks = 0
        self._counters_due = False
        self.major = major
        self.samples = PgSamples()
        self._conn: psycopg.Connection[Any] | None = None
        self._statements: Statements | None = None
        self._lock = threading.Lock()
        self._sent_at = 0.0
        self.backend_pid: int | None = None  # the server process answering the sampler
        self._counters = (
            "counters_18" if major >= 18 else "counters_17" if major >= 17 else "counters"
        )
        # merged into each counters row: pg_stat_io totals (16+), AIOs in flight (18+)
        self._extra = tuple(n for n, since in (("io_totals", 16), ("aios", 18)) if major >= since)
        self._waits = ("waits",)  # the batch of most ticks; once a second, this one:
        self._batch = ("waits", "counters", "blockers", "outside", *self._extra)
        self._waits_only = False  # whether the batch in flight is ``_waits``
        self.own_commits = 0
        self.behind = 0  # ticks skipped because the previous batch had no answer yet

    def open(self) -> None:
        self._conn = psycopg.connect(
            self.conninfo,
            autocommit=True,
            connect_timeout=10,
            application_name="pgfsbench sampler",
            options="-c statement_timeout=2000",
        )
        self.backend_pid = self._conn.info.backend_pid
        if self.batch:
            self.backend_sched = self._backend_yields()
        queries = {
            "waits": sql("wait_events"),
            "counters": sql(self._counters),
            "blockers": sql("blockers"),
            "outside": sql("outside_sessions"),
            **{name: sql(name) for name in self._extra},
        }
        if self.major >= 16:
            queries["stat_io"] = sql("stat_io")
        self._statements = Statements(self._conn.pgconn, queries)

    def _backend_yields(self) -> str:
        """The backend answering the sampler put under SCHED_BATCH, if it is a process of
        this machine (a unix socket): the server side of each tick then waits for the
        workload's processes to block too. What happened, in words."""
        assert self._conn is not None and self.backend_pid is not None
        host = self._conn.info.host
        if not host.startswith("/"):
            return f"left as it is: the server is reached over TCP ({host})"
        try:  # the pid is the server's: it must be a postgres process on this machine
            comm = Path(f"/proc/{self.backend_pid}/comm").read_text().strip()
        except OSError as exc:
            return f"left as it is: no process {self.backend_pid} here ({exc.strerror})"
        if not comm.startswith("postgres"):
            return f"left as it is: process {self.backend_pid} is {comm!r}, not postgres"
        return yield_on_wakeup(self.backend_pid) or "batch"

    def tick(self) -> None:
        """Read the last batch's answers (sent a tick ago, so they are in), then send the
        next: the wait events now, and every ``counters_every`` ticks the counters."""
        self._counters_due |= self._ticks % self.counters_every == 0
        self._ticks += 1
        with self._lock:
            st = self._statements
            assert st is not None
            if st.in_flight:
                if self._waits_only:  # most ticks: the lean path
                    done, value = st.receive_value()
                    if done:
                        self.own_commits += 1
                        self.samples.raw_waits.append((self._sent_at, value))
                else:
                    done = self._receive(0.0) is not None
                if not done:  # the server has not answered the last tick yet
                    self.behind += 1
                    return
            self._sent_at = time.time()
            self._waits_only = not self._counters_due
            st.send(self._waits if self._waits_only else self._batch)
            self._counters_due = False

    def _receive(self, wait: float) -> dict[str, Rows] | None:
        assert self._statements is not None
        sent_at = self._sent_at
        got = self._statements.receive(wait)
        if got is None:
            return None
        self.own_commits += 1  # the batch was one transaction of the sampler's own
        if "waits" in got:
            rows = got["waits"][1]
            self.samples.raw_waits.append((sent_at, rows[0][0] if rows else None))
        for name, kept in (
            ("blockers", self.samples.raw_blockers),
            ("outside", self.samples.raw_outside),
        ):
            if name in got:
                rows = got[name][1]
                value = rows[0][0] if rows else None
                kept.append((sent_at, None if value is None else str(value)))
        row = first_row(got, "counters")
        if row is not None:
            for extra in self._extra:
                row.update(first_row(got, extra) or {})
            # the sampler's own transactions, subtracted from xact_commit in the series
            self.samples.counters.append({**row, "own_commits": self.own_commits})
        return got

    def _now(self, names: tuple[str, ...]) -> dict[str, Rows]:
        """One batch run now, on the sampler's connection (the batch in flight is read
        and kept first)."""
        with self._lock:
            if self._statements is None:
                raise psycopg.OperationalError("the sampler is not connected")
            if self._statements.in_flight:
                with contextlib.suppress(psycopg.Error):
                    self._receive(5.0)
            got = self._statements.run(names)
            self.own_commits += 1
            return got

    def snapshot(self) -> dict[str, object] | None:
        """The counters now (called at the measured phase's start and end)."""
        row = first_row(self._now(("counters",)), "counters")
        return {k: _num(v) for k, v in row.items()} if row else None

    def stat_io(self) -> list[dict[str, object]]:
        if self.major < 16:
            return []
        names, rows = self._now(("stat_io",))["stat_io"]
        return [{k: _num(v) for k, v in zip(names, r, strict=True)} for r in rows]

    def backend_cpu_seconds(self) -> float | None:
        """What answering the sampler's queries has cost the server so far (its backend's
        CPU time: the other half of the observer's cost, outside pgfsbench's process)."""
        return None if self.backend_pid is None else process_cpu_seconds(self.backend_pid)

    def close(self, errors: list[str]) -> PgSamples:
        """The samples (the last batch's answers waited for), the connection closed."""
        with self._lock:
            if self._statements is not None and self._statements.in_flight:
                with contextlib.suppress(psycopg.Error):
                    self._receive(2.0)
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
            self._statements = None
        self.samples.errors = errors
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
    extra: dict[str, str] = field(default_factory=dict)  # pressure, memory cgroup files


# pressure stall information: the share of time some (or all) runnable tasks were held up
# waiting for the CPU, I/O or memory (reclaim, refaults); Linux 4.20+, may be disabled
PRESSURE = ("cpu", "io", "memory")
MEMCG_FILES = ("memory.failcnt", "memory.usage_in_bytes", "memory.stat")
# the I/O limits in effect on each device (cgroup v1 blkio throttling in the root group:
# pgfsbench's emulated devices, or a limit someone puts on a device during a run)
BLKIO_ROOT = Path("/sys/fs/cgroup/blkio")
BLKIO_CAPS = {
    "write_bps": ("cap_write_mbps", 1e-6),
    "write_iops": ("cap_write_iops", 1.0),
    "read_bps": ("cap_read_mbps", 1e-6),
    "read_iops": ("cap_read_iops", 1.0),
}


class OsSampler:
    """/proc/stat, /proc/diskstats, /proc/meminfo and /proc/vmstat (raw text; parsed after
    the run so the sampler costs next to nothing while pgbench runs), once a second when
    driven by a Ticker; with them the pressure files where the kernel has them, and the
    memory cgroup PostgreSQL runs in when it has a limit. The files stay open and are read
    again from their start (68 us a second here, against 250 us to open and read them each
    time)."""

    FILES = ("stat", "diskstats", "meminfo", "vmstat")

    def __init__(
        self,
        proc: Path = Path("/proc"),
        memory_cgroup: Path | None = None,
        blkio: Path | None = BLKIO_ROOT,
        own_cgroup: dict[str, Path] | None = None,
    ):
        self.proc = proc
        self.samples: list[OsSample] = []
        self._fds: list[int] = []
        extra = {f"pressure_{k}": proc / "pressure" / k for k in PRESSURE}
        if memory_cgroup is not None:
            extra |= {
                f"memcg_{name.split('.', 1)[1]}": memory_cgroup / name for name in MEMCG_FILES
            }
        if blkio is not None:
            extra |= {f"blkio_{k}": blkio / f"blkio.throttle.{k}_device" for k in BLKIO_CAPS}
        # in a container: its own cgroup (collect/container.py), the only place its CPU
        # limit, its throttling and its own I/O show
        extra |= dict(own_cgroup or {})
        self._extra_paths = extra
        self._extra_fds: dict[str, int] = {}

    def tick(self) -> None:
        if not self._fds:
            self._fds = [os.open(self.proc / f, os.O_RDONLY) for f in self.FILES]
            for name, path in self._extra_paths.items():
                with contextlib.suppress(OSError):  # no PSI, or the group is gone
                    self._extra_fds[name] = os.open(path, os.O_RDONLY)
        t = time.time()
        extra = {}
        for name, fd in self._extra_fds.items():
            with contextlib.suppress(OSError):
                extra[name] = _read_whole(fd)
        stat, diskstats, meminfo, vmstat = (_read_whole(fd) for fd in self._fds)
        self.samples.append(OsSample(t, stat, diskstats, meminfo, vmstat, extra))

    def close(self) -> list[OsSample]:
        for fd in [*self._fds, *self._extra_fds.values()]:
            os.close(fd)
        self._fds = []
        self._extra_fds = {}
        return self.samples


def parse_pressure(text: str) -> dict[str, int]:
    """/proc/pressure/*: the cumulative stall time in microseconds, "some" and "full"."""
    out = {}
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        for part in rest.split():
            key, _, value = part.partition("=")
            if key == "total" and value.isdigit():
                out[kind] = int(value)
    return out


def parse_throttle(text: str) -> dict[str, int]:
    """A blkio.throttle.*_device file: "major:minor limit" per limited device."""
    out = {}
    for line in text.splitlines():
        dev, _, value = line.partition(" ")
        if value.strip().isdigit():
            out[dev] = int(value)
    return out


def parse_memcg_stat(text: str) -> dict[str, int]:
    """A cgroup v1 memory.stat (the group's own counters and the total_* of its tree)."""
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[name] = int(value)
    return out


def extra_rates(a: dict[str, str], b: dict[str, str], dt: float) -> dict[str, float]:
    """Per-second figures of the pressure and memory cgroup files between two samples:
    % of the time stalled (PSI), the group's limit hits, refaults and major faults a
    second, and its usage."""
    out: dict[str, float] = {}
    for k in PRESSURE:
        pa, pb = (
            parse_pressure(a.get(f"pressure_{k}", "")),
            parse_pressure(b.get(f"pressure_{k}", "")),
        )
        for kind in ("some", "full"):
            if kind in pa and kind in pb:
                out[f"psi_{k}_{kind}_pct"] = round(
                    min(100.0, max(0, pb[kind] - pa[kind]) / 1e4 / dt), 2
                )
    if "memcg_failcnt" in a and "memcg_failcnt" in b:
        with contextlib.suppress(ValueError):
            out["memcg_limit_hits_per_s"] = round(
                max(0, int(b["memcg_failcnt"]) - int(a["memcg_failcnt"])) / dt, 1
            )
    if "memcg_usage_in_bytes" in b:
        with contextlib.suppress(ValueError):
            out["memcg_usage_mb"] = round(int(b["memcg_usage_in_bytes"]) / 1e6, 1)
    out.update(container_rates(a, b, dt))
    if "memcg_stat" in a and "memcg_stat" in b:
        sa, sb = parse_memcg_stat(a["memcg_stat"]), parse_memcg_stat(b["memcg_stat"])
        for key, name in (
            ("total_workingset_refault_file", "memcg_refaults_per_s"),
            ("total_pgmajfault", "memcg_majfaults_per_s"),
        ):
            if key in sa and key in sb:
                out[name] = round(max(0, sb[key] - sa[key]) / dt, 1)
    return out


def _read_whole(fd: int, chunk: int = 1 << 16) -> str:
    """A /proc file read again from its start (the kernel writes it anew)."""
    parts = [os.pread(fd, chunk, 0)]
    while len(parts[-1]) == chunk:
        parts.append(os.pread(fd, chunk, chunk * len(parts)))
    return b"".join(parts).decode()


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


def device_caps(extra: dict[str, str], numbers: dict[str, str]) -> dict[str, float]:
    """The I/O limits in effect now on the devices of ``numbers`` ("7:0" -> "loop0"), as
    disk.<name>.cap_write_mbps and the like."""
    out: dict[str, float] = {}
    for key, (name, scale) in BLKIO_CAPS.items():
        for number, limit in parse_throttle(extra.get(f"blkio_{key}", "")).items():
            if number in numbers and limit > 0:
                out[f"disk.{numbers[number]}.{name}"] = round(limit * scale, 6)
    return out


def os_series(
    samples: list[OsSample], start: float, devices: list[str], numbers: dict[str, str] | None = None
) -> Series:
    """CPU, the devices under test (and the I/O limits on them: ``numbers`` maps
    "major:minor" to their names), dirty/writeback memory and reclaim, per second."""
    out: Series = {}
    if len(samples) < 2:
        return out
    times: list[float] = []
    rows: dict[str, list[Any]] = {}
    parsed = [
        (
            s.t,
            parse_stat(s.stat),
            parse_diskstats(s.diskstats),
            parse_meminfo(s.meminfo),
            parse_vmstat(s.vmstat),
            s.extra,
        )
        for s in samples
    ]
    for (t0, c0, d0, _m0, v0, e0), (t1, c1, d1, m1, v1, e1) in itertools.pairwise(parsed):
        times.append(t1)
        for k, v in extra_rates(e0, e1, t1 - t0 or 1.0).items():
            rows.setdefault(k, []).append(v)
        cpu = cpu_percentages(c0, c1)
        for k in ("user", "system", "iowait", "idle", "steal"):
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
        caps = device_caps(e1, numbers or {})
        for dev in devices:
            for name, _ in BLKIO_CAPS.values():
                rows.setdefault(f"disk.{dev}.{name}", []).append(caps.get(f"disk.{dev}.{name}"))
        rows.setdefault("dirty_kb", []).append(m1.get("Dirty"))
        rows.setdefault("writeback_kb", []).append(m1.get("Writeback"))
        for k in VMSTAT_RECLAIM:
            if k in v1 and k in v0 and not k.startswith("nr_"):
                rows.setdefault(f"vm_{k}", []).append(v1[k] - v0[k])
    _, offsets = _aligned(times, start)
    for name, values in rows.items():
        if len(values) == len(offsets) and any(v is not None for v in values):
            out[name] = _place(offsets, values)
    return out


RATE_COUNTERS = {
    # WAL inserted each second, by every session (the LSN moves as records are inserted;
    # pg_stat_wal's wal_bytes moves when a backend reports, at its transaction's end)
    "wal_lsn": ("wal_mbps", 1e-6),
    "wal_fpi": ("wal_fpi_per_s", 1.0),
    "wal_records": ("wal_records_per_s", 1.0),
    "xact_commit": ("commits_per_s", 1.0),
    "buffers_checkpoint": ("checkpoint_buffers_per_s", 1.0),
    "buffers_clean": ("bgwriter_buffers_per_s", 1.0),
    "buffers_backend": ("backend_buffers_per_s", 1.0),
    "blks_read": ("blks_read_per_s", 1.0),
    "wal_sync": ("wal_syncs_per_s", 1.0),
    "wal_write": ("wal_writes_per_s", 1.0),
    "temp_bytes": ("temp_mbps", 1e-6),
    "io_reads": ("io_reads_per_s", 1.0),
    "io_writes": ("io_writes_per_s", 1.0),
    "io_writebacks": ("io_writebacks_per_s", 1.0),
    "io_fsyncs": ("io_fsyncs_per_s", 1.0),
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
                out[name] = _place(
                    offsets, [None if b.get(key) is None else float(b[key]) for b in c[1:]]
                )
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
    for name, raws in (
        ("blockers", samples.raw_blockers),
        ("outside_sessions", samples.raw_outside),
    ):
        if not raws:
            continue
        _, offsets = _aligned([t for t, _ in raws], start)
        sessions: list[list[dict[str, Any]] | None] = []
        for _, raw in raws:
            try:
                sessions.append(parse_blockers(raw))
            except (ValueError, TypeError):
                sessions.append(None)
        out[name] = _place(offsets, sessions)
    return out


def blocker_origin(row: dict[str, Any]) -> str:
    """Who a blocking process is: "workload" (its application name), "pgfsbench", a
    server process that is not a client backend (autovacuum worker...), "prepared
    transaction", or "outside" (a connection from outside the benchmark)."""
    if row.get("pid") == 0:
        return "prepared transaction"
    app = str(row.get("app") or "")
    if app == WORKLOAD_APPLICATION:
        return "workload"
    if app.startswith("pgfsbench"):
        return "pgfsbench"
    kind = str(row.get("type") or "client backend")
    return "outside" if kind == "client backend" else kind


def parse_blockers(raw: str | None) -> list[dict[str, object]]:
    """The blockers (or outside sessions) query's value: an object per session, with its
    origin."""
    if not raw:
        return []
    rows = json.loads(raw)
    out = []
    for row in rows if isinstance(rows, list) else []:
        if isinstance(row, dict):
            q = row.get("query")
            out.append(
                {
                    **row,
                    "origin": blocker_origin(row),
                    # normalised: a session's literals are its users' data, never kept
                    "query": normalise(str(q))[:160] if q else None,
                }
            )
    return out


def counter_delta(a: dict[str, Any] | None, b: dict[str, Any] | None, key: str) -> int | None:
    if not a or not b or a.get(key) is None or b.get(key) is None:
        return None
    return int(float(b[key]) - float(a[key]))
