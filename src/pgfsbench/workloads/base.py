"""What a workload is to the engine: it loads data, runs for N seconds while reporting
progress, and returns a typed Measurement. The engine knows nothing of pgbench or sysbench.

A workload runs as the PostgreSQL OS user (never as root), in a per-run scratch directory
that user owns; its raw outputs are kept as artifacts of the run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from pgfsbench.postgres.binaries import Binaries
from pgfsbench.postgres.instance import WORKLOAD_APPLICATION
from pgfsbench.spec import Cell
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner

if TYPE_CHECKING:
    from pgfsbench.collect.txlog import LatencyStats
    from pgfsbench.postgres.template import Templates

Series = dict[str, tuple[float, list[Any]]]  # name -> (t0, one value per second)

# the workload's tools connect under its name (PGAPPNAME), as its own connections do
WORKLOAD_ENV = {"PGAPPNAME": WORKLOAD_APPLICATION}


@dataclass(frozen=True)
class Endpoint:
    """Where a client connects: a private unix socket directory, a port, a user, a database."""

    host: str
    port: int
    user: str
    dbname: str

    def libpq_args(self) -> list[str]:
        return ["-h", self.host, "-p", str(self.port), "-U", self.user]

    def conninfo(self) -> str:
        return (
            f"host={self.host} port={self.port} user={self.user} dbname={self.dbname} "
            f"application_name='{WORKLOAD_APPLICATION}'"
        )


@dataclass(frozen=True)
class Progress:
    """One progress report of a running workload (about once a second)."""

    t: float  # seconds since the start of this phase
    throughput: float  # in the workload's unit (transactions per second for OLTP)
    latency_ms: float | None = None
    extra: dict[str, float | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Phase:
    """One call of `Workload.run`: how long, whether it is the measured phase (a warm-up
    is not), where its progress goes, and the watchdog that says the tool stalled."""

    seconds: float
    measured: bool
    on_progress: ProgressCallback
    stalled: StallCheck


@dataclass
class WorkloadContext:
    """What a workload may use: the runner, the journal (to watch the children it starts),
    the binaries, where to connect, and its directories."""

    runner: Runner
    journal: Journal
    binaries: Binaries
    endpoint: Endpoint  # what the clients connect to (PostgreSQL, or a pooler in front)
    server: Endpoint  # PostgreSQL itself
    workdir: Path  # scratch directory of this run, owned by os_user
    artifacts: Path  # kept with the run
    os_user: str | None  # the benchmark's OS user (None: the current, non-root user)
    base_dir: Path  # the spec file's directory (relative script paths)
    # why server-side prepared statements do not survive the endpoint (a transaction
    # pooler), None when they do
    prepared_statements_lost: str | None = None


@dataclass(frozen=True)
class LoadResult:
    seconds: float
    phases: dict[str, float]
    output: str = ""


@dataclass
class Measurement:
    """What one phase of a workload measured."""

    unit: str = "tps"
    throughput: float | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    transactions: int | None = None
    failed_transactions: int | None = None
    initial_connection_ms: float | None = None
    latency: LatencyStats | None = None  # percentiles per run and per second
    series: Series = field(default_factory=dict)  # from the tool's own progress reports
    errors: tuple[str, ...] = ()  # what the tool said went wrong (empty when all went well)
    returncode: int = 0
    stalled: str | None = None  # why the engine's watchdog ended it (no progress)
    extra: dict[str, object] = field(default_factory=dict)
    artifacts: dict[str, Path] = field(default_factory=dict)  # kind -> file, kept with the run

    @property
    def ok(self) -> bool:
        return (
            self.returncode == 0
            and self.throughput is not None
            and not self.errors
            and self.stalled is None
        )

    def failure(self, tool: str) -> str:
        """Why the phase failed, in one line: the tool's last error, with the server's own
        words when an earlier line carried them ("could not create connection for client
        13" says nothing without "FATAL:  sorry, too many clients already")."""
        return failure_text(self.errors, f"{tool} exited {self.returncode}")


_SERVER_WORDS = re.compile(r"\b(FATAL|PANIC|ERROR):\s+(.*)$")


def failure_text(errors: Sequence[str], otherwise: str) -> str:
    """The last error of a tool, with the last server message before it if it has none."""
    if not errors:
        return otherwise
    last = errors[-1]
    if _SERVER_WORDS.search(last):
        return last
    for earlier in reversed(errors[:-1]):
        if m := _SERVER_WORDS.search(earlier):
            return f"{last} ({m.group(1)}: {' '.join(m.group(2).split())})"
    return last


ProgressCallback = Callable[[Progress], None]
StallCheck = Callable[[], str | None]


class Workload(Protocol):
    """A load generator driven through its real tool."""

    @property
    def tool(self) -> str:
        """The tool's name (pgbench, sysbench...)."""

    def problems(self, cell: Cell, base_dir: Path, os_user: str | None) -> list[str]:
        """What makes this cell impossible here (missing script, unreadable file...)."""

    def estimated_bytes(self, cell: Cell) -> int:
        """Roughly how much disk the loaded data takes (for plan's size checks)."""

    def version_argv(self, binaries: Binaries) -> list[str]:
        """The command that prints the tool's version, for the run's record ([]: none)."""

    def load(self, ctx: WorkloadContext, cell: Cell) -> LoadResult:
        """Create and fill the tables (timed, by phase)."""

    def run(self, ctx: WorkloadContext, cell: Cell, phase: Phase) -> Measurement:
        """Run for ``phase.seconds``; report progress; end the tool when
        ``phase.stalled`` says why."""


@runtime_checkable
class DataTemplated(Protocol):
    """A workload that brings its own data (a capture's physical copy): the engine copies
    the template it names instead of running initdb, and loads nothing."""

    def data_template(
        self,
        cell: Cell,
        *,
        runner: Runner,
        journal: Journal,
        binaries: Binaries,
        templates: Templates,
        os_user: str | None,
        scratch: Path,
        socket_dir: Path,
        log_path: Path,
        base_dir: Path,
    ) -> str:
        """The key of the data template in ``templates`` (made once, then found)."""

    def templates_root(self, cell: Cell, base_dir: Path) -> Path:
        """Where its data templates are kept: with the data they come from (a capture's
        own directory), never in the work directory with the initdb templates."""
