"""pgbench: command lines for `pgbench -i` and runs, and parsers of what it prints (pure)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench.spec import Workload


@dataclass(frozen=True)
class Connection:
    host: str  # the private socket directory
    port: int
    user: str
    dbname: str

    def args(self) -> list[str]:
        return ["-h", self.host, "-p", str(self.port), "-U", self.user]


def init_steps(generation: str, foreign_keys: bool) -> str:
    """-I steps: drop, create, generate (g client-side / G server-side), vacuum, pkeys, fkeys."""
    steps = "dt" + ("G" if generation == "server" else "g") + "vp"
    return steps + ("f" if foreign_keys else "")


def init_argv(pgbench: str, conn: Connection, scale: int, generation: str,
              foreign_keys: bool) -> list[str]:
    return [pgbench, "-i", "-s", str(scale), "-I", init_steps(generation, foreign_keys),
            *conn.args(), conn.dbname]


def run_argv(pgbench: str, conn: Connection, workload: Workload, duration_s: float,
             *, base_dir: Path, progress: bool = True, vacuum: bool = True,
             log_prefix: Path | None = None, sampling_rate: float | None = None) -> list[str]:
    argv = [pgbench, *conn.args(), "-c", str(workload.clients), "-j", str(workload.threads),
            "-T", str(max(1, round(duration_s))), "-M", workload.protocol]
    if workload.builtin:
        argv += ["-b", workload.builtin]
    for script in workload.scripts:
        name, _, weight = script.partition("@")
        path = Path(name) if Path(name).is_absolute() else base_dir / name
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
    for key in ("transaction type", "scaling factor", "query mode", "number of clients",
                "number of threads", "maximum number of tries", "duration"):
        m = re.search(rf"^{key}: (.*)$", stdout, re.MULTILINE)
        if m:
            header[key] = m.group(1).strip()
    tps = _num(r"^tps = ([\d.]+) \((?:without initial connection time|excluding)", stdout)
    tx = _num(r"^number of transactions actually processed: (\d+)", stdout)
    failed = _num(r"^number of failed transactions: (\d+)", stdout)
    errors = tuple(line.strip() for line in stderr.splitlines()
                   if "pgbench: error" in line or "aborted" in line)
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

    return ProgressPoint(float(m.group(1)), float(m.group(2)), opt(m.group(3)), opt(m.group(4)),
                         int(m.group(5)) if m.group(5) is not None else None, opt(m.group(6)))
