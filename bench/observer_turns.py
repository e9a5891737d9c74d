"""Does watching change what is watched? The observer measured in turns that cancel the
host's swings.

`overhead.py` compares whole runs, watched and not, in pairs: on this host, when it is
busy, the SD of a pair's log ratio is 0.13-0.16 (the throughput swings ±10% from one
second to the next), so even 250 pairs leave a 95% CI of ±2%. Here the two arms run in
the same seconds. A hand-made server (PostgreSQL on a tmpfs it mounts, a private unix
socket: the worst case, CPU-bound) with two databases; two pgbench processes
(select-only, prepared, 2 clients each, no transaction log: what `txlog = "auto"` does at
these rates) take turns of --slot seconds, the other one stopped (see `turns.py`). In
the watched arm pgfsbench's Observation (the sampler thread and its backend, exactly as a
run uses them, in a process of its own) runs only while one of the two runs: it is
stopped and continued with it. Each one's transactions come from the server's count of
its database's commits, so the ratio watched / not watched compares equal running
times. A repetition gives one ratio; the database, the lane watched and the lane going
first alternate. The arm "none" watches neither: the design's own bias and noise.
"batch" is the observer as runs use it (SCHED_BATCH), "normal" with `observer_sched =
"normal"`. Needs root.

    .venv/bin/python bench/observer_turns.py [--reps 20] [--seconds 20] [--slot 0.25]
        [--arms none,batch] [--hz 10] [--bindir /usr/lib/postgresql/15/bin] [--save F.json]

The observer ticks at once when it is continued (a tick due while it was stopped is
skipped, not made up), then every 1/hz s: with turns of 0.25 s at 10 Hz it ticks 3 times
a turn, 12 times a second of its running time instead of 10 (and its once-a-second work
1.2 times a second), so the cost found is an upper bound (about 1.2 times a run's). Its
CPU (its process's threads, and its backend, to the nanosecond) is counted over the
turns only, per second of the watched lane's running time. The README has what it gave.
"""

from __future__ import annotations

import argparse
import json
import signal
import statistics
import subprocess
import sys
from pathlib import Path

from rawserver import RawServer, measure_in_workdir, raw_server
from turns import (
    DATABASES,
    Lane,
    arm_summary,
    make_databases,
    print_repetition,
    start_pgbench,
    take_turns,
    turns_parser,
)

from pgfsbench.collect.observation import Observation
from pgfsbench.collect.procfs import parse_schedstat

ARMS = ("none", "batch", "normal")


def threads_cpu_seconds(pid: int) -> float:
    """CPU seconds of all a process's threads so far, to the nanosecond (schedstat)."""
    return sum(
        parse_schedstat(p.read_text()) for p in Path(f"/proc/{pid}/task").glob("*/schedstat")
    )


def child(conninfo: str, server_log: Path, major: int, hz: float, batch: bool) -> None:
    """The observer's own process: watch until stdin closes. It says "ready" with its
    backend's pid once it is watching."""
    observation = Observation(conninfo, major, (), server_log, wait_hz=hz, batch=batch)
    observation.start()
    observation.mark_measured_start()
    backend = observation.pg.backend_pid if observation.pg else None
    print(f"ready {backend}", flush=True)
    sys.stdin.read()
    result = observation.finish()
    print(json.dumps({"errors": result.metrics.get("pg_sampler_errors", [])}), flush=True)


def start_observer(
    server: RawServer, major: int, hz: float, arm: str
) -> tuple[subprocess.Popen[str], int]:
    """The observer's process, watching, and its backend's pid."""
    proc = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--child",
            server.conninfo,
            str(server.logdir / "server.log"),
            "--major",
            str(major),
            "--hz",
            str(hz),
            "--arms",
            arm,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().split()
    if line[:1] != ["ready"] or not line[1].isdigit():
        proc.kill()
        proc.wait()
        raise RuntimeError(f"the observer did not start: {line}")
    return proc, int(line[1])


