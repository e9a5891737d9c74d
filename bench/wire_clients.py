#!/usr/bin/env python3
"""Each client nobody here wrote the replay for, captured at the wire on its own and
replayed as a cell (fast, on ext4): the reconciliation of its statements, every statement
that did otherwise than in the capture (calls, errors with their SQLSTATEs, rows), and the
end state against the capture's, table by table. The clients (tests/func/wire_clients.py):
a psycopg 3 application, pgbench simple, extended and prepared, psql scripts, a JDBC-like
client, sysbench's oltp_read_write.

    .venv/bin/python bench/wire_clients.py [--save bench/results/wire-clients-DATE.json]

Root; about 5 minutes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests.func.pgserver import private_server  # noqa: E402
from tests.func.wire_clients import CLIENTS, prepare  # noqa: E402

PORT, RELAY = 5989, 6589


def pgfsbench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgfsbench", *args], cwd=ROOT, capture_output=True, text=True,
        timeout=1800, check=False,
    )  # fmt: skip


def one(base: Path, srv: Any, name: str, mode: str) -> dict[str, Any]:
    capture = base / f"capture-{name}"
    how = ["--wire", "--listen", f"127.0.0.1:{RELAY}"] if mode == "wire" else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgfsbench", "capture", *how, "--dsn", srv.dsn,
         "--seconds", "10m", "-o", str(capture), "--workdir", str(base / "work")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if "capturing" not in first:
        raise SystemExit(first + proc.stdout.read())
    try:
        # a log capture: the clients connect to the server itself (its TCP port)
        CLIENTS[name](base, RELAY if mode == "wire" else PORT)
    finally:
        proc.send_signal(signal.SIGINT)
    out = proc.stdout.read()
    if proc.wait(timeout=300) != 0:
        raise SystemExit(out)
    spec = base / f"replay-{name}.toml"
    spec.write_text(
        '[defaults]\nrepetitions = 1\nwarmup = "0s"\n[storage.ext4]\nfs = "ext4"\n'
        f'device = "loop:1G"\n[workload.w]\ntool = "replay"\ncapture = "{capture}"\n'
        'mode = "fast"\n'
    )
    results = base / f"r-{name}.sqlite"
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    runs = json.loads(pgfsbench("results", "list", "-r", str(results), "--json").stdout)
    run = runs[0]
    shown = json.loads(
        pgfsbench("results", "show", str(run["run_id"]), "-r", str(results), "--json").stdout
    )
    f = shown["metrics"]["tool"].get("fidelity") or {}
    manifest = json.loads((capture / "manifest.json").read_text())
    return {
        "status": run["status"],
        "error": run.get("error"),
        "captured_sessions": manifest["log"].get("sessions"),
        "cannot_carry": f.get("cannot_carry"),
        "reconciliation": f.get("reconciliation"),
        "statements_differ": f.get("statements_differ"),
        "differing": [s for s in f.get("statements") or [] if s.get("differs")],
        "errors": [f.get("errors_captured"), f.get("errors_replayed")],
        "end_state": f.get("end_state"),
        "differs": f.get("differs"),
        "replay": {
            k: shown["metrics"]["tool"].get("replay", {}).get(k)
            for k in ("sessions", "wall_s", "captured_s", "statements", "transactions")
        },
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--save", type=Path)
    p.add_argument(
        "--mode",
        choices=("wire", "log"),
        default="wire",
        help="capture at the wire, or from the server's log (as before the wire capture)",
    )
    a = p.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pgfsb-clients-", dir="/var/tmp"))
    base.chmod(0o755)
    result: dict[str, Any] = {"mode": a.mode}
    try:
        hba = "local all all trust\nlocal replication all trust\nhost all all 127.0.0.1/32 trust\n"
        conf = "max_wal_senders = 4\n" + (
            "listen_addresses = '127.0.0.1'\nlogging_collector = on\nlog_directory = 'log'\n"
            if a.mode == "log"
            else ""
        )
        with private_server(base, PORT, hba=hba, conf=conf) as srv:
            prepare(srv, base)
            for name in CLIENTS:
                if name == "sysbench" and not shutil.which("sysbench"):
                    continue
                result[name] = one(base, srv, name, a.mode)
                print(json.dumps({name: result[name]}, indent=1, default=str), flush=True)
        if a.save:
            a.save.write_text(json.dumps(result, indent=1, default=str) + "\n")
    finally:
        pgfsbench("cleanup", "--workdir", str(base / "work"))
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
