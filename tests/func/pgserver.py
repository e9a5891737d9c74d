"""A PostgreSQL server of a test's own: initdb as the `postgres` OS user in a directory the
test made, listening on a private unix socket only, stopped (and waited for) at the end."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.postgres.binaries import find_binaries

PG_USER = "postgres"


def as_postgres(*argv: str, timeout: float = 300) -> str:
    done = subprocess.run(
        ["runuser", "-u", PG_USER, "--", *argv],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(f"{argv[0]} exited {done.returncode}: {done.stderr}")
    return done.stdout


@dataclass(frozen=True)
class Server:
    pgdata: Path
    sock: Path
    port: int
    bindir: Path

    @property
    def dsn(self) -> str:
        return f"host={self.sock} port={self.port} user={PG_USER} dbname=postgres"

    def psql(self, sql: str, db: str = "postgres") -> str:
        return as_postgres(
            str(self.bindir / "psql"),
            "-h",
            str(self.sock),
            "-p",
            str(self.port),
            "-d",
            db,
            "-v",
            "ON_ERROR_STOP=1",
            "-Atqc",
            sql,
        ).strip()

    def pg_ctl(self, *args: str) -> None:
        as_postgres(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.pgdata),
            "-w",
            "-l",
            str(self.pgdata / "server.log"),
            *args,
        )


@contextlib.contextmanager
def private_server(
    base: Path,
    port: int,
    conf: str = "",
    hba: str = "",
    bindir: Path | None = None,
    name: str = "srv",
) -> Iterator[Server]:
    """A server in ``base``/``name`` on ``base``/``name``-sock, ``conf`` added to its
    postgresql.conf and ``hba`` before its pg_hba.conf's lines."""
    bindir = bindir or find_binaries().bindir
    pgdata, sock = base / name, base / f"{name}-sock"
    for d in (pgdata, sock):
        d.mkdir()
        shutil.chown(d, PG_USER, PG_USER)
    as_postgres(str(bindir / "initdb"), "-D", str(pgdata), "-U", PG_USER, "--auth=trust")
    with (pgdata / "postgresql.conf").open("a") as f:
        f.write(f"listen_addresses = ''\nunix_socket_directories = '{sock}'\nport = {port}\n{conf}")
    if hba:
        old = (pgdata / "pg_hba.conf").read_text()
        (pgdata / "pg_hba.conf").write_text(hba + old)
    server = Server(pgdata, sock, port, bindir)
    server.pg_ctl("start")
    try:
        yield server
    finally:
        server.pg_ctl("stop", "-m", "fast")
