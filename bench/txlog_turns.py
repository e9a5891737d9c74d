"""What pgbench's transaction log (-l) costs, measured in turns that cancel the host's swings.

Raw pgbench, no pgfsbench in the loop: a hand-made server (PostgreSQL on a tmpfs it
mounts, a private unix socket, select-only with prepared statements: CPU-bound, the
worst case) with two databases of the same scale. Two pgbench processes, one per
database, one with the arm's -l and one without, are started together and then take
turns: while one runs the other is stopped (SIGSTOP), in slots of --slot seconds in ABBA
order, for --seconds. Each counts what it ran by the server's own count of its
database's commits (`pg_stat_database.xact_commit`, read once the backends have flushed
their statistics), so the two had the same running time, in slots a fraction of a second
apart: the swings of this host's throughput (±10% from one second to the next) fall on
both. A repetition gives one ratio (with -l / without); which database and which
process goes first alternate. The arm "none" runs both without -l: the design's own
bias and noise. Needs root.

    .venv/bin/python bench/txlog_turns.py [--reps 30] [--seconds 20] [--slot 0.2]
        [--arms none,0.00001,0.0167] [--bindir /usr/lib/postgresql/15/bin] [--save F.json]

At ~45,000 TPS, 0.00001 writes under a line a second (what -l costs every transaction
whatever it writes), 0.0167 about 750 (about pgfsbench's cap of 1,000 lines a second at
60,000 TPS). The README has what it gave.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rawserver import RawServer, is_rate, measure_in_workdir, raw_server
from turns import (
    DATABASES,
    Lane,
    arm_summary,
    clear_logs,
    make_databases,
    print_repetition,
    start_pgbench,
    take_turns,
    turns_parser,
)


def one_repetition(
    server: RawServer, arm: str, rep: int, seconds: float, slot: float
) -> tuple[int, int]:
    """(transactions with the arm's -l, transactions without) in equal running time."""
    logged_db, plain_db = DATABASES if rep % 2 == 0 else DATABASES[::-1]
    log: list[str] = []
    if arm != "none":
        clear_logs(server.tmpfs_logdir)
        log = ["-l", f"--log-prefix={server.tmpfs_logdir / 'tx'}", f"--sampling-rate={arm}"]
    lanes = (
        Lane(start_pgbench(server, logged_db, log), logged_db),
        Lane(start_pgbench(server, plain_db), plain_db),
    )
    return take_turns(server, lanes, (rep // 2) % 2, seconds, slot)


def measure(work: Path, args: argparse.Namespace) -> dict[str, dict[str, object]]:
    arms = args.arms.split(",")
    counts: dict[str, list[tuple[int, int]]] = {a: [] for a in arms}
    with raw_server(work, Path(args.bindir)) as server:
        make_databases(server)
        for rep in range(args.reps):
            for arm in arms if rep % 2 == 0 else arms[::-1]:
                counts[arm].append(one_repetition(server, arm, rep, args.seconds, args.slot))
            print_repetition(rep, counts, args.seconds)
    return {
        arm: arm_summary(
            "both without -l" if arm == "none" else f"-l --sampling-rate={arm}", counts[arm]
        )
        for arm in arms
    }


def main() -> None:
    parser = turns_parser(__doc__, 30, 0.2, "none,0.00001,0.0167")
    args = parser.parse_args()
    for arm in args.arms.split(","):
        if arm != "none" and not is_rate(arm):
            parser.error(f"bad arm {arm!r}: none, or a sampling rate in (0, 1]")
    measure_in_workdir(
        "pgfsb-turns-",
        lambda work: measure(work, args),
        args.save,
        {"reps": args.reps, "seconds": args.seconds, "slot": args.slot},
    )


if __name__ == "__main__":
    main()
