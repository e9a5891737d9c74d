"""pg_dump as a read-throughput workload.

The data is pgbench's (`pgbench -i` at the cell's scale, timed as the load). The measured
phase dumps the database again and again until the duration is spent (at least once; with
a cold cache exactly once, since a second dump would read what the first left cached):
custom format to /dev/null, or directory format with `jobs` workers into the run's scratch
directory (removed after each dump). Throughput is the database's size times the dumps
done, over the time taken, in MB/s. The per-second series follows pg_dump's output (what
its processes wrote, /proc/PID/io wchar), scaled so that it sums to the database bytes
dumped: a slow second shows as one, in the same unit as the throughput.
"""

from __future__ import annotations

import functools
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.spec import Cell, Defaults
from pgfsbench.spec.matrix import workload_config
from pgfsbench.spec.models import DumpWorkload
from pgfsbench.system.actions import watch_process_group
from pgfsbench.system.errors import CommandError, Stalled
from pgfsbench.system.held import write_file
from pgfsbench.system.runner import Child
from pgfsbench.workloads.base import (
    WORKLOAD_ENV,
    Endpoint,
    LoadResult,
    Measurement,
    Phase,
    Progress,
    ProgressCallback,
    StallCheck,
    WorkloadContext,
)
from pgfsbench.workloads.pgbench import Pgbench


def dump_argv(
    pg_dump: str, conn: Endpoint, fmt: str, jobs: int, compress: int, target: Path | None
) -> list[str]:
    # --no-sync: the read is measured, not the durability of a throwaway copy (and /dev/null
    # cannot be fsynced)
    argv = [pg_dump, *conn.libpq_args(), "-d", conn.dbname, "-Z", str(compress), "--no-sync"]
    if fmt == "directory":
        assert target is not None
        argv += ["-Fd", "-j", str(jobs), "-f", str(target)]
    else:
        argv += ["-Fc", "-f", "/dev/null"]
    return argv


