"""Time the transaction-log parser against the common alternative, side by side.

Generates a realistic pgbench -l log (10 million lines by default: 50 clients over 120 s,
log-normal latencies, a few failed transactions), then times
  1. pgfsbench's parser: file -> per-run and per-second percentiles, and
  2. what other tools do: COPY into PostgreSQL, then percentile_disc per second,
and prints both rates and their ratio. Needs root (it starts a throwaway PostgreSQL).

    .venv/bin/python bench/parse_log.py [--lines 10000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import polars as pl

from pgfsbench.postgres.binaries import find_binaries


def generate(path: Path, lines: int, seconds: int = 120, clients: int = 50) -> None:
    rng = np.random.default_rng(42)
    start = 1_795_300_000
    end_us = np.sort(rng.integers(0, seconds * 1_000_000, lines))
    latency = rng.lognormal(mean=7.5, sigma=0.7, size=lines).astype(np.int64) + 50
    frame = pl.DataFrame(
        {
            "client": rng.integers(0, clients, lines, dtype=np.int32),
            "tx": np.arange(lines, dtype=np.int64),
            "lat": latency.astype(str),
            "script": np.zeros(lines, dtype=np.int8),
            "epoch": start + end_us // 1_000_000,
            "us": end_us % 1_000_000,
        }
    )
    failed = rng.integers(0, lines, max(1, lines // 100_000))
    frame = frame.with_columns(
        pl.when(pl.int_range(pl.len()).is_in(failed))
        .then(pl.lit("failed"))
        .otherwise(pl.col("lat"))
        .alias("lat")
    )
    frame.write_csv(path, separator=" ", include_header=False)


PARSE_ONE = """
import sys, threading, time
from pathlib import Path
from pgfsbench.collect.txlog import parse_txlog

def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0

peak_anon = [0.0]
done = threading.Event()
def watch():
    while not done.wait(0.02):
        peak_anon[0] = max(peak_anon[0], status("RssAnon"))
threading.Thread(target=watch, daemon=True).start()
path = Path(sys.argv[1])
started = time.perf_counter()
stats = parse_txlog([path], duration_s=120)
elapsed = time.perf_counter() - started
done.set()
assert stats is not None and stats.series["lat_p99_ms"]
print(elapsed, status("VmHWM"), max(peak_anon[0], status("RssAnon")))
"""


def time_pgfsbench(path: Path) -> tuple[float, float, float]:
    """(seconds, peak resident MB, peak anonymous MB) of the parser, in a process of its
    own. Read from the child's /proc/self/status: getrusage's ru_maxrss would count the
    generator's memory too, as Linux carries the pre-exec peak of a forked child over.
    The resident peak includes the log's pages, which polars maps from the page cache;
    the anonymous peak (sampled every 20 ms) is the memory the parser really holds."""
    out = subprocess.run(
        [sys.executable, "-c", PARSE_ONE, str(path)], check=True, capture_output=True, text=True
    ).stdout
    elapsed, hwm, anon = (float(x) for x in out.strip().splitlines()[-1].split())
    return elapsed, hwm, anon


def time_copy_percentile(path: Path, workdir: Path) -> float:
    """COPY the log into PostgreSQL and compute per-second percentiles with SQL."""
    b = find_binaries()
    data, sock = workdir / "data", workdir / "sock"
    sock.mkdir()
    shutil.chown(workdir, "postgres", "postgres")
    shutil.chown(sock, "postgres", "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_pg, b.tool("initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"],
        check=True,
        capture_output=True,
    )
    subprocess.run(
        [
            *as_pg,
            b.tool("pg_ctl"),
            "-D",
            str(data),
            "-w",
            "-l",
            str(workdir / "log"),
            "-o",
            f"-c listen_addresses='' -c unix_socket_directories={sock} "
            "-c shared_buffers=1GB -c max_wal_size=4GB",
            "start",
        ],
        check=True,
        capture_output=True,
    )
    try:
        psql = [b.tool("psql"), "-h", str(sock), "-U", "postgres", "-q", "-v", "ON_ERROR_STOP=1"]
        subprocess.run(
            [
                *psql,
                "-c",
                "CREATE UNLOGGED TABLE tx (client int, tx bigint, lat text,"
                " script int, epoch bigint, us bigint)",
            ],
            check=True,
        )
        shutil.chown(path, "postgres", "postgres")
        started = time.perf_counter()
        subprocess.run([*psql, "-c", f"COPY tx FROM '{path}' WITH (DELIMITER ' ')"], check=True)
        subprocess.run(
            [
                *psql,
                "-o",
                "/dev/null",
                "-c",
                "SELECT epoch, count(*), "
                "percentile_disc(0.5) WITHIN GROUP (ORDER BY lat::int), "
                "percentile_disc(0.99) WITHIN GROUP (ORDER BY lat::int), max(lat::int) "
                "FROM tx WHERE lat <> 'failed' GROUP BY epoch ORDER BY epoch",
            ],
            check=True,
        )
        return time.perf_counter() - started
    finally:
        subprocess.run(
            [*as_pg, b.tool("pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"],
            check=False,
            capture_output=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--skip-copy",
        action="store_true",
        help="time pgfsbench's parser only (not COPY + percentile_disc)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgfsb-bench-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        log = work / "pgbench_log.1"
        t = time.perf_counter()
        generate(log, args.lines)
        print(
            f"generated {args.lines:,} lines ({log.stat().st_size / 1e6:.0f} MB) "
            f"in {time.perf_counter() - t:.1f} s"
        )
        ours = [time_pgfsbench(log) for _ in range(args.repeat)]
        rates = [args.lines / s for s, _, _ in ours]
        print(
            f"pgfsbench parser : {statistics.median(rates) / 1e6:6.2f} M lines/s "
            f"(median of {args.repeat}; min {min(rates) / 1e6:.2f}, max {max(rates) / 1e6:.2f});"
            f" peak resident {max(r for _, r, _ in ours):,.0f} MB (with the mapped log),"
            f" peak anonymous {max(a for _, _, a in ours):,.0f} MB"
        )
        if args.skip_copy:
            return
        (work / "pg").mkdir()
        theirs = time_copy_percentile(log, work / "pg")
        other = args.lines / theirs
        print(f"COPY + percentile_disc : {other / 1e6:6.2f} M lines/s (one run)")
        print(f"ratio: pgfsbench is {statistics.median(rates) / other:.1f}x faster")


if __name__ == "__main__":
    main()
