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
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.spec import Cell, Defaults
from pgfsbench.system.actions import watch_process_group
from pgfsbench.system.errors import CommandError, Stalled
from pgfsbench.workloads.base import (
    WORKLOAD_ENV,
    Endpoint,
    LoadResult,
    Measurement,
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

    def run(
        self,
        ctx: WorkloadContext,
        cell: Cell,
        seconds: float,
        *,
        measured: bool,
        on_progress: ProgressCallback,
        stalled: StallCheck,
    ) -> Measurement:
        import psycopg

        cfg = cell.workload.config
        fmt, jobs, compress = (
            getattr(cfg, "format", "custom"),
            getattr(cfg, "jobs", 1),
            getattr(cfg, "compress", 0),
        )
        with psycopg.connect(ctx.server.conninfo(), connect_timeout=10) as conn:
            row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        db_bytes = int(row[0]) if row else 0
        name = "pg_dump" if measured else "warmup"
        started = time.monotonic()
        per_second: list[float] = []
        # bytes written in the current second, its start, bytes written in all
        counted = [0.0, started, 0.0]
        dumps = 0
        errors: list[str] = []
        stderr_all = []

        def tick(pgid: int, last: list[int]) -> str | None:
            now = time.monotonic()
            read = written_bytes_of_group(pgid)
            counted[0] += max(0, read - last[0])
            counted[2] += max(0, read - last[0])
            last[0] = read
            if now - counted[1] >= 1.0:
                mbps = counted[0] / 1e6 / (now - counted[1])
                per_second.append(round(mbps, 3))
                on_progress(Progress(len(per_second), mbps))
                counted[0], counted[1] = 0.0, now
            return stalled()

        # a cold cache is cold for one dump only: then the measured phase is that dump
        once = measured and getattr(cfg, "cache", "warm") == "cold"
        while dumps == 0 or (not once and time.monotonic() - started < seconds):
            target = ctx.workdir / "dump" if fmt == "directory" else None
            if target is not None and target.exists():
                shutil.rmtree(target)
            argv = dump_argv(
                ctx.binaries.tool("pg_dump"), ctx.endpoint, fmt, jobs, compress, target
            )
            child = ctx.runner.spawn(
                argv,
                stdout_path=ctx.artifacts / f"{name}.stdout",
                user=ctx.os_user,
                cwd=ctx.workdir,
                env=WORKLOAD_ENV,
            )
            watch_process_group(
                ctx.journal, child.pid, child.start_time, f"pg_dump pid {child.pid}"
            )
            try:
                rc = child.wait_watching(
                    max(600.0, seconds * 10), functools.partial(tick, child.pid, [0]), interval=0.2
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
        (ctx.artifacts / f"{name}.stderr").write_text("".join(stderr_all))
        if counted[2] > 0 and dumps:  # output bytes -> database bytes
            factor = db_bytes * dumps / counted[2]
            per_second = [round(v * factor, 3) for v in per_second]
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
                "format": fmt,
                "jobs": jobs,
                "compress": compress,
                "seconds": round(elapsed, 3),
                "series_from": "pg_dump's output (/proc/PID/io wchar), scaled to the "
                "database bytes dumped",
            },
        )


def for_cell(cell: Cell, defaults: Defaults) -> Dump:
    """pg_dump of the pgbench tables, loaded as pgbench would (without -l: not run)."""
    return Dump(Pgbench(defaults.generation, defaults.foreign_keys, False))
