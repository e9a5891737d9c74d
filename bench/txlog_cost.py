"""What does pgbench's transaction log (-l) cost, and does sampling it make it cheaper?

Raw pgbench, no pgfsbench in the loop: a hand-made server (PostgreSQL on a tmpfs it
mounts, a private unix socket, select-only with prepared statements: CPU-bound, the
worst case), then runs of `pgbench -T` in blocks, one run per arm in each block, the arms'
order rotated from block to block (a Latin square: every arm is as often first as last).
An arm is a --sampling-rate of the -l log, or "none" (no -l); RATE@tmpfs writes that log
to the server's tmpfs instead of the root disk (is it the file system that costs?). For
each arm: the TPS ratio to "none" (geometric mean of the blocks' ratios, 95% CI) and
pgbench's CPU per transaction (its user + system time over the transactions it made), with
its difference to "none" block by block (95% CI). Needs root.

    .venv/bin/python bench/txlog_cost.py [--blocks 40] [--duration 5]
        [--arms none,0.00001,0.005,0.025,0.025@tmpfs] [--bindir /usr/lib/postgresql/15/bin]
        [--save F.json]

At ~42,000 TPS, 0.00001 writes well under a line a second, 0.005 about 200 lines a
second and 0.025 about 1,000 (pgfsbench's default cap). The README has what it gave.
"""

from __future__ import annotations

import argparse
import math
import resource
import statistics
import subprocess
from pathlib import Path

from rawserver import RawServer, is_rate, measure_in_workdir, raw_server

from pgfsbench.analysis.observer import geometric_ci


def one_run(server: RawServer, arm: str, duration: int) -> tuple[float, float, int]:
    """(TPS, pgbench's CPU seconds, transactions) of one run of this arm."""
    rate, _, where = arm.partition("@")
    logdir = server.tmpfs_logdir if where == "tmpfs" else server.logdir
    for old in logdir.glob("txlog.*"):
        old.unlink()
    log = (
        []
        if arm == "none"
        else ["-l", f"--log-prefix={logdir / 'txlog'}", f"--sampling-rate={rate}"]
    )
    base = ["-S", "-M", "prepared", "-c2", "-j2", "-n"]
    subprocess.run(server.pgbench(*base, "-T1"), check=True, capture_output=True)  # warm-up
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(
        server.pgbench(*base, f"-T{duration}", "-P1", *log),
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    tps = next(float(line.split()[2]) for line in out.splitlines() if line.startswith("tps = "))
    done = next(
        int(line.split(":")[1].split("/")[0])
        for line in out.splitlines()
        if line.startswith("number of transactions actually processed")
    )
    return tps, cpu, done


def measure(work: Path, args: argparse.Namespace) -> dict[str, dict[str, object]]:
    arms = args.arms.split(",")
    with raw_server(work, Path(args.bindir)) as server:
        runs: dict[str, list[tuple[float, float, int]]] = {a: [] for a in arms}
        rotations = [arms[i:] + arms[:i] for i in range(len(arms))]
        orders = rotations + [list(reversed(r)) for r in rotations]
        for block in range(args.blocks):
            for arm in orders[block % len(orders)]:
                runs[arm].append(one_run(server, arm, args.duration))
            print(
                f"block {block + 1}: " + ", ".join(f"{a} {runs[a][-1][0]:,.0f} tps" for a in arms),
                flush=True,
            )
    result: dict[str, dict[str, object]] = {}
    for arm in arms:
        ratios = [r[0] / n[0] for r, n in zip(runs[arm], runs["none"], strict=True)]
        ratio, low, high = geometric_ci(ratios)
        cpu_us = sum(r[1] for r in runs[arm]) / sum(r[2] for r in runs[arm]) * 1e6
        # pgbench's CPU per transaction, minus the same block's run without -l
        extra = [
            1e6 * (r[1] / r[2] - n[1] / n[2]) for r, n in zip(runs[arm], runs["none"], strict=True)
        ]
        mean = statistics.fmean(extra)
        half = (
            1.96 * statistics.stdev(extra) / math.sqrt(len(extra)) if len(extra) > 1 else math.nan
        )
        result[arm] = {
            "ratio": ratio,
            "ci": [low, high],
            "cpu_us_per_tx": cpu_us,
            "cpu_us_per_tx_extra": [mean, mean - half, mean + half],
            "tps": [r[0] for r in runs[arm]],
        }
        rate, _, where = arm.partition("@")
        label = (
            "no -l"
            if arm == "none"
            else f"-l --sampling-rate={rate}" + (" on tmpfs" if where else "")
        )
        print(
            f"{label:<34} "
            f"TPS / no -l {ratio:.4f} [{low or math.nan:.4f}, {high or math.nan:.4f}], "
            f"pgbench {cpu_us:.2f} us of CPU per transaction"
            + (
                ""
                if arm == "none"
                else f" ({mean:+.3f} [{mean - half:+.3f}, {mean + half:+.3f}] block by block)"
            )
        )
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
    for arm in args.arms.split(","):
        rate, at, where = arm.partition("@")
        if arm != "none" and (not is_rate(rate) or (at and where != "tmpfs")):
            parser.error(f"bad arm {arm!r}: none, a sampling rate in (0, 1], or RATE@tmpfs")
    measure_in_workdir(
        "pgfsb-txlog-",
        lambda work: measure(work, args),
        args.save,
        {"blocks": args.blocks, "duration": args.duration},
    )


if __name__ == "__main__":
    main()
