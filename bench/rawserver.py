"""A hand-made PostgreSQL server for the benches that drive raw pgbench (no pgfsbench in
the loop): its data on a tmpfs it mounts, a private unix socket, pgbench tables loaded.
Everything is stopped and unmounted on the way out, after Ctrl-C, SIGTERM or SIGHUP too.
Needs root."""

from __future__ import annotations

import json
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def as_postgres(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["runuser", "-u", "postgres", "--", *argv], check=check, capture_output=True, text=True
    )


@dataclass(frozen=True)
class RawServer:
    bindir: Path
    sock: Path
    logdir: Path  # owned by postgres: the server log, pgbench's transaction logs
    tmpfs_logdir: Path  # owned by postgres, on the server's tmpfs: logs kept off the disk

    @property
    def conninfo(self) -> str:
        return f"host={self.sock} dbname=postgres user=postgres"

    def pgbench(self, *args: str) -> list[str]:
        """argv of pgbench as the postgres user against this server."""
        return [
            "runuser",
            "-u",
            "postgres",
            "--",
            str(self.bindir / "pgbench"),
            "-h",
            str(self.sock),
            *args,
            "postgres",
        ]


@contextmanager
def signals_unwind() -> Iterator[None]:
    """SIGTERM and SIGHUP end the bench as Ctrl-C does, by unwinding, so every ``finally``
    runs (their default action kills the process and leaves the server running and its
    tmpfs mounted). The first one unwinds; later ones are ignored while the way out runs."""
    caught = (signal.SIGTERM, signal.SIGHUP)

    def unwind(signum: int, _frame: object) -> None:
        for s in caught:
            signal.signal(s, signal.SIG_IGN)
        raise SystemExit(f"stopped by signal {signal.Signals(signum).name}: undoing")

    old = {s: signal.signal(s, unwind) for s in caught}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextmanager
def raw_server(work: Path, bindir: Path, scale: int = 10) -> Iterator[RawServer]:
    with signals_unwind():
        yield from _raw_server(work, bindir, scale)


def _raw_server(work: Path, bindir: Path, scale: int) -> Iterator[RawServer]:
    mnt, sock, logdir = work / "mnt", work / "sock", work / "log"
    for d in (mnt, sock, logdir):
        d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2G", "tmpfs", str(mnt)], check=True)
    data = mnt / "data"
    try:
        for d in (mnt, sock, logdir):
            subprocess.run(["chown", "postgres", str(d)], check=True)
        as_postgres(str(bindir / "initdb"), "-D", str(data), "-A", "trust")
        as_postgres(
            str(bindir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(logdir / "server.log"),
            "-o",
            f"-c listen_addresses='' -c unix_socket_directories={sock} -c shared_buffers=1GB",
            "-w",
            "start",
        )
        try:
            as_postgres(
                str(bindir / "pgbench"), "-h", str(sock), "-i", "-s", str(scale), "-q", "postgres"
            )
            as_postgres("mkdir", str(mnt / "log"))
            yield RawServer(bindir, sock, logdir, mnt / "log")
        finally:
            as_postgres(
                str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop", check=False
            )
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def is_rate(text: str) -> bool:
    """A pgbench --sampling-rate: a number in (0, 1]."""
    try:
        return 0 < float(text) <= 1
    except ValueError:
        return False


def measure_in_workdir(
    prefix: str,
    measure: Callable[[Path], dict[str, Any]],
    save: Path | None,
    header: dict[str, Any],
) -> None:
    """``measure`` in a work directory of its own under /var/tmp (removed after), its
    result saved with ``header`` as JSON to ``save`` when given, with the commit measured
    and when."""
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    with tempfile.TemporaryDirectory(prefix=prefix, dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        result = measure(work)
    if save:
        save.write_text(
            json.dumps(
                {
                    **header,
                    "commit": measured_commit(),
                    "started": started,
                    "ended": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                    "arms": result,
                },
                indent=1,
            )
            + "\n"
        )
        print(f"saved to {save}")


def measured_commit() -> str | None:
    """The pgfsbench commit a bench measures (a dirty tree is marked)."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=here,
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")
