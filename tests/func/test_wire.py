"""Capture at the wire with clients nobody here wrote the replay for: a psycopg 3
application (typed and binary parameters, jsonb, bytea, arrays, timestamptz, savepoints,
a named cursor, advisory locks, NOTIFY, a temporary table, a sequence, COPY FROM STDIN, a
unique violation on purpose, start-up options, prepared statements, DEALLOCATE ALL and
DISCARD ALL), pgbench (simple, extended, prepared), psql (\\copy, a DO block, \\gset and
\\gexec), a JDBC-like client (typed setters, a portal read in pieces, statements closed and
prepared again by name) and sysbench's OLTP script; then replayed as a cell: every
statement as it came, fidelity per statement, and the end state against the capture's."""

from __future__ import annotations

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
from tests.func.pgserver import private_server
from tests.func.wire_clients import CLIENTS, prepare

pytestmark = pytest.mark.skipif(
    replayer_path() is None or wirecap_path() is None, reason="the Go binaries are not built"
)
PORT = 5991
RELAY = 6591


def test_clients_captured_at_the_wire_and_replayed_as_they_spoke(base: Path) -> None:
    hba = "local all all trust\nlocal replication all trust\n"
    with private_server(base, PORT, hba=hba, conf="max_wal_senders = 4\n") as srv:
        prepare(srv, base)
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
            for name, client in CLIENTS.items():
                if name != "sysbench" or shutil.which("sysbench"):
                    client(base, RELAY)
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
