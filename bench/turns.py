"""Two pgbench processes on one hand-made server taking turns: the design that cancels this
host's swings (±10% from one second to the next), shared by the benches that compare two
arms of the same workload.

Each process runs select-only with prepared statements on a database of its own (the
same scale) and is stopped (SIGSTOP) while the other runs, in slots of a fraction of a
second in ABBA order. Each one's transactions are the server's own count of its
database's commits (`pg_stat_database.xact_commit`, read once the backends have flushed
their statistics), so the two had the same running time, in slots a fraction of a second
apart. A lane may have riders: processes that run only while its pgbench runs (the
observer of `observer_turns.py`).
"""

from __future__ import annotations

import argparse
import math
import signal
import statistics
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from rawserver import RawServer, as_postgres

from pgfsbench.analysis.observer import geometric_ci

DATABASES = ("a", "b")


def make_databases(server: RawServer, scale: int = 10) -> None:
    """The two databases of the turns, pgbench's tables loaded in each."""
    for db in DATABASES:
        as_postgres(str(server.bindir / "createdb"), "-h", str(server.sock), db)
        as_postgres(
            str(server.bindir / "pgbench"), "-h", str(server.sock), "-i", "-s", str(scale), "-q", db
        )


def commits(server: RawServer) -> dict[str, int]:
    out = as_postgres(
        str(server.bindir / "psql"),
        "-h",
        str(server.sock),
        "-XAt",
        "-c",
        "SELECT datname, xact_commit FROM pg_stat_database WHERE datname IN ('a', 'b')",
        "postgres",
    ).stdout
    return {name: int(n) for name, n in (line.split("|") for line in out.split())}


def start_pgbench(server: RawServer, db: str, extra: Sequence[str] = ()) -> subprocess.Popen[bytes]:
    """pgbench as the postgres user (its own process: the one to stop and continue),
    select-only, prepared, 2 clients, running until killed."""
    return subprocess.Popen(
        [
            str(server.bindir / "pgbench"),
            "-h",
            str(server.sock),
            "-S",
            "-M",
            "prepared",
            "-c2",
            "-j2",
            "-n",
            "-T3600",
            *extra,
            db,
        ],
        user="postgres",
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class Process(Protocol):
    """What a lane does with its pgbench: a Popen, or pgbench as pgfsbench drives it."""

    def send_signal(self, sig: int, /) -> None: ...

    def kill(self) -> None: ...

    def wait(self, timeout: float | None = None) -> int: ...


@dataclass
class Lane:
    pgbench: Process
    db: str
    riders: Sequence[subprocess.Popen[str]] = ()  # run only while this lane's pgbench runs
    running_s: float = field(default=0.0, init=False)  # its pgbench's running time, counted

    def signal(self, sig: signal.Signals) -> None:
        self.pgbench.send_signal(sig)
        for rider in self.riders:
            rider.send_signal(sig)


def take_turns(
    server: RawServer,
    lanes: tuple[Lane, Lane],
    first: int,
    seconds: float,
    slot: float,
    on_stopped: Callable[[], None] | None = None,
) -> tuple[int, int]:
    """The two lanes' transactions (commits of their databases) in turns of ``slot``
    seconds for ``seconds`` in all, ABBA from lane ``first``. ``on_stopped`` is called
    once everything is stopped, just before the turns begin. The lanes' pgbench processes
    are killed at the end; their riders are left stopped, for the caller to finish."""
    try:
        time.sleep(1.0)  # both connected
        for lane in lanes:
            lane.signal(signal.SIGSTOP)
        time.sleep(1.5)  # idle backends flush their statistics within a second
        before = commits(server)
        if on_stopped is not None:
            on_stopped()
        a, b = lanes if first == 0 else lanes[::-1]
        order = (a, b, b, a)
        running: Lane | None = None
        t0 = since = time.monotonic()
        for k in range(max(4, round(seconds / slot / 4) * 4)):
            who = order[k % 4]
            if who is not running:
                now = time.monotonic()
                if running is not None:
                    running.signal(signal.SIGSTOP)
                    running.running_s += now - since
                who.signal(signal.SIGCONT)
                running, since = who, now
            time.sleep(max(0.0, t0 + (k + 1) * slot - time.monotonic()))
        if running is not None:
            running.signal(signal.SIGSTOP)
            running.running_s += time.monotonic() - since
    finally:
        for lane in lanes:
            lane.pgbench.kill()  # stopped or not
            lane.pgbench.wait()
    time.sleep(0.5)  # backends flush their statistics as they exit
    after = commits(server)
    return (after[lanes[0].db] - before[lanes[0].db], after[lanes[1].db] - before[lanes[1].db])


def clear_logs(directory: Path) -> None:
    for old in directory.glob("tx.*"):
        old.unlink()


def arm_summary(label: str, counts: list[tuple[int, int]]) -> dict[str, object]:
    """An arm's repetitions (transactions of the arm's lane, of the other lane): the
    geometric mean of their ratios with its 95% CI and the SD of the log ratios, printed
    on one line and returned."""
    ratios = [x / y for x, y in counts]
    ratio, low, high = geometric_ci(ratios)
    sd = statistics.stdev(math.log(r) for r in ratios) if len(ratios) > 1 else math.nan
    print(
        f"{label:<30} with / without {ratio:.4f} "
        f"[{low or math.nan:.4f}, {high or math.nan:.4f}], SD of the log ratios "
        f"{sd:.4f}, {len(ratios)} repetitions"
    )
    return {"ratio": ratio, "ci": [low, high], "sd_log": sd, "counts": counts}


def turns_parser(
    doc: str, reps: int, slot: float, arms: str, arms_help: str | None = None
) -> argparse.ArgumentParser:
    """The arguments every turns bench takes, with its own defaults."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--reps", type=int, default=reps)
    parser.add_argument(
        "--seconds",
        type=float,
        default=20.0,
        help="turns per repetition, in seconds (each process runs half)",
    )
    parser.add_argument("--slot", type=float, default=slot, help="seconds per turn")
    parser.add_argument("--arms", default=arms, help=arms_help)
    parser.add_argument("--bindir", default="/usr/lib/postgresql/15/bin")
    parser.add_argument("--save", type=Path, help="write the arms' figures to this JSON file")
    return parser


def print_repetition(rep: int, counts: dict[str, list[tuple[int, int]]], seconds: float) -> None:
    """One line per repetition: each arm's ratio, and the throughput of the turns."""
    arms = list(counts)
    print(
        f"repetition {rep + 1}: "
        + ", ".join(f"{a} {counts[a][-1][0] / counts[a][-1][1]:.4f}" for a in arms)
        + f" ({sum(counts[arms[0]][-1]) / seconds:,.0f} TPS)",
        flush=True,
    )
