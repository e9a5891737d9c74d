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
   protocol and clients for as long as the replay takes on that storage (measured by one
   replay run each first: from a cold cache the first seconds are slower, and they weigh
   the same on both sides), both from a cold cache (each server restarted and the page
   cache dropped before its measured phase); REPS repetitions, interleaved.
   (The replay's copy does not carry the captured server's shared_preload_libraries;
   the native cells run without them too.)

It prints and saves: per capture, the replay's throughput against native pgbench's on
each storage, and the btrfs/ext4 ratio of each, with their 95% intervals and verdicts
(pgfsbench's own comparison); the fidelity (statements, errors, WAL against the
capture's), and the replayer's own CPU per transaction.

    .venv/bin/python bench/replay_fidelity.py [--seconds 20] [--scale 10] [--reps 3]
        [--server-cpus 0] [--save bench/results/replay-fidelity-DATE.json]

--server-cpus puts each campaign's PostgreSQL on those CPUs and the clients (the replayer,
pgbench) on the others (`server_cpus` in the spec): without it, on a small host, the
client that costs less CPU a transaction leaves more to the server, and the comparison is
of the clients as much as of the replay's fidelity.

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

from pgfsbench.analysis.compare import compare  # noqa: E402
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


RELAY = 6592  # capture --wire: where pgbench connects through the relay
SYSBENCH_ROWS = 20000  # sysbench's one table, in the capture's server and the native cells


def pgbench_on(sock: Path, *args: str, via_relay: bool = False) -> str:
    """pgbench on the bench's own server (or through the wire capture's relay), as its user."""
    bindir = find_binaries().bindir
    where = (
        ["-h", "127.0.0.1", "-p", str(RELAY)] if via_relay else ["-h", str(sock), "-p", str(PORT)]
    )
    return sh(str(bindir / "pgbench"), *where, *args, "postgres", user=PG_USER)


def capture(
    base: Path, sock: Path, name: str, pgbench_args: list[str], seconds: int, wire: bool = False
) -> Path:
    out = base / name
    dsn = f"host={sock} port={PORT} user={PG_USER} dbname=postgres"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgfsbench",
            "capture",
            *(["--wire", "--listen", f"127.0.0.1:{RELAY}"] if wire else []),
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
    pgbench_on(sock, "-c", "4", "-j", "2", "-T", str(seconds), *pgbench_args, via_relay=wire)
    if wire:  # the clients are done: the capture ends now
        proc.send_signal(__import__("signal").SIGINT)
    rest = proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(rest)
    print(rest.strip(), flush=True)
    return out


def capture_sysbench(base: Path, sock: Path, sb: list[str], seconds: int, wire: bool) -> Path:
    """sysbench's oltp_read_write captured while it runs (through the relay with --wire)."""
    out = base / "cap-sysbench"
    dsn = f"host={sock} port={PORT} user={PG_USER} dbname=postgres"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgfsbench", "capture",
         *(["--wire", "--listen", f"127.0.0.1:{RELAY}"] if wire else []),
         "--dsn", dsn, "--seconds", str(seconds + 4), "-o", str(out),
         "--workdir", str(base / "work")],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline()
    if "capturing" not in first:
        raise SystemExit(first + proc.stdout.read())
    where = (
        ["--pgsql-host=127.0.0.1", f"--pgsql-port={RELAY}"]
        if wire
        else [f"--pgsql-host={sock}", f"--pgsql-port={PORT}"]
    )
    sh("sysbench", *sb, *where, f"--time={seconds}", "--events=0", "oltp_read_write", "run",
       user=PG_USER)  # fmt: skip
    if wire:
        proc.send_signal(__import__("signal").SIGINT)
    rest = proc.stdout.read()
    if proc.wait() != 0:
        raise SystemExit(rest)
    return out


