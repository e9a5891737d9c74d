"""Clients nobody here wrote the replay for, driven through a wire capture's relay (the
tests' and bench/wire_clients.py's): a psycopg 3 application, pgbench in its three
protocols, psql scripts, a JDBC-like client and sysbench's OLTP script. Each is given the
relay's port; the server was set up by ``prepare`` (as the postgres OS user)."""

from __future__ import annotations

import datetime
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tests.func.conftest import ROOT
from tests.func.pgserver import PG_USER, Server, as_postgres

SCHEMA = (
    "CREATE SCHEMA app; CREATE SEQUENCE app.seq START 1000; "
    "CREATE TABLE app.items (id int PRIMARY KEY, doc jsonb, blob bytea, tags text[], "
    "at timestamptz, n int DEFAULT 0); "
    "CREATE TABLE app.copied (id int, name text); CREATE TABLE plain (id int)"
)
SYSBENCH = [
    "--db-driver=pgsql", f"--pgsql-user={PG_USER}",
    "--pgsql-db=postgres", "--tables=1", "--table-size=1000", "--threads=1",
]  # fmt: skip


def bindir() -> Path:
    from pgfsbench.postgres.binaries import find_binaries

    return find_binaries().bindir


def prepare(srv: Server, base: Path) -> None:
    """The tables every client uses, made directly on the server."""
    srv.psql(SCHEMA)
    as_postgres(
        str(bindir() / "pgbench"), "-h", str(srv.sock), "-p", str(srv.port), "-i", "-s", "1",
        "-q", "postgres",
    )  # fmt: skip
    if shutil.which("sysbench"):
        as_postgres(shutil.which("sysbench") or "sysbench", *SYSBENCH,
                    f"--pgsql-host={srv.sock}", f"--pgsql-port={srv.port}",
                    "oltp_read_write", "prepare")  # fmt: skip
    subprocess.run(
        ["/usr/local/go/bin/go", "build", "-o", str(base / "jdbclike"), "./jdbclike"],
        cwd=ROOT / "native" / "replayer",
        check=True,
        capture_output=True,
        timeout=300,
    )


def app(port: int) -> None:
    """A psycopg 3 application, through the relay."""
    import psycopg
    from psycopg.types.json import Jsonb

    dsn = (
        f"host=127.0.0.1 port={port} user={PG_USER} dbname=postgres sslmode=disable "
        "options='-c search_path=app,public -c DateStyle=SQL,DMY'"
    )
    with psycopg.connect(dsn, autocommit=True) as conn, psycopg.connect(dsn) as other:
        other.execute("LISTEN ch")
        other.commit()
        at = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC)
        for i in range(30):
            # typed parameters where the server cannot guess a type: jsonb_build_object
            conn.execute(
                "INSERT INTO items (id, doc, blob, tags, at) VALUES "
                "(%s, jsonb_build_object('a', %s, 'b', %s), %b, %s, %s)",
                (i, i, i * 0.5, bytes([i, 0, 255]), ["x", str(i)], at),
            )
        conn.execute("UPDATE items SET doc = %s WHERE id = %s", (Jsonb({"k": [1, 2]}), 3))
        with conn.transaction():
            conn.execute("UPDATE items SET n = n + 1 WHERE id < 10")
            try:
                with conn.transaction():  # a savepoint, rolled back
                    conn.execute("INSERT INTO items (id) VALUES (1)")
            except psycopg.errors.UniqueViolation:
                pass
            conn.execute("SELECT pg_advisory_xact_lock(42)")
        with conn.transaction(), conn.cursor(name="c1") as named:  # a named cursor
            named.execute("SELECT id, doc FROM items ORDER BY id")
            while named.fetchmany(7):
                pass
        conn.execute("CREATE TEMP TABLE tt AS SELECT id FROM items WHERE id % 3 = 0")
        conn.execute("INSERT INTO items (id, n) SELECT nextval('seq'), count(*) FROM tt")
        with conn.cursor() as cur, cur.copy("COPY copied (id, name) FROM STDIN") as copy:
            for i in range(50):
                copy.write_row((i, f"name {i}"))
        conn.execute("NOTIFY ch, 'hello'")
        for i in range(5):  # prepared: parsed once under a name, executed by it
            conn.execute("SELECT count(*) FROM items WHERE id > %s", (i,), prepare=True)
        conn.execute("DEALLOCATE ALL")
        conn.execute("SELECT count(*) FROM items WHERE id > %s", (9,), prepare=True)
        conn.execute("DISCARD ALL")
        conn.execute("SET search_path = app, public")
        conn.execute("SELECT count(*) FROM items WHERE id > %s", (8,), prepare=True)


def pgbench(mode: str) -> Callable[[Path, int], None]:
    def run(base: Path, port: int) -> None:
        as_postgres(
            str(bindir() / "pgbench"), "-h", "127.0.0.1", "-p", str(port), "-M", mode,
            "-c", "2", "-t", "30", "-n", "postgres",
        )  # fmt: skip

    return run


def psql(base: Path, port: int) -> None:
    script = base / "script.sql"
    script.write_text(
        "\\copy plain FROM stdin\n1\n2\n3\n\\.\n"
        "DO $$ BEGIN INSERT INTO plain VALUES (10); END $$;\n"
        "SELECT max(id) AS top FROM plain \\gset\n"
        "SELECT 'INSERT INTO plain VALUES (' || :top || ' + 1)' \\gexec\n"
    )
    script.chmod(0o644)
    as_postgres(
        str(bindir() / "psql"), "-h", "127.0.0.1", "-p", str(port), "-d", "postgres",
        "-v", "ON_ERROR_STOP=1", "-f", str(script),
    )  # fmt: skip


def jdbclike(base: Path, port: int) -> None:
    as_postgres(str(base / "jdbclike"), "-host", "127.0.0.1", "-port", str(port), "-n", "15")


def sysbench(base: Path, port: int) -> None:
    as_postgres(shutil.which("sysbench") or "sysbench", *SYSBENCH, "--pgsql-host=127.0.0.1",
                f"--pgsql-port={port}", "--time=2", "--events=0", "oltp_read_write",
                "run")  # fmt: skip


def psycopg_app(base: Path, port: int) -> None:
    app(port)


CLIENTS: dict[str, Callable[[Path, int], None]] = {
    "psycopg": psycopg_app,
    "pgbench-simple": pgbench("simple"),
    "pgbench-extended": pgbench("extended"),
    "pgbench-prepared": pgbench("prepared"),
    "psql": psql,
    "jdbclike": jdbclike,
    "sysbench": sysbench,
}