def one_repetition(
    server: RawServer, args: argparse.Namespace, arm: str, rep: int
) -> tuple[tuple[int, int], dict[str, float]]:
    """(transactions of the watched lane, of the other) in equal running time, and what
    the observer used per second of the watched lane's running time."""
    watched_db, plain_db = DATABASES if rep % 2 == 0 else DATABASES[::-1]
    observer: subprocess.Popen[str] | None = None
    try:
        if arm != "none":
            observer, backend = start_observer(server, args.major, args.hz, arm)
        lanes = (
            Lane(
                start_pgbench(server, watched_db),
                watched_db,
                riders=(observer,) if observer else (),
            ),
            Lane(start_pgbench(server, plain_db), plain_db),
        )
        cpu_before: tuple[float, float] | None = None

        def counted() -> None:  # the observer is stopped: its CPU as the turns begin
            nonlocal cpu_before
            if observer is not None:
                cpu_before = (threads_cpu_seconds(observer.pid), threads_cpu_seconds(backend))

        counts = take_turns(
            server, lanes, (rep // 2) % 2, args.seconds, args.slot, on_stopped=counted
        )
        cost: dict[str, float] = {}
        if observer is not None and cpu_before is not None:
            sampler = threads_cpu_seconds(observer.pid) - cpu_before[0]
            answering = threads_cpu_seconds(backend) - cpu_before[1]
            on = lanes[0].running_s
            cost = {"sampler_cpu_pct": 100 * sampler / on, "backend_cpu_pct": 100 * answering / on}
            observer.send_signal(signal.SIGCONT)
            out, _ = observer.communicate(timeout=30)
            errors = json.loads(out.strip().splitlines()[-1])["errors"]
            if errors:
                raise RuntimeError(f"the observer's queries failed: {errors}")
        return counts, cost
    finally:
        if observer is not None and observer.poll() is None:
            observer.kill()
            observer.wait()


def measure(work: Path, args: argparse.Namespace) -> dict[str, dict[str, object]]:
    arms = args.arms.split(",")
    counts: dict[str, list[tuple[int, int]]] = {a: [] for a in arms}
    costs: dict[str, list[dict[str, float]]] = {a: [] for a in arms}
    with raw_server(work, Path(args.bindir)) as server:
        make_databases(server)
        for rep in range(args.reps):
            for arm in arms if rep % 2 == 0 else arms[::-1]:
                n, cost = one_repetition(server, args, arm, rep)
                counts[arm].append(n)
                costs[arm].append(cost)
            print_repetition(rep, counts, args.seconds)
    result: dict[str, dict[str, object]] = {}
    for arm in arms:
        label = {
            "none": "neither watched",
            "batch": "watched (SCHED_BATCH)",
            "normal": "watched (normal policy)",
        }[arm]
        result[arm] = arm_summary(label, counts[arm])
        if costs[arm] and costs[arm][0]:
            sampler = statistics.median(c["sampler_cpu_pct"] for c in costs[arm])
            backend = statistics.median(c["backend_cpu_pct"] for c in costs[arm])
            print(
                f"{'':<30} the observer's CPU (median): {sampler:.3f}% of a core, "
                f"{sampler + backend:.3f}% with its backend, per second watched"
            )
            result[arm].update(
                {
                    "sampler_cpu_pct": sampler,
                    "observer_cpu_pct": sampler + backend,
                    "costs": costs[arm],
                }
            )
    return result


def main() -> None:
    parser = turns_parser(__doc__, 20, 0.25, "none,batch", f"of {', '.join(ARMS)}")
    parser.add_argument("--hz", type=float, default=10.0, help="wait-event sampling rate")
    parser.add_argument("--major", type=int, default=15, help="the server's major version")
    parser.add_argument(
        "--child", nargs=2, metavar=("CONNINFO", "SERVER_LOG"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        child(args.child[0], Path(args.child[1]), args.major, args.hz, args.arms == "batch")
        return
    for arm in args.arms.split(","):
        if arm not in ARMS:
            parser.error(f"bad arm {arm!r}: one of {', '.join(ARMS)}")
    measure_in_workdir(
        "pgfsb-obsturns-",
        lambda work: measure(work, args),
        args.save,
        {"reps": args.reps, "seconds": args.seconds, "slot": args.slot, "hz": args.hz},
    )


if __name__ == "__main__":
    main()
