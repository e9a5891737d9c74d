"""Capture at the wire with clients nobody here wrote the replay for: a psycopg 3
application (typed and binary parameters, jsonb, bytea, arrays, timestamptz, savepoints,
a named cursor, advisory locks, NOTIFY, a temporary table, a sequence, COPY FROM STDIN, a
unique violation on purpose, start-up options, prepared statements, DEALLOCATE ALL and
DISCARD ALL), pgbench (simple, extended, prepared), psql (\\copy, a DO block, \\gset and
\\gexec), a JDBC-like client (typed setters, a portal read in pieces, statements closed and
prepared again by name) and sysbench's OLTP script; then replayed as a cell: every
statement as it came, fidelity per statement, and the end state against the capture's."""

from __future__ import annotations

import datetime
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pgfsbench.workloads.capture_wire import wirecap_path
from pgfsbench.workloads.replay import replayer_path
from tests.func.conftest import ROOT, pgfsbench, runs_of
from tests.func.pgserver import PG_USER, as_postgres, private_server

pytestmark = pytest.mark.skipif(
    replayer_path() is None or wirecap_path() is None, reason="the Go binaries are not built"
)
PORT = 5991
RELAY = 6591


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


def test_clients_captured_at_the_wire_and_replayed_as_they_spoke(base: Path) -> None:
    hba = "local all all trust\nlocal replication all trust\n"
    with private_server(base, PORT, hba=hba, conf="max_wal_senders = 4\n") as srv:
        srv.psql(
            "CREATE SCHEMA app; CREATE SEQUENCE app.seq START 1000; "
            "CREATE TABLE app.items (id int PRIMARY KEY, doc jsonb, blob bytea, tags text[], "
            "at timestamptz, n int DEFAULT 0); "
            "CREATE TABLE app.copied (id int, name text); CREATE TABLE plain (id int)"
        )
        bindir = find_bindir()
        as_postgres(
            str(bindir / "pgbench"), "-h", str(srv.sock), "-p", str(PORT), "-i", "-s", "1",
            "-q", "postgres",
        )  # fmt: skip
        sysbench = shutil.which("sysbench")
        sb = [
            "--db-driver=pgsql", f"--pgsql-user={PG_USER}",
            "--pgsql-db=postgres", "--tables=1", "--table-size=1000", "--threads=1",
        ]  # fmt: skip
        if sysbench:
            as_postgres(sysbench, *sb, f"--pgsql-host={srv.sock}", f"--pgsql-port={PORT}",
                        "oltp_read_write", "prepare")  # fmt: skip
        jdbclike = base / "jdbclike"
        subprocess.run(
            ["/usr/local/go/bin/go", "build", "-o", str(jdbclike), "./jdbclike"],
            cwd=ROOT / "native" / "replayer",
            check=True,
            capture_output=True,
            timeout=300,
        )
        capture = base / "capture"
        proc = subprocess.Popen(
            [sys.executable, "-m", "pgfsbench", "capture", "--wire", "--listen",
             f"127.0.0.1:{RELAY}", "--dsn", srv.dsn, "--seconds", "5m", "-o", str(capture),
             "--workdir", str(base / "work")],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert f"127.0.0.1:{RELAY}" in first, first + proc.stdout.read()
        try:
            app(RELAY)
            via = ["-h", "127.0.0.1", "-p", str(RELAY)]
            for mode in ("simple", "extended", "prepared"):
                as_postgres(
                    str(bindir / "pgbench"), *via, "-M", mode, "-c", "2", "-t", "30",
                    "-n", "postgres",
                )  # fmt: skip
            script = base / "script.sql"
            script.write_text(
                "\\copy plain FROM stdin\n1\n2\n3\n\\.\n"
                "DO $$ BEGIN INSERT INTO plain VALUES (10); END $$;\n"
                "SELECT max(id) AS top FROM plain \\gset\n"
                "SELECT 'INSERT INTO plain VALUES (' || :top || ' + 1)' \\gexec\n"
            )
            script.chmod(0o644)
            as_postgres(
                str(bindir / "psql"), *via, "-d", "postgres", "-v", "ON_ERROR_STOP=1",
                "-f", str(script),
            )  # fmt: skip
            as_postgres(str(jdbclike), "-host", "127.0.0.1", "-port", str(RELAY), "-n", "15")
            if sysbench:
                as_postgres(sysbench, *sb, "--pgsql-host=127.0.0.1", f"--pgsql-port={RELAY}",
                            "--time=2", "--events=0", "oltp_read_write", "run")  # fmt: skip
        finally:
            proc.send_signal(signal.SIGINT)  # the capture ends sooner
        out = proc.stdout.read()
        assert proc.wait(timeout=120) == 0, out
        end_state = srv.psql("SELECT count(*), sum(n) FROM app.items")
    manifest = json.loads((capture / "manifest.json").read_text())
    assert manifest["format"] == "wire" and manifest["log"]["statements"] > 500, manifest["log"]
    assert manifest["end_state"]["postgres"]["tables"]["app.items"][0] == int(
        end_state.split("|")[0]
    )
    # nothing of the server was changed: no ALTER SYSTEM at all
    assert "settings_changed" not in manifest

    spec = base / "replay.toml"
    spec.write_text(
        '[defaults]\nrepetitions = 1\nwarmup = "0s"\n[storage.ext4]\nfs = "ext4"\n'
        f'device = "loop:1G"\n[workload.mine]\ntool = "replay"\ncapture = "{capture}"\n'
        'mode = "fast"\n'
    )
    results = base / "r.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    (run,) = runs_of(results)
    assert run["status"] == "ok", run
    shown: dict[str, Any] = json.loads(
        pgfsbench("results", "show", str(run["run_id"]), "--results", str(results), "--json").stdout
    )
    f = shown["metrics"]["tool"]["fidelity"]
    rec = f["reconciliation"]
    assert rec["balanced"] is True and rec["not_sent"] == 0, rec
    assert f["format"] == "wire" and f["cannot_carry"] == []
    # every statement did as in the capture: the typed parameters, the options, the
    # DEALLOCATE and DISCARD, the COPY, the unique violation
    differing = [s for s in f["statements"] if s["differs"]]
    assert f["statements_differ"] == 0, differing
    assert f["errors_replayed"] == f["errors_captured"] >= 1
    assert not any("42P18" in (s["sqlstates_replayed"] or {}) for s in f["statements"])
    # the COPY with its 50 rows: in the capture (its summary, in the capture's directory),
    # and alike in the replay (no statement differs: rows are compared too)
    (summary,) = [p for p in capture.glob("replay-*.json") if not p.name.endswith("safety.json")]
    queries = json.loads(summary.read_text())["queries"]
    (copy,) = [q for q in queries if q["query"].startswith("COPY copied")]
    assert copy["rows"] == 50 and copy["calls"] == 1
    # the end state: equal, but where a value is the time it ran (pgbench's history)
    es = f["end_state"]
    differs = {d["table"] for d in es["differs"]}
    assert differs <= {"postgres.public.pgbench_history"}, es
    assert es["tables_compared"] >= 6


def find_bindir() -> Path:
    from pgfsbench.postgres.binaries import find_binaries

    return find_binaries().bindir
