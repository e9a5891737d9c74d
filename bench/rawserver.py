"""A hand-made PostgreSQL server for the benches that drive raw pgbench (no pgfsbench in
the loop): its data on a tmpfs it mounts, a private unix socket, pgbench tables loaded.
Everything is stopped and unmounted on the way out. Needs root."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


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
