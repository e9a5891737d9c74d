"""pgbench: command lines for `pgbench -i` and runs, and parsers of what it prints (pure);
then `Pgbench`, the workload that drives them.

Latencies are exact per transaction from its log (-l); throughput per second comes from
its progress reports (-P 1).
"""

from __future__ import annotations

import dataclasses
import itertools
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.spec import Cell, Defaults, Workload
from pgfsbench.spec.matrix import workload_config
from pgfsbench.spec.models import PgbenchWorkload, WorkloadBase
from pgfsbench.spec.sizes import PGBENCH_BYTES_PER_SCALE
from pgfsbench.system.access import readable_by
from pgfsbench.system.actions import watch_process_group
from pgfsbench.system.errors import CommandError, Stalled, WorkloadError
from pgfsbench.system.held import write_file
from pgfsbench.workloads.base import (
    WORKLOAD_ENV,
    Endpoint,
    LoadResult,
    Measurement,
    Phase,
    Progress,
    WorkloadContext,
)

BYTES_PER_SCALE = PGBENCH_BYTES_PER_SCALE  # spec/sizes.py: one estimate, plan's and advise's


def init_steps(generation: str, foreign_keys: bool) -> str:
    """-I steps: drop, create, generate (g client-side / G server-side), vacuum, pkeys, fkeys."""
    steps = "dt" + ("G" if generation == "server" else "g") + "vp"
    return steps + ("f" if foreign_keys else "")


def init_argv(
    pgbench: str, conn: Endpoint, scale: int, generation: str, foreign_keys: bool
) -> list[str]:
    return [
        pgbench,
        "-i",
        "-s",
        str(scale),
        "-I",
        init_steps(generation, foreign_keys),
        *conn.libpq_args(),
        conn.dbname,
    ]


def script_path(script: str, base_dir: Path) -> tuple[Path, str]:
    """'my.sql@3' -> (base_dir/my.sql, '3'): relative paths are relative to the spec."""
    name, _, weight = script.partition("@")
    path = Path(name) if Path(name).is_absolute() else base_dir / name
    return path, weight


SEQSCAN_TABLE = "pgbench_accounts"


def seqscan_script(parallel_workers: int) -> str:
    """One full scan of the largest table per transaction (parallel workers as asked)."""
    return (
        f"SET max_parallel_workers_per_gather = {int(parallel_workers)};\n"
        f"SELECT count(*) FROM {SEQSCAN_TABLE};\n"
    )


def run_argv(
    pgbench: str,
    conn: Endpoint,
    workload: Workload,
    duration_s: float,
    *,
    base_dir: Path,
    progress: bool = True,
    vacuum: bool = True,
    log_prefix: Path | None = None,
    sampling_rate: float | None = None,
    transactions: int | None = None,
) -> list[str]:
    """``transactions``: each client runs that many (-t), instead of for the duration."""
    length = ["-t", str(transactions)] if transactions else ["-T", str(max(1, round(duration_s)))]
    argv = [
        pgbench,
        *conn.libpq_args(),
        "-c",
        str(workload.clients),
        "-j",
        str(workload.threads),
        *length,
        "-M",
        workload.protocol,
    ]
    if workload.builtin:
        argv += ["-b", workload.builtin]
    for script in workload.scripts:
        path, weight = script_path(script, base_dir)
        argv += ["-f", f"{path}@{weight}" if weight else str(path)]
    if workload.rate:
        argv += ["-R", f"{workload.rate:g}"]
    if progress:
        argv += ["-P", "1"]
    if not vacuum:
        argv.append("-n")
    if log_prefix is not None:
        argv += ["-l", f"--log-prefix={log_prefix}"]
        if sampling_rate is not None and sampling_rate < 1:
            argv += [f"--sampling-rate={sampling_rate:g}"]
    return argv + list(workload.extra_args) + [conn.dbname]


# ---------------------------------------------------------------- parsers


@dataclass(frozen=True)
class InitResult:
    seconds: float
    phases: dict[str, float]


_DONE_RE = re.compile(r"done in ([\d.]+) s\s*\((.*?)\)\.", re.DOTALL)
_PHASE_RE = re.compile(r"([a-z][a-z -]*?)\s+([\d.]+) s")


def parse_init(output: str) -> InitResult | None:
    """'done in 85.74 s (drop tables 0.10 s, ..., primary keys 18.71 s).' (may wrap lines)."""
    m = _DONE_RE.search(output)
    if not m:
        return None
    inner = " ".join(m.group(2).split())
    phases = {p.strip(): float(v) for p, v in _PHASE_RE.findall(inner)}
    return InitResult(float(m.group(1)), phases)


