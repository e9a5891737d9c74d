"""What does pgbench's transaction log (-l) cost, and does sampling it make it cheaper?

Raw pgbench, no pgfsbench in the loop: a hand-made server (PostgreSQL on a tmpfs it
mounts, a private unix socket, select-only with prepared statements: CPU-bound, the
worst case), then runs of `pgbench -T` in blocks, one run per arm in each block, the arms'
order rotated from block to block (a Latin square: every arm is as often first as last).
An arm is a --sampling-rate of the -l log, or "none" (no -l). For each arm: the TPS
ratio to "none" (geometric mean of the blocks' ratios, 95% CI) and pgbench's CPU per
transaction (its user + system time over the transactions it made). Needs root.

    .venv/bin/python bench/txlog_cost.py [--blocks 40] [--duration 5]
        [--arms none,0.00001,0.005,0.025] [--bindir /usr/lib/postgresql/15/bin]
        [--save F.json]

At ~42,000 TPS, 0.00001 writes well under a line a second, 0.005 about 200 lines a
second and 0.025 about 1,000 (pgfsbench's default cap). The README has what it gave.
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import subprocess
import tempfile
from pathlib import Path

from pgfsbench.analysis.observer import geometric_ci


def as_postgres(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["runuser", "-u", "postgres", "--", *argv], check=check,
                          capture_output=True, text=True)


def one_run(bindir: Path, sock: Path, logdir: Path, arm: str,
            duration: int) -> tuple[float, float, int]:
    """(TPS, pgbench's CPU seconds, transactions) of one run of this arm."""
    for old in logdir.glob("txlog.*"):
        old.unlink()
    log = [] if arm == "none" else ["-l", f"--log-prefix={logdir / 'txlog'}",
                                    f"--sampling-rate={arm}"]
    base = [str(bindir / "pgbench"), "-h", str(sock), "-S", "-M", "prepared",
            "-c2", "-j2", "-n"]
    as_postgres(*base, "-T1", "postgres")  # the same warm-up before every run
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = as_postgres(*base, f"-T{duration}", "-P1", *log, "postgres").stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    tps = next(float(line.split()[2]) for line in out.splitlines()
               if line.startswith("tps = "))
    done = next(int(line.split(":")[1].split("/")[0]) for line in out.splitlines()
                if line.startswith("number of transactions actually processed"))
    return tps, cpu, done


def measure(work: Path, args: argparse.Namespace) -> dict[str, dict[str, object]]:
    bindir, arms = Path(args.bindir), args.arms.split(",")
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
            as_postgres(str(bindir / "pgbench"), "-h", str(sock), "-i", "-s", "10", "-q",
                        "postgres")
            runs: dict[str, list[tuple[float, float, int]]] = {a: [] for a in arms}
            rotations = [arms[i:] + arms[:i] for i in range(len(arms))]
            orders = rotations + [list(reversed(r)) for r in rotations]
            for block in range(args.blocks):
                for arm in orders[block % len(orders)]:
                    runs[arm].append(one_run(bindir, sock, logdir, arm, args.duration))
                print(f"block {block + 1}: " + ", ".join(
                    f"{a} {runs[a][-1][0]:,.0f} tps" for a in arms), flush=True)
        finally:
            as_postgres(str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop",
                        check=False)
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
    result: dict[str, dict[str, object]] = {}
    for arm in arms:
        ratios = [r[0] / n[0] for r, n in zip(runs[arm], runs["none"], strict=True)]
        ratio, low, high = geometric_ci(ratios)
        cpu_us = sum(r[1] for r in runs[arm]) / sum(r[2] for r in runs[arm]) * 1e6
        result[arm] = {"ratio": ratio, "ci": [low, high], "cpu_us_per_tx": cpu_us,
                       "tps": [r[0] for r in runs[arm]]}
        print(f"{'no -l' if arm == 'none' else f'-l --sampling-rate={arm}':<28} "
              f"TPS / no -l {ratio:.4f} [{low or math.nan:.4f}, {high or math.nan:.4f}], "
              f"pgbench {cpu_us:.2f} us of CPU per transaction")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--duration", type=int, default=5, help="seconds per run")
    parser.add_argument("--arms", default="none,0.00001,0.005,0.025")
    parser.add_argument("--bindir", default="/usr/lib/postgresql/15/bin")
    parser.add_argument("--save", type=Path, help="write the arms' figures to this JSON file")
    args = parser.parse_args()
    if "none" not in args.arms.split(","):
        parser.error('--arms must include "none" (the runs without -l)')
    with tempfile.TemporaryDirectory(prefix="pgfsb-txlog-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        result = measure(work, args)
    if args.save:
        args.save.write_text(json.dumps({"blocks": args.blocks, "duration": args.duration,
                                         "arms": result}, indent=1) + "\n")
        print(f"saved to {args.save}")


if __name__ == "__main__":
    main()
