#!/usr/bin/env python3
"""How faithful `tool = "replay"` is, against the workload it replays (issue 65's
acceptance, at a size this VM runs in minutes):

1. a server of its own (PostgreSQL 15 on the root disk, logging collector on), loaded by
   `pgbench -i -s SCALE`;
2. two captures by `pgfsbench capture`: pgbench simple-update with prepared statements,
   then tpcb-like (simple protocol; hot branch rows, where pgreplay hung), each for
   SECONDS with 4 clients;
3. one campaign per capture, ext4 and btrfs on loop devices, each cell twice: the capture
   replayed as fast as possible (`mode = "fast"`) and native pgbench with the same script,
   protocol and clients for as long as the replay took, both from a cold cache (each
   server restarted and the page cache dropped before its measured phase); REPS
   repetitions, interleaved.
   (The replay's copy does not carry the captured server's shared_preload_libraries;
   the native cells run without them too.)

It prints and saves: per capture, the replay's throughput against native pgbench's on
ext4 (ratio), the btrfs/ext4 ratio of each with its verdict, the fidelity (statements,
errors, WAL against the capture's), and the replayer's own CPU per transaction.

    .venv/bin/python bench/replay_fidelity.py [--seconds 20] [--scale 10] [--reps 3]
        [--save bench/results/replay-fidelity-DATE.json]

Root; minutes (about 12 at the defaults on a 2-vCPU VM). Nothing else should run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from pgfsbench.postgres.binaries import find_binaries  # noqa: E402

PG_USER = "postgres"
PORT = 5995


def sh(*argv: str, user: str | None = None, timeout: float = 3600) -> str:
    cmd = ["runuser", "-u", user, "--", *argv] if user else list(argv)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=timeout).stdout


def pgfsbench(*args: str, timeout: float = 7200) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "pgfsbench", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode not in (0, 6):
        raise SystemExit(
            f"pgfsbench {' '.join(args)}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        )
    return done


def capture(base: Path, sock: Path, name: str, pgbench_args: list[str], seconds: int) -> Path:
    bindir = find_binaries().bindir
    out = base / name
    dsn = f"host={sock} port={PORT} user={PG_USER} dbname=postgres"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "capture",
            "--dsn",
            dsn,
            "--seconds",
            str(seconds + 4),
            "-o",
            str(out),
            "--workdir",
            str(base / "work"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if "capturing" not in first:
        raise SystemExit(first + proc.stdout.read())
    sh(
        str(bindir / "pgbench"),
        "-h",
        str(sock),
        "-p",
        str(PORT),
        "-c",
        "4",
        "-j",
        "2",
        "-T",
        str(seconds),
        *pgbench_args,
        "postgres",
        user=PG_USER,
    )
    rest = proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(rest)
    print(rest.strip(), flush=True)
    return out


def campaign(
    base: Path,
    name: str,
    cap: Path,
    builtin: str,
    protocol: str,
    seconds: float,
    scale: int,
    reps: int,
) -> dict[str, Any]:
    spec = base / f"{name}.toml"
    spec.write_text(
        f'name = "{name}"\n[defaults]\nrepetitions = {reps}\nwarmup = "0s"\nscale = {scale}\n'
        f'clients = 4\nthreads = 2\nduration = "{seconds:.0f}s"\n'
        '[storage.ext4]\nfs = "ext4"\ndevice = "loop:4G"\n'
        '[storage.btrfs]\nfs = "btrfs"\ndevice = "loop:4G"\n'
        # both from a cold cache (server restarted, page cache dropped): native pgbench's
        # load leaves its data in shared_buffers, the replay's copy starts without it
        f'[workload.replay]\ntool = "replay"\ncapture = "{cap}"\nmode = "fast"\ncache = "cold"\n'
        f'[workload.native]\nbuiltin = "{builtin}"\nprotocol = "{protocol}"\ncache = "cold"\n'
    )
    results = base / f"{name}.sqlite"
    started = time.monotonic()
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    took = time.monotonic() - started
    runs = json.loads(pgfsbench("results", "list", "-r", str(results), "--json").stdout)
    compared = json.loads(pgfsbench("compare", "-r", str(results), "--json").stdout)
    by: dict[str, list[float]] = {}
    fidelity: list[dict[str, Any]] = []
    for r in runs:
        if r["status"] == "ok":
            by.setdefault(f"{r['storage']}/{r['workload']}", []).append(float(r["throughput"]))
        if r["workload"] == "replay":
            shown = json.loads(
                pgfsbench("results", "show", str(r["run_id"]), "-r", str(results), "--json").stdout
            )
            f = shown["metrics"]["tool"].get("fidelity") or {}
            fidelity.append(
                {k: v for k, v in f.items() if k != "statements"}
                | {"storage": r["storage"], "repetition": r["repetition"]}
            )
    mean = {k: statistics.fmean(v) for k, v in by.items()}
    verdicts = {
        f"{p['other']['cell']} vs {p['baseline']['cell']}": {
            "ratio": p["ratio"],
            "ci95": p["ci95"],
            "p": p["p"],
            "verdict": p["verdict"],
        }
        for p in compared
    }
    return {
        "minutes": round(took / 60, 1),
        "tps": by,
        "mean_tps": {k: round(v, 1) for k, v in mean.items()},
        "replay_vs_native_ext4": round(mean["ext4/replay"] / mean["ext4/native"], 3),
        "btrfs_over_ext4": {
            "replay": round(mean["btrfs/replay"] / mean["ext4/replay"], 3),
            "native": round(mean["btrfs/native"] / mean["ext4/native"], 3),
        },
        "verdicts": verdicts,
        "fidelity": fidelity,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--save", type=Path)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pgfsb-replay-", dir="/var/tmp"))
    try:
        measure(base, args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def measure(base: Path, args: argparse.Namespace) -> None:
    bindir = find_binaries().bindir
    base.chmod(0o755)
    pgdata, sock = base / "src", base / "sock"
    for d in (pgdata, sock):
        d.mkdir()
        shutil.chown(d, PG_USER, PG_USER)
    sh(str(bindir / "initdb"), "-D", str(pgdata), "--auth=trust", user=PG_USER)
    with (pgdata / "postgresql.conf").open("a") as f:
        f.write(
            f"listen_addresses = ''\nunix_socket_directories = '{sock}'\nport = {PORT}\n"
            "logging_collector = on\nlog_directory = 'log'\n"
            "shared_preload_libraries = 'pg_stat_statements'\n"
        )
    with (pgdata / "pg_hba.conf").open("a") as f:
        f.write("local replication all trust\n")
    sh(
        str(bindir / "pg_ctl"),
        "-D",
        str(pgdata),
        "-w",
        "-l",
        str(pgdata / "server.log"),
        "start",
        user=PG_USER,
    )
    result: dict[str, Any] = {
        "seconds": args.seconds,
        "scale": args.scale,
        "reps": args.reps,
        "host_cpus": len(__import__("os").sched_getaffinity(0)),
    }
    try:
        sh(
            str(bindir / "psql"),
            "-h",
            str(sock),
            "-p",
            str(PORT),
            "-d",
            "postgres",
            "-qc",
            "CREATE EXTENSION pg_stat_statements",
            user=PG_USER,
        )
        sh(
            str(bindir / "pgbench"),
            "-h",
            str(sock),
            "-p",
            str(PORT),
            "-i",
            "-s",
            str(args.scale),
            "-q",
            "postgres",
            user=PG_USER,
        )
        caps = {
            "simple-update-prepared": (
                capture(
                    base, sock, "cap-su", ["-M", "prepared", "-b", "simple-update"], args.seconds
                ),
                "simple-update",
                "prepared",
            ),
            "tpcb-like": (
                capture(base, sock, "cap-tpcb", ["-b", "tpcb-like"], args.seconds),
                "tpcb-like",
                "simple",
            ),
        }
    finally:
        sh(str(bindir / "pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop", user=PG_USER)
    try:
        for name, (cap, builtin, protocol) in caps.items():
            manifest = json.loads((cap / "manifest.json").read_text())
            statements = sum(1 for _ in (cap / "statements.jsonl").open("rb"))
            # native pgbench for about as long as the replay takes (measured on the first run)
            result[name] = campaign(
                base, name, cap, builtin, protocol, args.seconds * 0.7, args.scale, args.reps
            )
            result[name]["capture_seconds"] = manifest["seconds"]
            result[name]["capture_log_lines"] = statements
            print(json.dumps({name: result[name]}, indent=1, default=str), flush=True)
        if args.save:
            args.save.write_text(json.dumps(result, indent=1, default=str) + "\n")
    finally:
        pgfsbench("cleanup", "--workdir", str(base / "work"))


if __name__ == "__main__":
    main()
