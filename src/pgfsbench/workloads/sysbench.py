"""sysbench (Debian's, pgsql driver): command lines for `prepare` and `run`, and parsers of
what it prints (pure); then `Sysbench`, the workload that drives them.

Throughput per second and the per-second percentile come from `--report-interval=1`; the
latency distribution of the whole run from `--histogram` (sysbench's own logarithmic
buckets), so the same percentiles as pgbench's (p50 ... p99.9, max) are stored under the
same names; errors and reconnects are counted.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.spec import Cell, Defaults, SysbenchWorkload
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

SCRIPTS_DIR = Path("/usr/share/sysbench")
ROW_BYTES = 240  # an sbtest row (id, k, c char(120), pad char(60)) with its two indexes
ROWS_PER_SCALE = 10_000  # sysbench's own default table_size


def table_size(cell: Cell) -> int:
    cfg = cell.workload.config
    assert isinstance(cfg, SysbenchWorkload)
    return cfg.table_size if cfg.table_size is not None else cell.scale * ROWS_PER_SCALE


def mix_options(mix: str | None) -> dict[str, str]:
    """'80/20' -> 8 point selects, 1 index and 1 non-index update per transaction, no range
    queries and no delete/insert: 80% of the queries read, 20% write."""
    if mix is None:
        return {}
    reads, writes = (int(p) for p in mix.split("/"))
    # the fewest queries per transaction (10 at least) that split exactly as asked
    n = next(n for n in range(10, 101) if reads * n % 100 == 0 and writes * n % 100 == 0)
    r, w = reads * n // 100, writes * n // 100
    index = (w + 1) // 2
    return {
        "point_selects": str(r),
        "index_updates": str(index),
        "non_index_updates": str(w - index),
        "range_selects": "off",
        "delete_inserts": "0",
    }


def common_args(conn: Endpoint, cfg: SysbenchWorkload, rows: int) -> list[str]:
    args = [
        "--db-driver=pgsql",
        f"--pgsql-host={conn.host}",
        f"--pgsql-port={conn.port}",
        f"--pgsql-user={conn.user}",
        f"--pgsql-db={conn.dbname}",
        f"--tables={cfg.tables}",
        f"--table-size={rows}",
    ]
    options = {**mix_options(cfg.mix), **{k: _opt(v) for k, v in cfg.options.items()}}
    return args + [f"--{k}={v}" for k, v in options.items()]


def _opt(v: object) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


def prepare_argv(
    sysbench: str, conn: Endpoint, cfg: SysbenchWorkload, rows: int, threads: int
) -> list[str]:
    return [
        sysbench,
        *common_args(conn, cfg, rows),
        f"--threads={max(1, threads)}",
        str(SCRIPTS_DIR / f"{cfg.script}.lua"),
        "prepare",
    ]


def run_argv(
    sysbench: str,
    conn: Endpoint,
    cfg: SysbenchWorkload,
    rows: int,
    clients: int,
    seconds: float,
    rate: float | None,
    prepared: bool = True,
) -> list[str]:
    """``prepared`` False: without server-side prepared statements (through a transaction
    pooler that would lose them), unless the spec set db-ps-mode itself."""
    argv = [
        sysbench,
        *common_args(conn, cfg, rows),
        f"--threads={clients}",
        f"--time={max(1, round(seconds))}",
        "--report-interval=1",
        "--histogram=on",
        f"--percentile={cfg.percentile}",
    ]
    if not prepared and "db-ps-mode" not in cfg.options:
        argv.append("--db-ps-mode=disable")
    if rate:
        argv.append(f"--rate={max(1, round(rate))}")
    return [*argv, *cfg.extra_args, str(SCRIPTS_DIR / f"{cfg.script}.lua"), "run"]


# ---------------------------------------------------------------- parsers


@dataclass(frozen=True)
class Report:
    """One `--report-interval=1` line."""

    t: float
    threads: int
    tps: float
    qps: float
    latency_ms: float | None  # the configured percentile
    errors_per_s: float
    reconnects_per_s: float


_REPORT_RE = re.compile(
    r"^\[ *(\d+)s \] thds: (\d+) tps: ([\d.]+) qps: ([\d.]+) \(r/w/o: [\d./]+\) "
    r"lat \(ms,\d+%\): ([\d.]+|nan) err/s: ([\d.]+) reconn/s: ([\d.]+)"
)


def parse_report(line: str) -> Report | None:
    m = _REPORT_RE.match(line.strip())
    if not m:
        return None
    lat = None if m.group(5) == "nan" else float(m.group(5))
    return Report(
        float(m.group(1)),
        int(m.group(2)),
        float(m.group(3)),
        float(m.group(4)),
        lat,
        float(m.group(6)),
        float(m.group(7)),
    )


@dataclass(frozen=True)
class Summary:
    transactions: int | None = None
    tps: float | None = None
    queries: int | None = None
    qps: float | None = None
    reads: int | None = None
    writes: int | None = None
    ignored_errors: int | None = None
    reconnects: int | None = None
    total_time_s: float | None = None
    latency_ms: dict[str, float] = field(default_factory=dict)  # min avg max p.. sum
    histogram: tuple[tuple[float, int], ...] = ()  # (bucket value ms, count)
    fatal: tuple[str, ...] = ()


def _num(pattern: str, text: str) -> float | None:
    m = re.search(pattern, text, re.MULTILINE)
    return float(m.group(1)) if m else None


def parse_run(output: str) -> Summary:
    """The end-of-run report, the latency histogram and FATAL lines."""
    hist: list[tuple[float, int]] = []
    in_hist = False
    for line in output.splitlines():
        if line.startswith("Latency histogram"):
            in_hist = True
            continue
        if in_hist:
            m = re.match(r"^\s+([\d.]+) \|\**\s+(\d+)$", line)
            if m:
                hist.append((float(m.group(1)), int(m.group(2))))
            elif line.strip() and not line.strip().startswith("value"):
                in_hist = False
    lat: dict[str, float] = {}
    block = output[output.find("Latency (ms):") :] if "Latency (ms):" in output else ""
    for key, label in (("min", "min"), ("avg", "avg"), ("max", "max"), ("sum", "sum")):
        v = _num(rf"^\s+{label}:\s+([\d.]+)", block)
        if v is not None:
            lat[key] = v
    m = re.search(r"^\s+(\d+)th percentile:\s+([\d.]+)", block, re.MULTILINE)
    if m:
        lat[f"p{m.group(1)}"] = float(m.group(2))

    def ints(pattern: str) -> int | None:
        v = _num(pattern, output)
        return int(v) if v is not None else None

    return Summary(
        transactions=ints(r"^\s+transactions:\s+(\d+)"),
        tps=_num(r"^\s+transactions:\s+\d+\s+\(([\d.]+) per sec\.\)", output),
        queries=ints(r"^\s+queries:\s+(\d+)"),
        qps=_num(r"^\s+queries:\s+\d+\s+\(([\d.]+) per sec\.\)", output),
        reads=ints(r"^\s+read:\s+(\d+)"),
        writes=ints(r"^\s+write:\s+(\d+)"),
        ignored_errors=ints(r"^\s+ignored errors:\s+(\d+)"),
        reconnects=ints(r"^\s+reconnects:\s+(\d+)"),
        total_time_s=_num(r"^\s+total time:\s+([\d.]+)s", output),
        latency_ms=lat,
        histogram=tuple(hist),
        fatal=tuple(
            dict.fromkeys(line.strip() for line in output.splitlines() if line.startswith("FATAL:"))
        ),
    )


# sysbench's own lines around an error it printed just before (the Lua function that
# failed, the thread that could not start): never the cause
_WRAPPER = re.compile(r"Thread initialization failed|`\w+' function failed")
ERROR_LINES_KEPT = 10


def error_lines(fatal: tuple[str, ...]) -> list[str]:
    """The FATAL lines a run keeps, at most ERROR_LINES_KEPT, the cause last (a run's error
    is its workload's last error line): the first that is not one of sysbench's wrappers,
    e.g. 'Connection to database failed: ...' or 'PQprepare() failed: ERROR: ...', not
    'Thread initialization failed!'."""
    if not fatal:
        return []
    cause = next((line for line in fatal if not _WRAPPER.search(line)), fatal[0])
    return [*[line for line in fatal if line != cause][: ERROR_LINES_KEPT - 1], cause]


def histogram_percentiles(hist: tuple[tuple[float, int], ...]) -> dict[str, float]:
    """p50 ... p99.9 from sysbench's histogram (bucket values, as it prints them)."""
    total = sum(n for _, n in hist)
    if not total:
        return {}
    out: dict[str, float] = {}
    for key, q in (("p50", 0.5), ("p90", 0.9), ("p95", 0.95), ("p99", 0.99), ("p999", 0.999)):
        need, seen = q * total, 0
        for value, n in hist:
            seen += n
            if seen >= need:
                out[key] = value
                break
    return out


# ---------------------------------------------------------------- the workload


@dataclass(frozen=True)
class Sysbench:
    """sysbench as a Workload: `prepare` loads, `run` measures."""

    tool: str = "sysbench"
    binary: str = "sysbench"

    def problems(self, cell: Cell, base_dir: Path, os_user: str | None) -> list[str]:
        cfg = cell.workload.config
        assert isinstance(cfg, SysbenchWorkload)
        script = SCRIPTS_DIR / f"{cfg.script}.lua"
        found = []
        if not script.is_file():
            found.append(
                f"workload {cell.workload.name}: {script} not found (Debian's "
                "sysbench package installs the OLTP scripts there)"
            )
        return found

    def version_argv(self, binaries: Binaries) -> list[str]:
        return ["sysbench", "--version"]

    def estimated_bytes(self, cell: Cell) -> int:
        cfg = cell.workload.config
        assert isinstance(cfg, SysbenchWorkload)
        return cfg.tables * table_size(cell) * ROW_BYTES

    def load(self, ctx: WorkloadContext, cell: Cell) -> LoadResult:
        cfg = cell.workload.config
        assert isinstance(cfg, SysbenchWorkload)
        argv = prepare_argv(
            self.binary, ctx.server, cfg, table_size(cell), min(cfg.tables, cell.workload.threads)
        )
        started = time.monotonic()
        rows = cfg.tables * table_size(cell)
        try:
            done = ctx.runner.run(
                argv, timeout=max(600.0, rows / 2000), user=ctx.os_user, cwd=ctx.workdir
            )
        except CommandError as exc:
            write_file(ctx.artifacts / "sysbench-prepare.txt", exc.stdout + exc.stderr)
            raise WorkloadError(f"sysbench prepare failed: {exc}") from None
        wall = time.monotonic() - started
        write_file(ctx.artifacts / "sysbench-prepare.txt", done.stdout + done.stderr)
        return LoadResult(wall, {"prepare": round(wall, 3)}, done.stdout)

    def run(self, ctx: WorkloadContext, cell: Cell, phase: Phase) -> Measurement:
        cfg = cell.workload.config
        assert isinstance(cfg, SysbenchWorkload)
        name = "sysbench" if phase.measured else "sysbench-warmup"
        lost = ctx.prepared_statements_lost
        argv = run_argv(
            self.binary,
            ctx.endpoint,
            cfg,
            table_size(cell),
            cell.workload.clients,
            phase.seconds,
            cell.workload.rate,
            prepared=lost is None,
        )
        prepared = "--db-ps-mode=disable" not in argv  # ours, the spec's options or args
        out_path = ctx.artifacts / f"{name}.stdout"
        child = ctx.runner.spawn(
            argv,
            stdout_path=out_path,
            user=ctx.os_user,
            cwd=ctx.workdir,
            merge_stderr=True,
            env=WORKLOAD_ENV,
        )
        watch_process_group(ctx.journal, child.pid, child.start_time, f"sysbench pid {child.pid}")
        reports: list[Report] = []

        def on_line(line: str) -> None:
            r = parse_report(line)
            if r is not None:
                reports.append(r)
                phase.on_progress(
                    Progress(
                        r.t, r.tps, r.latency_ms, {"qps": r.qps, "errors_per_s": r.errors_per_s}
                    )
                )

        child.on_stderr_line(on_line)
        try:
            rc = child.wait_watching(phase.seconds + 300, phase.stalled)
        except Stalled as exc:
            return Measurement(
                series=report_series(reports, cfg.percentile),
                stalled=str(exc),
                returncode=-1,
                errors=(str(exc),),
            )
        except BaseException:
            child.kill_tree()
            raise
        output = child.stderr  # stdout and stderr, merged and streamed
        write_file(out_path, output)
        return _measurement(parse_run(output), rc, reports, cfg, prepared, lost)


def _measurement(
    s: Summary,
    rc: int,
    reports: list[Report],
    cfg: SysbenchWorkload,
    prepared: bool,
    lost: str | None,
) -> Measurement:
    """What a sysbench run measured, from its final report and its per-second lines."""
    errors = error_lines(s.fatal)
    if rc != 0 and not errors:
        errors.append(f"sysbench exited {rc}")
    pct = histogram_percentiles(s.histogram)
    if "max" in s.latency_ms:
        pct["max"] = s.latency_ms["max"]
    from pgfsbench.collect.txlog import LatencyStats

    latency = (
        LatencyStats(s.transactions or 0, s.ignored_errors or 0, 1.0, 0.0, pct) if pct else None
    )
    return Measurement(
        unit="tps",
        throughput=s.tps,
        latency_avg_ms=s.latency_ms.get("avg"),
        transactions=s.transactions,
        failed_transactions=s.ignored_errors,
        latency=latency,
        series=report_series(reports, cfg.percentile),
        errors=tuple(errors),
        returncode=rc,
        extra={
            k: v
            for k, v in (
                ("qps", s.qps),
                ("queries", s.queries),
                ("reads", s.reads),
                ("writes", s.writes),
                ("reconnects", s.reconnects),
                ("ignored_errors", s.ignored_errors),
                ("prepared_statements", prepared),
                (
                    "prepared_statements_disabled",  # by us, not the spec
                    None if "db-ps-mode" in cfg.options else lost,
                ),
            )
            if v is not None
        },
    )


def report_series(reports: list[Report], percentile: int) -> dict[str, tuple[float, list[object]]]:
    """Per-second series with pgbench's names where they mean the same thing."""
    if not reports:
        return {}
    t0 = reports[0].t
    return {
        "tps": (t0, [r.tps for r in reports]),
        "qps": (t0, [r.qps for r in reports]),
        f"lat_p{percentile}_ms": (t0, [r.latency_ms for r in reports]),
        "errors_per_s": (t0, [r.errors_per_s for r in reports]),
        "reconnects_per_s": (t0, [r.reconnects_per_s for r in reports]),
    }


def for_cell(cell: Cell, defaults: Defaults) -> Sysbench:
    return Sysbench()