def written_bytes_of_group(pgid: int) -> int:
    """Bytes written (wchar: its output) by every process of a process group: pg_dump and
    its workers. What pg_dump receives from the server arrives through recv(), which
    /proc/PID/io does not count; what it writes out does, and tracks it."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[2]) != pgid:
                continue
            for line in (entry / "io").read_text().splitlines():
                if line.startswith("wchar:"):
                    total += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue
    return total


@dataclass(frozen=True)
class Dump:
    loader: Pgbench
    tool: str = "pg_dump"

    def problems(self, cell: Cell, base_dir: Path, os_user: str | None) -> list[str]:
        return []

    def version_argv(self, binaries: Binaries) -> list[str]:
        return [binaries.tool("pg_dump"), "--version"]

    def estimated_bytes(self, cell: Cell) -> int:
        return self.loader.estimated_bytes(cell)

    def load(self, ctx: WorkloadContext, cell: Cell) -> LoadResult:
        return self.loader.load(ctx, cell)

    def run(self, ctx: WorkloadContext, cell: Cell, phase: Phase) -> Measurement:
        cfg = workload_config(cell.workload, DumpWorkload)
        fmt, jobs, compress = cfg.format, cfg.jobs, cfg.compress
        db_bytes = _database_bytes(ctx.server.conninfo())
        name = "pg_dump" if phase.measured else "warmup"
        started = time.monotonic()
        out = _Output(phase.on_progress, phase.stalled, second_start=started)
        per_second = out.per_second
        dumps = 0
        errors: list[str] = []
        stderr_all = []

        # a cold cache is cold for one dump only: then the measured phase is that dump
        once = phase.measured and cfg.cache == "cold"
        while dumps == 0 or (not once and time.monotonic() - started < phase.seconds):
            target = ctx.workdir / "dump" if fmt == "directory" else None
            if target is not None and target.exists():
                shutil.rmtree(target)
            argv = dump_argv(
                ctx.binaries.tool("pg_dump"), ctx.endpoint, fmt, jobs, compress, target
            )
            child = _start(ctx, argv, name)
            try:
                rc = child.wait_watching(
                    max(600.0, phase.seconds * 10),
                    functools.partial(out.tick, child.pid, [0]),
                    interval=0.2,
                )
            except Stalled as exc:
                return Measurement(
                    unit="MB/s",
                    series={"tps": (1.0, list(per_second))},
                    stalled=str(exc),
                    returncode=-1,
                    errors=(str(exc),),
                )
            except CommandError:
                stderr_all.append(child.stderr)
                raise
            stderr_all.append(child.stderr)
            if target is not None:
                shutil.rmtree(target, ignore_errors=True)
            if rc != 0:
                errors.append(
                    f"pg_dump exited {rc}: " + (child.stderr.strip().splitlines() or [""])[-1]
                )
                break
            dumps += 1
        elapsed = time.monotonic() - started
        write_file(ctx.artifacts / f"{name}.stderr", "".join(stderr_all))
        if out.total > 0 and dumps:  # output bytes -> database bytes
            factor = db_bytes * dumps / out.total
            per_second = [round(v * factor, 3) for v in per_second]
        return _measurement(
            per_second,
            dumps,
            db_bytes,
            elapsed,
            errors,
            {"format": fmt, "jobs": jobs, "compress": compress},
        )


@dataclass
class _Output:
    """The bytes pg_dump and its workers wrote, counted each second as MB/s."""

    on_progress: ProgressCallback
    stalled: StallCheck
    second_start: float
    this_second: float = 0.0
    total: float = 0.0
    per_second: list[float] = field(default_factory=list)

    def tick(self, pgid: int, last: list[int]) -> str | None:
        """Count what the process group wrote since ``last``; a second's MB/s when one
        has passed; whether the run is stalled."""
        now = time.monotonic()
        written = written_bytes_of_group(pgid)
        self.this_second += max(0, written - last[0])
        self.total += max(0, written - last[0])
        last[0] = written
        if now - self.second_start >= 1.0:
            mbps = self.this_second / 1e6 / (now - self.second_start)
            self.per_second.append(round(mbps, 3))
            self.on_progress(Progress(len(self.per_second), mbps))
            self.this_second, self.second_start = 0.0, now
        return self.stalled()


def _start(ctx: WorkloadContext, argv: list[str], name: str) -> Child:
    """pg_dump started in its own process group, watched by the journal."""
    child = ctx.runner.spawn(
        argv,
        stdout_path=ctx.artifacts / f"{name}.stdout",
        user=ctx.os_user,
        cwd=ctx.workdir,
        env=WORKLOAD_ENV,
    )
    watch_process_group(ctx.journal, child.pid, child.start_time, f"pg_dump pid {child.pid}")
    return child


def _database_bytes(conninfo: str) -> int:
    """The size of the database dumped (what a dump's MB/s are counted in)."""
    import psycopg

    with psycopg.connect(conninfo, connect_timeout=10) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def _measurement(
    per_second: list[float],
    dumps: int,
    db_bytes: int,
    elapsed: float,
    errors: list[str],
    options: dict[str, str | int],
) -> Measurement:
    """What the dumps measured: the database's MB dumped a second."""
    mbps = db_bytes * dumps / 1e6 / elapsed if dumps and elapsed > 0 else None
    return Measurement(
        unit="MB/s",
        throughput=None if mbps is None else round(mbps, 3),
        transactions=dumps,
        failed_transactions=0 if not errors else 1,
        latency_avg_ms=round(elapsed / dumps * 1000, 3) if dumps else None,
        series={"tps": (1.0, list(per_second)), "read_mbps": (1.0, list(per_second))},
        errors=tuple(errors),
        returncode=0 if not errors else 1,
        extra={
            "dumps": dumps,
            "database_bytes": db_bytes,
            **options,
            "seconds": round(elapsed, 3),
            "series_from": "pg_dump's output (/proc/PID/io wchar), scaled to the "
            "database bytes dumped",
        },
    )


def for_cell(cell: Cell, defaults: Defaults) -> Dump:
    """pg_dump of the pgbench tables, loaded as pgbench would (without -l: not run)."""
    return Dump(Pgbench(defaults.generation, defaults.foreign_keys, False))
