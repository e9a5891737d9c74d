"""Bulk load: COPY of generated rows into a table, in parallel streams, with the index built
before, after, or not at all.

The source rows are generated once, in the load phase, by the server itself into files in
the run's scratch directory (not on the storage under test): `streams` files of
rows/streams lines each, pgbench_accounts' shape. The measured phase recreates the table
(the index first when `indexes = "before"`), then runs one `COPY ... FROM 'file'` per stream
on its own connection, sampling pg_stat_progress_copy every 0.2 s for the per-second MB/s
and rows/s; then builds the index (`indexes = "after"`) and runs VACUUM ANALYZE, each
timed. Throughput is the source bytes loaded over the COPY's time, in MB/s; the WAL it
wrote is kept per MB loaded. The duration does not apply: a load takes what it takes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.spec import Cell, Defaults
from pgfsbench.spec.matrix import workload_config
from pgfsbench.spec.models import CopyWorkload
from pgfsbench.system.errors import Stalled, WorkloadError
from pgfsbench.system.held import Held, Owner
from pgfsbench.workloads.base import (
    LoadResult,
    Measurement,
    Phase,
    Progress,
    ProgressCallback,
    StallCheck,
    WorkloadContext,
)

if TYPE_CHECKING:
    from psycopg import sql

TABLE = "copy_target"
ROW_BYTES_ON_DISK = 130  # a pgbench_accounts-shaped row with its header, in the heap
CREATE = f"CREATE TABLE {TABLE} (aid int NOT NULL, bid int, abalance int, filler char(84))"
INDEX = f"CREATE INDEX {TABLE}_aid ON {TABLE} (aid)"


def rows_of(cell: Cell) -> int:
    return int(cell.scale * workload_config(cell.workload, CopyWorkload).rows_per_scale)


def generate_sql(path: Path, first: int, last: int) -> sql.Composed:
    """The server writes rows first..last to ``path`` (text COPY format)."""
    from psycopg import sql

    return sql.SQL(
        "COPY (SELECT g, 1 + (g - 1) / 100000, 0, repeat('x', 84) FROM "
        "generate_series({}, {}) g) TO {}"
    ).format(sql.Literal(int(first)), sql.Literal(int(last)), sql.Literal(str(path)))


def copy_from_sql(path: Path) -> sql.Composed:
    from psycopg import sql

    return sql.SQL("COPY {} FROM {}").format(sql.Identifier(TABLE), sql.Literal(str(path)))


def stream_ranges(rows: int, streams: int) -> list[tuple[int, int]]:
    """rows split into ``streams`` contiguous ranges (1-based, inclusive), sizes within 1."""
    base, extra = divmod(rows, streams)
    out, start = [], 1
    for i in range(streams):
        n = base + (1 if i < extra else 0)
        if n:
            out.append((start, start + n - 1))
        start += n
    return out


@dataclass(frozen=True)
class Copy:
    tool: str = "copy"

    def problems(self, cell: Cell, base_dir: Path, os_user: str | None) -> list[str]:
        return []

    def version_argv(self, binaries: Binaries) -> list[str]:
        return []  # COPY is the server's: its version is the run's PostgreSQL

    def estimated_bytes(self, cell: Cell) -> int:
        return rows_of(cell) * ROW_BYTES_ON_DISK * 2  # the table, and its index if any

    def _files(self, ctx: WorkloadContext) -> list[Path]:
        return sorted((ctx.workdir / "copy-source").glob("part-*.txt"))

    def load(self, ctx: WorkloadContext, cell: Cell) -> LoadResult:
        import psycopg

        streams = workload_config(cell.workload, CopyWorkload).streams
        source = ctx.workdir / "copy-source"
        # in the scratch directory, which is the server user's: made beneath it held
        with (
            Held.open(ctx.workdir) as scratch,
            scratch.ensure_dir(source.name, 0o700, Owner.of(ctx.os_user)),
        ):
            pass
        started = time.monotonic()
        try:
            with psycopg.connect(
                ctx.server.conninfo(), autocommit=True, connect_timeout=10
            ) as conn:
                for i, (a, b) in enumerate(stream_ranges(rows_of(cell), streams)):
                    conn.execute(generate_sql(source / f"part-{i:03d}.txt", a, b))
        except psycopg.Error as exc:
            raise WorkloadError(f"generating the COPY source failed: {exc}") from None
        wall = time.monotonic() - started
        size = sum(f.stat().st_size for f in self._files(ctx))
        return LoadResult(
            wall,
            {"generate_source": round(wall, 3)},
            f"{rows_of(cell)} rows in {streams} file(s), {size} bytes",
        )

    def run(self, ctx: WorkloadContext, cell: Cell, phase: Phase) -> Measurement:
        if not phase.measured:  # a warm-up load would only be a first load: nothing to warm
            return Measurement(unit="MB/s")
        import psycopg

        indexes = workload_config(cell.workload, CopyWorkload).indexes
        files = self._files(ctx)
        total_bytes = sum(f.stat().st_size for f in files)
        rows = rows_of(cell)
        phases: dict[str, float] = {}
        with psycopg.connect(ctx.server.conninfo(), autocommit=True, connect_timeout=10) as c:
            c.execute(f"DROP TABLE IF EXISTS {TABLE}")
            c.execute(CREATE)
            if indexes == "before":
                c.execute(INDEX)
            c.execute("CHECKPOINT")  # the previous load's dirty data is not this one's cost
            lsn0 = c.execute("SELECT pg_current_wal_lsn()").fetchone()
            streamed = _stream(c, ctx.server.conninfo(), files, phase.on_progress, phase.stalled)
            errors, copy_s = streamed.errors, streamed.seconds
            per_second, rows_per_second = streamed.mbps, streamed.rows_per_s
            phases["copy"] = round(copy_s, 3)
            if streamed.stall is not None:
                raise Stalled(streamed.stall)
            if not errors:
                phases.update(_finish(c, indexes))
            lsn1 = c.execute(
                f"SELECT pg_current_wal_lsn() - %s::pg_lsn, pg_total_relation_size('{TABLE}')",
                (str(lsn0[0]) if lsn0 else "0/0",),
            ).fetchone()
        wal = int(lsn1[0]) if lsn1 else 0
        mb = total_bytes / 1e6
        extra: dict[str, object] = {
            "rows": rows,
            "streams": len(files),
            "indexes": indexes,
            "source_bytes": total_bytes,
            "phases_s": phases,
            "rows_per_s": round(rows / copy_s, 1) if copy_s > 0 else None,
            "wal_bytes": wal,
            "wal_bytes_per_mb": round(wal / mb, 1) if mb else None,
            "table_bytes": int(lsn1[1]) if lsn1 else None,
        }
        return Measurement(
            unit="MB/s",
            throughput=round(mb / copy_s, 3) if copy_s > 0 and not errors else None,
            transactions=len(files) - len(errors),
            failed_transactions=len(errors),
            latency_avg_ms=round(copy_s * 1000, 3),
            series={
                "tps": (1.0, per_second),
                "load_mbps": (1.0, per_second),
                "rows_per_s": (1.0, rows_per_second),
            },
            errors=tuple(f"COPY failed: {e}" for e in errors),
            returncode=1 if errors else 0,
            extra=extra,
        )


@dataclass
class _Streamed:
    """What the parallel COPYs did: per-second MB/s and rows/s, how long, what failed."""

    mbps: list[float]
    rows_per_s: list[float]
    seconds: float
    errors: list[str]
    stall: str | None


def _stream(
    c: Any, conninfo: str, files: list[Path], on_progress: ProgressCallback, stalled: StallCheck
) -> _Streamed:
    """One COPY per file, each on its own connection, sampled through
    pg_stat_progress_copy on ``c`` five times a second; cancelled when ``stalled`` says."""
    import psycopg

    errors: list[str] = []
    done_bytes = [0]
    lock = threading.Lock()

    def stream(path: Path) -> None:
        try:
            with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as s:
                s.execute(copy_from_sql(path))
            with lock:
                done_bytes[0] += path.stat().st_size
        except Exception as exc:  # psycopg's errors, reported as the run's
            with lock:
                errors.append(str(exc).strip().splitlines()[0] if str(exc) else type(exc).__name__)

    started = time.monotonic()
    threads = [threading.Thread(target=stream, args=(f,), daemon=True) for f in files]
    for t in threads:
        t.start()
    per_second: list[float] = []
    rows_per_second: list[float] = []
    last = (0.0, 0.0)
    second_start = started
    stall: str | None = None
    while any(t.is_alive() for t in threads):
        time.sleep(0.2)  # the sampling period of pg_stat_progress_copy
        row = c.execute(
            "SELECT coalesce(sum(bytes_processed), 0), "
            "coalesce(sum(tuples_processed), 0) FROM "
            "pg_stat_progress_copy"
        ).fetchone()
        with lock:
            finished = done_bytes[0]
        now = time.monotonic()
        in_flight = (float(row[0]) if row else 0.0) + finished
        tuples = float(row[1]) if row else 0.0
        if now - second_start >= 1.0:
            dt = now - second_start
            mbps = max(0.0, in_flight - last[0]) / 1e6 / dt
            per_second.append(round(mbps, 3))
            rows_per_second.append(round(max(0.0, tuples - last[1]) / dt, 1))
            on_progress(Progress(len(per_second), mbps))
            last, second_start = (in_flight, tuples), now
        stall = stalled()
        if stall is not None:
            c.execute("SELECT pg_cancel_backend(pid) FROM pg_stat_progress_copy")
            break
    for t in threads:
        t.join(timeout=30)
    return _Streamed(per_second, rows_per_second, time.monotonic() - started, errors, stall)


def _finish(c: Any, indexes: str) -> dict[str, float]:
    """After the COPYs: the index (indexes = "after"), then VACUUM ANALYZE, each timed."""
    phases: dict[str, float] = {}
    if indexes == "after":
        t0 = time.monotonic()
        c.execute(INDEX)
        phases["index"] = round(time.monotonic() - t0, 3)
    t0 = time.monotonic()
    c.execute(f"VACUUM ANALYZE {TABLE}")
    phases["vacuum_analyze"] = round(time.monotonic() - t0, 3)
    return phases


def for_cell(cell: Cell, defaults: Defaults) -> Copy:
    return Copy()