@dataclass(frozen=True)
class RunSummary:
    tps: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    transactions: int | None
    failed_transactions: int | None
    initial_connection_ms: float | None
    lag_avg_ms: float | None = None
    lag_max_ms: float | None = None
    header: dict[str, str] = field(default_factory=dict)
    aborted: bool = False
    errors: tuple[str, ...] = ()


def _num(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text, re.MULTILINE)
    return float(m.group(1)) if m else None


def parse_run(stdout: str, stderr: str = "") -> RunSummary:
    """The summary pgbench prints at the end of a run (PostgreSQL 10 to 17 wording)."""
    header = {}
    for key in (
        "transaction type",
        "scaling factor",
        "query mode",
        "number of clients",
        "number of threads",
        "maximum number of tries",
        "duration",
    ):
        m = re.search(rf"^{key}: (.*)$", stdout, re.MULTILINE)
        if m:
            header[key] = m.group(1).strip()
    tps = _num(r"^tps = ([\d.]+) \((?:without initial connection time|excluding)", stdout)
    tx = _num(r"^number of transactions actually processed: (\d+)", stdout)
    failed = _num(r"^number of failed transactions: (\d+)", stdout)
    errors = tuple(
        line.strip()
        for line in stderr.splitlines()
        if "pgbench: error" in line or "aborted" in line
    )
    return RunSummary(
        tps=tps,
        latency_avg_ms=_num(r"^latency average = ([\d.]+) ms", stdout),
        latency_stddev_ms=_num(r"^latency stddev = ([\d.]+) ms", stdout),
        transactions=int(tx) if tx is not None else None,
        failed_transactions=int(failed) if failed is not None else None,
        initial_connection_ms=_num(r"^initial connection time = ([\d.]+) ms", stdout),
        lag_avg_ms=_num(r"^rate limit schedule lag: avg ([\d.]+)", stdout),
        lag_max_ms=_num(r"^rate limit schedule lag: avg [\d.]+ \(max ([\d.]+)\)", stdout),
        header=header,
        aborted="Run was aborted" in stdout + stderr,
        errors=errors,
    )


@dataclass(frozen=True)
class ProgressPoint:
    t: float  # seconds since the start of the run
    tps: float
    latency_ms: float | None
    stddev_ms: float | None
    failed: int | None
    lag_ms: float | None = None


_PROGRESS_RE = re.compile(
    r"^progress: ([\d.]+) s, ([\d.]+) tps, lat ([\d.]+|NaN) ms stddev ([\d.]+|NaN)"
    r"(?:, (\d+) failed)?(?:, lag ([\d.]+) ms)?"
)


def parse_progress(line: str) -> ProgressPoint | None:
    """One '-P 1' line: 'progress: 3.0 s, 2819.7 tps, lat 1.414 ms stddev 0.677, 0 failed'."""
    m = _PROGRESS_RE.match(line.strip())
    if not m:
        return None

    def opt(s: str | None) -> float | None:
        return None if s is None or s == "NaN" else float(s)

    return ProgressPoint(
        float(m.group(1)),
        float(m.group(2)),
        opt(m.group(3)),
        opt(m.group(4)),
        int(m.group(5)) if m.group(5) is not None else None,
        opt(m.group(6)),
    )


# ---------------------------------------------------------------- the workload