def _spec(
    path: Path,
    name: str,
    cap: Path,
    reps: int,
    scale: int,
    storages: tuple[str, ...],
    native: tuple[str, str, dict[str, float]] | None,
    server_cpus: str | None = None,
) -> None:
    """The campaign's spec: the replay on each storage, and native pgbench (builtin,
    protocol) as one workload a storage, each as long as the replay takes there."""
    text = (
        f'name = "{name}"\n[defaults]\nrepetitions = {reps}\nwarmup = "0s"\nscale = {scale}\n'
        'clients = 4\nthreads = 2\nduration = "20s"\n'
        + (f'server_cpus = "{server_cpus}"\n' if server_cpus else "")
        + "".join(f'[storage.{fs}]\nfs = "{fs}"\ndevice = "loop:4G"\n' for fs in storages)
        # both from a cold cache (server restarted, page cache dropped): native pgbench's
        # load leaves its data in shared_buffers, the replay's copy starts without it
        + f'[workload.replay]\ntool = "replay"\ncapture = "{cap}"\nmode = "fast"\n'
        'cache = "cold"\n'
    )
    if native is not None:
        builtin, protocol, seconds = native
        for fs, secs in seconds.items():
            if builtin.startswith("sysbench:"):  # sysbench's own script, as captured
                text += (
                    f'[workload.native-{fs}]\ntool = "sysbench"\nscript = "{builtin[9:]}"\n'
                    f"tables = 1\ntable_size = {SYSBENCH_ROWS}\n"
                    f'cache = "cold"\nduration = "{max(1, round(secs))}s"\n'
                )
                continue
            text += (
                f'[workload.native-{fs}]\nbuiltin = "{builtin}"\nprotocol = "{protocol}"\n'
                f'cache = "cold"\nduration = "{max(1, round(secs))}s"\n'
            )
    path.write_text(text)


def _replay_walls(
    base: Path,
    name: str,
    cap: Path,
    scale: int,
    storages: tuple[str, ...],
    server_cpus: str | None,
) -> dict[str, float]:
    """How long the replay runs on each storage (one run each, not counted)."""
    spec, results = base / f"{name}-walls.toml", base / f"{name}-walls.sqlite"
    _spec(spec, f"{name}-walls", cap, 1, scale, storages, None, server_cpus)
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"))
    walls: dict[str, float] = {}
    for r in json.loads(pgfsbench("results", "list", "-r", str(results), "--json").stdout):
        shown = json.loads(
            pgfsbench("results", "show", str(r["run_id"]), "-r", str(results), "--json").stdout
        )
        walls[r["storage"]] = float(shown["metrics"]["tool"]["replay"]["wall_s"])
    return walls


def _ratio(base: list[float], other: list[float]) -> dict[str, Any]:
    """other/base: pgfsbench's own comparison (Welch's t test on log throughput)."""
    c = compare(base, other)
    return {
        "ratio": round(c.ratio, 3) if c.ratio is not None else None,
        "ci95": (
            [round(c.ci_low, 3), round(c.ci_high, 3)]
            if c.ci_low is not None and c.ci_high is not None
            else None
        ),
        "verdict": str(c.verdict),
    }


