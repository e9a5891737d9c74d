"""A hand-made PostgreSQL server for the benches that drive raw pgbench (no pgfsbench in
the loop): its data on a tmpfs it mounts, a private unix socket, pgbench tables loaded.
Everything is stopped and unmounted on the way out. Needs root."""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def as_postgres(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=check,
                          capture_output=True, text=True)


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
        return ["runuser", "-u", "postgres", "--", str(self.bindir / "pgbench"), "-h",
                str(self.sock), *args, "postgres"]


@contextmanager
def raw_server(work: Path, bindir: Path, scale: int = 10) -> Iterator[RawServer]:
    mnt, sock, logdir = work / "mnt", work / "sock", work / "log"
    for d in (mnt, sock, logdir):
        d.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2G", "tmpfs", str(mnt)], check=True)
    data = mnt / "data"
    try:
        for d in (mnt, sock, logdir):
            subprocess.run(["chown", "postgres", str(d)], check=True)
        as_postgres(str(bindir / "initdb"), "-D", str(data), "-A", "trust")
        as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(logdir / "server.log"),
                    "-o", f"-c listen_addresses='' -c unix_socket_directories={sock} "
                    "-c shared_buffers=1GB", "-w", "start")
        try:
            as_postgres(str(bindir / "pgbench"), "-h", str(sock), "-i", "-s", str(scale),
                        "-q", "postgres")
            as_postgres("mkdir", str(mnt / "log"))
            yield RawServer(bindir, sock, logdir, mnt / "log")
        finally:
            as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop",
                        check=False)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def is_rate(text: str) -> bool:
    """A pgbench --sampling-rate: a number in (0, 1]."""
    try:
        return 0 < float(text) <= 1
    except ValueError:
        return False


def measure_in_workdir(prefix: str, measure: Callable[[Path], dict[str, Any]],
                       save: Path | None, header: dict[str, Any]) -> None:
    """``measure`` in a work directory of its own under /var/tmp (removed after), its
    result saved with ``header`` as JSON to ``save`` when given."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        result = measure(work)
    if save:
        save.write_text(json.dumps({**header, "arms": result}, indent=1) + "\n")
        print(f"saved to {save}")