@dataclass(frozen=True)
class Pgbench:
    """pgbench as a Workload: `pgbench -i` loads, `pgbench -T` measures."""

    generation: str = "client"
    foreign_keys: bool = False
    log_transactions: bool = True  # -l, for latency percentiles per run and per second
    tool: str = "pgbench"

    def problems(self, cell: Cell, base_dir: Path, os_user: str | None) -> list[str]:
        found = []
        for script in cell.workload.scripts:
            path, _ = script_path(script, base_dir)
            if os_user is not None:
                why = readable_by(path, os_user)
            else:
                why = None if path.is_file() else f"{path} does not exist"
            if why:
                found.append(
                    f"workload {cell.workload.name}: script {script}: {why} "
                    "(pgbench runs as the PostgreSQL OS user)"
                )
        return found

    def version_argv(self, binaries: Binaries) -> list[str]:
        return [binaries.tool("pgbench"), "--version"]

    def estimated_bytes(self, cell: Cell) -> int:
        return cell.scale * BYTES_PER_SCALE

    def load(self, ctx: WorkloadContext, cell: Cell) -> LoadResult:
        argv = init_argv(
            ctx.binaries.tool("pgbench"), ctx.server, cell.scale, self.generation, self.foreign_keys
        )
        started = time.monotonic()
        try:
            done = ctx.runner.run(
                argv, timeout=max(600.0, cell.scale * 120.0), user=ctx.os_user, cwd=ctx.workdir
            )
        except CommandError as exc:
            write_file(ctx.artifacts / "pgbench-init.txt", exc.stdout + exc.stderr)
            raise WorkloadError(f"pgbench -i failed: {exc}") from None
        wall = time.monotonic() - started
        output = done.stdout + done.stderr
        write_file(ctx.artifacts / "pgbench-init.txt", output)
        parsed = parse_init(output)
        phases = dict(parsed.phases) if parsed else {}
        phases["wall_clock"] = round(wall, 3)
        return LoadResult(parsed.seconds if parsed else wall, phases, output)

    def run(self, ctx: WorkloadContext, cell: Cell, phase: Phase) -> Measurement:
        if cell.workload.builtin == "seqscan":
            return self._seqscan(ctx, cell, phase)
        return self._run(ctx, cell, phase)

    def _seqscan(self, ctx: WorkloadContext, cell: Cell, phase: Phase) -> Measurement:
        """Scans per second from pgbench, made MB/s by the table's size on disk."""
        import psycopg

        w = cell.workload
        script = ctx.workdir / "seqscan.sql"
        # the scratch directory is the server user's: written beneath it held, not by path
        workers = workload_config(w, PgbenchWorkload).parallel_workers
        write_file(script, seqscan_script(workers), 0o644)
        with psycopg.connect(ctx.server.conninfo(), connect_timeout=10) as conn:
            row = conn.execute("SELECT pg_relation_size(%s)", (SEQSCAN_TABLE,)).fetchone()
        table = int(row[0]) if row else 0
        mb = table / 1e6
        scan = dataclasses.replace(
            cell,
            workload=dataclasses.replace(
                w, builtin=None, scripts=(str(script),), protocol="simple"
            ),
        )

        def progress(p: Progress) -> None:
            phase.on_progress(
                Progress(
                    p.t, p.throughput * mb, p.latency_ms, {**p.extra, "scans_per_s": p.throughput}
                )
            )

        # a cold cache stays cold for one pass only: then each client scans once
        once = phase.measured and workload_config(w, WorkloadBase).cache == "cold"
        m = self._run(
            ctx,
            scan,
            dataclasses.replace(phase, on_progress=progress),
            transactions=1 if once else None,
        )
        scans = m.throughput
        m.unit = "MB/s"
        m.throughput = None if scans is None else round(scans * mb, 3)
        m.extra = {
            **m.extra,
            "scans_per_s": scans,
            "table": SEQSCAN_TABLE,
            "table_bytes": table,
            "parallel_workers": workload_config(w, PgbenchWorkload).parallel_workers,
        }
        if "tps" in m.series:
            t0, values = m.series["tps"]
            m.series["read_mbps"] = (
                t0,
                [None if v is None else round(float(v) * mb, 3) for v in values],
            )
        return m

    def _run(
        self, ctx: WorkloadContext, cell: Cell, phase: Phase, transactions: int | None = None
    ) -> Measurement:
        w = cell.workload
        name = "pgbench" if phase.measured else "warmup"
        log = phase.measured and self.log_transactions
        # vacuum (and truncate pgbench_history) before the first phase of a run only
        vacuum = not phase.measured or w.warmup_s <= 0
        argv = run_argv(
            ctx.binaries.tool("pgbench"),
            ctx.endpoint,
            w,
            phase.seconds,
            base_dir=ctx.base_dir,
            vacuum=vacuum,
            log_prefix=ctx.workdir / "txlog" if log else None,
            sampling_rate=w.sampling_rate,
            transactions=transactions,
        )
        stdout_path = ctx.artifacts / f"{name}.stdout"
        child = ctx.runner.spawn(
            argv, stdout_path=stdout_path, user=ctx.os_user, cwd=ctx.workdir, env=WORKLOAD_ENV
        )
        # if pgfsbench is killed before this is journaled, pgbench ends by itself when
        # cleanup stops the server it is connected to
        watch_process_group(ctx.journal, child.pid, child.start_time, f"pgbench pid {child.pid}")
        points: list[ProgressPoint] = []

        def on_line(line: str) -> None:
            point = parse_progress(line)
            if point is not None:
                points.append(point)
                phase.on_progress(
                    Progress(point.t, point.tps, point.latency_ms, {"lag_ms": point.lag_ms})
                )

        child.on_stderr_line(on_line)
        try:
            rc = child.wait_watching(phase.seconds + 300, phase.stalled)
        except Stalled as exc:
            # what it measured until it stalled is the evidence of the stall
            write_file(ctx.artifacts / f"{name}.stderr", child.stderr)
            return Measurement(
                series=progress_series(points), stalled=str(exc), returncode=-1, errors=(str(exc),)
            )
        except CommandError:
            write_file(ctx.artifacts / f"{name}.stderr", child.stderr)
            raise
        except BaseException:
            child.kill_tree()
            raise
        write_file(ctx.artifacts / f"{name}.stderr", child.stderr)
        summary = parse_run(stdout_path.read_text(errors="replace"), child.stderr)
        m = _measurement(summary, rc, points)
        if log:
            from pgfsbench.collect.txlog import compress_logs, parse_txlog

            logs = sorted(ctx.workdir.glob("txlog.*"))
            m.latency = parse_txlog(logs, sampling_rate=w.sampling_rate, duration_s=phase.seconds)
            if logs:
                m.artifacts["txlog"] = compress_logs(logs, ctx.artifacts / "txlog.gz")
        return m