def campaign(
    base: Path,
    name: str,
    cap: Path,
    builtin: str,
    protocol: str,
    scale: int,
    reps: int,
    storages: tuple[str, ...] = ("ext4", "btrfs"),
    server_cpus: str | None = None,
) -> dict[str, Any]:
    # native pgbench runs as long as the replay does on the same storage: from a cold
    # cache the first seconds are slower, and they must weigh the same on both sides
    walls = _replay_walls(base, name, cap, scale, storages, server_cpus)
    spec = base / f"{name}.toml"
    _spec(spec, name, cap, reps, scale, storages, (builtin, protocol, walls), server_cpus)
    results = base / f"{name}.sqlite"
    only = [
        a for fs in storages for a in ("--only", f"{fs}/*/replay", "--only", f"{fs}/*/native-{fs}")
    ]
    started = time.monotonic()
    pgfsbench("run", str(spec), "--results", str(results), "--workdir", str(base / "work"), *only)
    took = time.monotonic() - started
    runs = json.loads(pgfsbench("results", "list", "-r", str(results), "--json").stdout)
    by: dict[str, list[float]] = {}
    fidelity: list[dict[str, Any]] = []
    for r in runs:
        workload = "native" if r["workload"].startswith("native") else r["workload"]
        if r["status"] == "ok":
            by.setdefault(f"{r['storage']}/{workload}", []).append(float(r["throughput"]))
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
    return {
        "minutes": round(took / 60, 1),
        "native_seconds": {fs: round(w, 1) for fs, w in walls.items()},
        "tps": by,
        "mean_tps": {k: round(v, 1) for k, v in mean.items()},
        "replay_vs_native": {
            fs: _ratio(by[f"{fs}/native"], by[f"{fs}/replay"])
            for fs in storages
            if f"{fs}/replay" in by and f"{fs}/native" in by
        },
        "btrfs_over_ext4": {
            w: _ratio(by[f"ext4/{w}"], by[f"btrfs/{w}"])
            for w in ("replay", "native")
            if f"btrfs/{w}" in by and f"ext4/{w}" in by
        },
        "fidelity": fidelity,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--save", type=Path)
    parser.add_argument(
        "--only",
        choices=("simple-update-prepared", "tpcb-like", "none"),
        help="one pgbench capture only (none: with --sysbench, sysbench's alone)",
    )
    parser.add_argument(
        "--sysbench", action="store_true", help="also sysbench's oltp_read_write, 4 threads"
    )
    parser.add_argument(
        "--storages", default="ext4,btrfs", help="ext4 and/or btrfs (ratios need both)"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the working directory (its results files)"
    )
    parser.add_argument(
        "--wire", action="store_true", help="capture at the wire (capture --wire), not the log"
    )
    parser.add_argument(
        "--server-cpus",
        help="the campaigns' server_cpus (e.g. 0): the clients' own CPU apart from the server's",
    )
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="pgfsb-replay-", dir="/var/tmp"))
    try:
        measure(base, args)
    finally:
        if args.keep:
            print(f"kept {base}", flush=True)
        else:
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
    if args.wire:  # the relay's clients come over TCP; it reaches the server by its socket
        sock.chmod(0o755)
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
        "server_cpus": args.server_cpus,
        "capture": "wire" if args.wire else "log",
    }
    caps: dict[str, tuple[Path, str, str]] = {}
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
        if args.sysbench:
            sb = [
                "--db-driver=pgsql", f"--pgsql-user={PG_USER}", "--pgsql-db=postgres",
                "--tables=1", f"--table-size={SYSBENCH_ROWS}", "--threads=4",
            ]  # fmt: skip
            sh("sysbench", *sb, f"--pgsql-host={sock}", f"--pgsql-port={PORT}",
               "oltp_read_write", "prepare", user=PG_USER)  # fmt: skip
            caps["sysbench-oltp_read_write"] = (
                capture_sysbench(base, sock, sb, args.seconds, args.wire),
                "sysbench:oltp_read_write",
                "simple",
            )
        wanted = {
            "simple-update-prepared": (
                "cap-su",
                ["-M", "prepared", "-b", "simple-update"],
                "simple-update",
                "prepared",
            ),
            "tpcb-like": ("cap-tpcb", ["-b", "tpcb-like"], "tpcb-like", "simple"),
        }
        for name, (dirname, a, builtin, protocol) in wanted.items():
            if args.only not in (None, name) or args.only == "none":
                continue
            # each capture from freshly loaded tables, as native pgbench's cells start: a
            # capture after another would replay on the first one's dead tuples (free
            # space in the pages, HOT updates) against native pgbench's fresh full pages
            pgbench_on(sock, "-i", "-s", str(args.scale), "-q")
            caps[name] = (
                capture(base, sock, dirname, a, args.seconds, args.wire),
                builtin,
                protocol,
            )
    finally:
        sh(str(bindir / "pg_ctl"), "-D", str(pgdata), "-m", "fast", "-w", "stop", user=PG_USER)
    try:
        for name, (cap, builtin, protocol) in caps.items():
            manifest = json.loads((cap / "manifest.json").read_text())
            log = cap / ("wire.jsonl" if args.wire else "statements.jsonl")
            statements = sum(1 for _ in log.open("rb"))
            # native pgbench for about as long as the replay takes (measured on the first run)
            result[name] = campaign(
                base,
                name,
                cap,
                builtin,
                protocol,
                args.scale,
                args.reps,
                tuple(args.storages.split(",")),
                args.server_cpus,
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
