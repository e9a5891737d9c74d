#!/usr/bin/env python3
"""What a wire capture's relay costs the clients that connect through it: pgbench against
a server of its own, directly and through pgfsbench-wirecap (recording, as `capture
--wire` runs it), alternated, REPS times each, at pgbench's own rates: select-only (the
cheapest statements, where a relay's cost shows most) and simple-update. Prints and saves
each side's TPS and mean latency with their 95% intervals, the latency the relay adds to
a statement, and the relay's bytes recorded a statement.

    .venv/bin/python bench/wire_overhead.py [--seconds 10] [--reps 5] [--clients 4]
        [--save bench/results/wire-overhead-DATE.json]

Root; about 4 minutes at the defaults. Nothing else should run.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pgfsbench.analysis.stats import estimate  # noqa: E402
from pgfsbench.postgres.binaries import find_binaries  # noqa: E402
from pgfsbench.workloads.capture_wire import wirecap_path  # noqa: E402

PG_USER = "postgres"
PORT, RELAY = 5994, 6594


def sh(*argv: str, user: str | None = PG_USER, timeout: float = 600) -> str:
    cmd = ["runuser", "-u", user, "--", *argv] if user else list(argv)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout).stdout


def pgbench(where: list[str], seconds: int, clients: int, script: str) -> tuple[float, float]:
    out = sh(
        str(find_binaries().bindir / "pgbench"), *where, "-M", "prepared", "-b", script,
        "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(seconds), "-n", "postgres",
    )  # fmt: skip
    tps = float(re.search(r"tps = ([\d.]+)", out).group(1))  # type: ignore[union-attr]
    lat = float(re.search(r"latency average = ([\d.]+) ms", out).group(1))  # type: ignore[union-attr]
    return tps, lat


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--save", type=Path)
    a = p.parse_args()
    relay = wirecap_path()
    if relay is None:
        raise SystemExit("pgfsbench-wirecap is not built (scripts/bootstrap.sh)")
    bindir = find_binaries().bindir
    base = Path(tempfile.mkdtemp(prefix="pgfsb-wire-", dir="/var/tmp"))
    base.chmod(0o755)
    pgdata, sock, logs = base / "src", base / "sock", base / "log"
    for d in (pgdata, sock, logs):
        d.mkdir()
        shutil.chown(d, PG_USER, PG_USER)
    sh(str(bindir / "initdb"), "-D", str(pgdata), "--auth=trust")
    with (pgdata / "postgresql.conf").open("a") as f:
        f.write(f"listen_addresses = ''\nunix_socket_directories = '{sock}'\nport = {PORT}\n")
    sh(str(bindir / "pg_ctl"), "-D", str(pgdata), "-w", "-l", str(logs / "server.log"), "start")
    result: dict[str, Any] = {"seconds": a.seconds, "reps": a.reps, "clients": a.clients}
    try:
        sh(str(bindir / "pgbench"), "-h", str(sock), "-p", str(PORT), "-i", "-s", "10", "-q",
           "postgres")  # fmt: skip
        for script in ("select-only", "simple-update"):
            sides: dict[str, dict[str, list[float]]] = {
                "direct": {"tps": [], "lat": []},
                "relay": {"tps": [], "lat": []},
            }
            recorded: list[float] = []
            for _ in range(a.reps):
                for side in ("direct", "relay"):
                    if side == "direct":
                        tps, lat = pgbench(["-h", str(sock), "-p", str(PORT)], a.seconds,
                                           a.clients, script)  # fmt: skip
                    else:
                        out = base / f"wire-{time.time_ns()}.jsonl"
                        with open(out, "wb") as fh:
                            proc = subprocess.Popen(
                                [str(relay), "-listen", f"127.0.0.1:{RELAY}", "-upstream-host",
                                 str(sock), "-upstream-port", str(PORT)],
                                stdout=fh, stderr=subprocess.DEVNULL,
                            )  # fmt: skip
                        time.sleep(0.3)
                        try:
                            tps, lat = pgbench(["-h", "127.0.0.1", "-p", str(RELAY)], a.seconds,
                                               a.clients, script)  # fmt: skip
                        finally:
                            proc.send_signal(signal.SIGTERM)
                            proc.wait(timeout=30)
                        statements = tps * a.seconds * (1 if script == "select-only" else 5)
                        recorded.append(out.stat().st_size / max(statements, 1))
                        out.unlink()
                    sides[side]["tps"].append(tps)
                    sides[side]["lat"].append(lat)
            row: dict[str, Any] = {}
            for side, v in sides.items():
                t, lt = estimate(v["tps"]), estimate(v["lat"])
                row[side] = {
                    "tps": v["tps"],
                    "tps_mean": round(t.mean, 1) if t else None,
                    "tps_ci95": [round(t.ci_low, 1), round(t.ci_high, 1)]
                    if t and t.ci_low is not None and t.ci_high is not None
                    else None,
                    "latency_ms_mean": round(lt.mean, 4) if lt else None,
                }
            added = [
                r - d for r, d in zip(sides["relay"]["lat"], sides["direct"]["lat"], strict=True)
            ]
            e = estimate(added)
            row["latency_added_ms"] = {
                "mean": round(statistics.fmean(added), 4),
                "ci95": [round(e.ci_low, 4), round(e.ci_high, 4)]
                if e and e.ci_low is not None and e.ci_high is not None
                else None,
                "per_statement_us": round(
                    statistics.fmean(added) * 1000 / (1 if script == "select-only" else 5), 1
                ),
            }
            row["bytes_recorded_per_statement"] = round(statistics.fmean(recorded), 1)
            result[script] = row
            print(json.dumps({script: row}, indent=1), flush=True)
        result["host_cpus"] = len(os.sched_getaffinity(0))
        if a.save:
            a.save.write_text(json.dumps(result, indent=1) + "\n")
    finally:
        sh(str(bindir / "pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop")
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