def per_second(points: list[ProgressPoint]) -> list[ProgressPoint]:
    """One report per second. pgbench reports once for all the seconds it could not report
    in (stopped, or starved of CPU), its figures the average over them: each of those
    seconds gets that average, so the series keeps its time axis."""
    out: list[ProgressPoint] = []
    for p in points:
        if out:
            gap = round(p.t - out[-1].t)
            out += [dataclasses.replace(p, t=out[-1].t + k) for k in range(1, gap)]
        out.append(p)
    return out


def progress_series(points: list[ProgressPoint]) -> dict[str, tuple[float, list[object]]]:
    """pgbench -P 1 lines as per-second series (t0 = the first report)."""
    if not points:
        return {}
    # the seconds a report covers with others (its own included): an average over them
    averaged = {
        round(b.t) - k
        for a, b in itertools.pairwise(points)
        if round(b.t - a.t) > 1
        for k in range(round(b.t - a.t))
    }
    points = per_second(points)
    t0 = points[0].t
    out: dict[str, tuple[float, list[object]]] = {
        "tps": (t0, [p.tps for p in points]),
        "latency_avg_ms": (t0, [p.latency_ms for p in points]),
        "latency_stddev_ms": (t0, [p.stddev_ms for p in points]),
    }
    if any(p.failed for p in points):
        out["failed"] = (t0, [p.failed for p in points])
    if any(p.lag_ms is not None for p in points):
        out["lag_ms"] = (t0, [p.lag_ms for p in points])
    if averaged:
        out["progress_gap"] = (t0, [1 if round(p.t) in averaged else 0 for p in points])
    return out


def _measurement(summary: RunSummary, rc: int, points: list[ProgressPoint]) -> Measurement:
    """What a pgbench run measured: its summary, its errors, its -P 1 series."""
    errors = list(summary.errors)
    if summary.aborted:
        errors.append("pgbench run was aborted; results are incomplete")
    if rc != 0 and not errors:
        errors.append(f"pgbench exited {rc}")
    return Measurement(
        unit="tps",
        throughput=summary.tps,
        latency_avg_ms=summary.latency_avg_ms,
        latency_stddev_ms=summary.latency_stddev_ms,
        transactions=summary.transactions,
        failed_transactions=summary.failed_transactions,
        initial_connection_ms=summary.initial_connection_ms,
        series=progress_series(points),
        errors=tuple(errors),
        returncode=rc,
        extra={
            k: v
            for k, v in (("lag_avg_ms", summary.lag_avg_ms), ("lag_max_ms", summary.lag_max_ms))
            if v is not None
        },
    )


def for_cell(cell: Cell, defaults: Defaults) -> Pgbench:
    """pgbench as the spec's defaults ask (data generation, foreign keys, -l when watched)."""
    return Pgbench(
        defaults.generation,
        defaults.foreign_keys,
        bool(defaults.samplers) and defaults.txlog is not False,
    )
