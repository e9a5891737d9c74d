"""What do the samplers alone cost? Switched on and off inside one long pgbench run.

Pairs of whole runs are noisy here (a new pgbench lands on the 2 vCPUs differently each
time: ±10-15% from run to run), and the transaction log cannot change mid-run; the
samplers can. One hand-made server on tmpfs (select-only, prepared: CPU-bound, the worst
case), one `pgbench -T -P 1` without a transaction log, and pgfsbench's own Observation
(the sampler thread and its backend, exactly as a run uses them) started and finished
in blocks aligned on pgbench's progress seconds: off on, on off, ... The first second of
every block is left out (the observer connecting or finishing), the others compared
cycle by cycle: the TPS ratio on / off (geometric mean, 95% CI) and what watching added
to pgbench's CPU per transaction. Needs root.

    .venv/bin/python bench/sampler_toggle.py [--cycles 100] [--block 3] [--hz 10]
        [--sched batch|normal|both] [--bindir /usr/lib/postgresql/15/bin] [--save F.json]

--sched both gives every other on-block to each scheduling policy of the observer
(SCHED_BATCH, the default, and the normal one) and reports each policy's ratio apart.
--hz raises the sampling rate to make the cost visible (its cost per tick is then the
figure divided by hz / 10). The README has what it gave.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from rawserver import RawServer, raw_server

from pgfsbench.analysis.observer import geometric_ci
from pgfsbench.collect.observation import Observation
from pgfsbench.collect.procfs import process_cpu_seconds


def child_named(pid: int, name: str, timeout: float = 5.0) -> int:
    """The child of ``pid`` running ``name`` (runuser's PAM session may start others)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for kid in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            try:
                if Path(f"/proc/{kid}/comm").read_text().strip() == name:
                    return int(kid)
            except OSError:
                continue
        time.sleep(0.01)
    raise RuntimeError(f"pid {pid} started no {name}")


def preempted(pids: list[int]) -> int:
    """Involuntary context switches of these processes so far, all their threads: each one
    a task taken off its CPU while it could still run (what an observer's wake-up does to
    pgbench or a backend when it preempts it)."""
    total = 0
    for pid in pids:
        for status in Path(f"/proc/{pid}/task").glob("*/status"):
            try:
                text = status.read_text()
            except OSError:  # a thread that ended
                continue
            for line in text.splitlines():
                if line.startswith("nonvoluntary_ctxt_switches:"):
                    total += int(line.split()[1])
    return total


def workload_backends(server: RawServer, exclude: set[int]) -> list[int]:
    """The server's client backends now (pgbench's, once it is connected)."""
    lock = next(server.sock.glob(".s.PGSQL.*.lock"))
    postmaster = int(lock.read_text().split()[0])
    out = []
    for kid in Path(f"/proc/{postmaster}/task/{postmaster}/children").read_text().split():
        try:
            cmd = Path(f"/proc/{kid}/cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if "[local]" in cmd and int(kid) not in exclude:
            out.append(int(kid))
    return out


def measure(server: RawServer, args: argparse.Namespace) -> dict[str, object]:
    # block k of the schedule: on in the middle two blocks of every four (off on on off)
    schedule = [k % 4 in (1, 2) for k in range(2 * args.cycles)]
    # the observer's scheduling policy in each block (--sched both: the two on-blocks of
    # every four take one each, in turns, so each policy is as often first as second)
    policy = [
        args.sched
        if args.sched != "both"
        else ("batch" if (k // 4 + (k % 4 == 2)) % 2 == 0 else "normal")
        for k in range(len(schedule))
    ]
    seconds = args.block * len(schedule) + 3
    proc = subprocess.Popen(
        server.pgbench(
            "-S",
            "-M",
            "prepared",
            f"-c{args.clients}",
            f"-j{args.clients}",
            "-n",
            f"-T{seconds}",
            "-P1",
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    pgbench = child_named(proc.pid, "pgbench")
    observation: Observation | None = None
    # per progress second: (block index or None, keep, tps, pgbench CPU seconds,
    # involuntary context switches of pgbench and of its backends)
    seconds_seen: list[tuple[int | None, bool, float, float, int]] = []
    last_cpu = process_cpu_seconds(pgbench) or 0.0
    watched: list[int] = [pgbench]  # pgbench, then its backends too once connected
    last_ics = preempted(watched)
    n = 0
    try:
        for line in proc.stderr:
            if not line.startswith("progress:"):
                continue
            second_tps = float(line.split()[3])
            cpu = process_cpu_seconds(pgbench) or last_cpu
            ics = preempted(watched)
            if n == 1:  # pgbench's clients are connected; no observer yet
                watched += workload_backends(server, set())
                ics = preempted(watched)
            k = (n - 2) // args.block if n >= 2 else None
            block = k if k is not None and k < len(schedule) else None
            keep = block is not None and (n - 2) % args.block != 0
            seconds_seen.append((block, keep, second_tps, cpu - last_cpu, ics - last_ics))
            last_cpu, last_ics, n = cpu, ics, n + 1
            # switch for the next second, right after this one's report
            nxt = (n - 2) // args.block if n >= 2 else None
            want = nxt is not None and nxt < len(schedule) and schedule[nxt]
            batch = want and nxt is not None and policy[nxt] == "batch"
            if want and observation is not None and observation.batch != batch:
                observation.finish()  # the next block watches under the other policy
                observation = None
            if want and observation is None:
                observation = Observation(
                    server.conninfo,
                    args.major,
                    (),
                    server.logdir / "server.log",
                    wait_hz=args.hz,
                    batch=batch,
                )
                observation.start()
                observation.mark_measured_start()
            elif not want and observation is not None:
                observation.finish()
                observation = None
    finally:
        if observation is not None:
            observation.finish()
        proc.wait()
    tps: dict[tuple[int, bool], list[float]] = {}
    cpu_per_tx: dict[tuple[int, bool], list[float]] = {}
    switches: dict[tuple[int, bool], list[int]] = {}
    for block, keep, t, cpu, ics in seconds_seen:
        if block is None or not keep or t <= 0:
            continue
        key = (block // 2, schedule[block])
        tps.setdefault(key, []).append(t)
        cpu_per_tx.setdefault(key, []).append(1e6 * cpu / t)
        switches.setdefault(key, []).append(ics)
    off_us = statistics.fmean(x for (_, on), v in cpu_per_tx.items() if not on for x in v)
    off_ics = statistics.fmean(x for (_, on), v in switches.items() if not on for x in v)
    print(
        f"pgbench and its {len(watched) - 1} backends: {off_ics:,.0f} involuntary context "
        "switches a second not watched"
    )
    out: dict[str, object] = {
        "hz": args.hz,
        "block": args.block,
        "sched": args.sched,
        "pgbench_cpu_us_per_tx_off": off_us,
        "involuntary_switches_per_s_off": off_ics,
    }
    for name in sorted(set(policy)):
        # a cycle (block // 2) is one off block and one on block: its policy is the on's
        cycles = sorted(
            {
                c
                for c, _ in tps
                if (c, True) in tps
                and (c, False) in tps
                and policy[2 * c + (not schedule[2 * c])] == name
            }
        )
        ratios = [
            statistics.fmean(tps[(c, True)]) / statistics.fmean(tps[(c, False)]) for c in cycles
        ]
        extra = [
            statistics.fmean(cpu_per_tx[(c, True)]) - statistics.fmean(cpu_per_tx[(c, False)])
            for c in cycles
        ]
        more = [
            statistics.fmean(switches[(c, True)]) - statistics.fmean(switches[(c, False)])
            for c in cycles
        ]
        if not ratios:
            continue
        ratio, low, high = geometric_ci(ratios)
        mean = statistics.fmean(extra)
        half = (
            1.96 * statistics.stdev(extra) / math.sqrt(len(extra)) if len(extra) > 1 else math.nan
        )
        print(
            f"samplers at {args.hz:g} Hz ({name}), {len(ratios)} cycles of {args.block} s "
            f"blocks in one pgbench run: TPS on / off {ratio:.4f}, 95% CI "
            f"[{low or math.nan:.4f}, {high or math.nan:.4f}] "
            f"(median {statistics.median(ratios):.4f})"
        )
        print(
            f"  pgbench's CPU per transaction: {off_us:.2f} us off, {mean:+.3f} us on "
            f"(95% CI [{mean - half:+.3f}, {mean + half:+.3f}]; 10 ms clock ticks)"
        )
        ics_mean = statistics.fmean(more)
        ics_half = (
            1.96 * statistics.stdev(more) / math.sqrt(len(more)) if len(more) > 1 else math.nan
        )
        print(
            f"  their involuntary context switches: {ics_mean:+.1f} a second when watched "
            f"(95% CI [{ics_mean - ics_half:+.1f}, {ics_mean + ics_half:+.1f}])"
        )
        out[name] = {
            "involuntary_switches_per_s_extra": [
                ics_mean,
                ics_mean - ics_half,
                ics_mean + ics_half,
            ],
            "cycles": len(ratios),
            "ratios": ratios,
            "ratio": ratio,
            "ci": [low, high],
            "pgbench_cpu_us_per_tx_extra": [mean, mean - half, mean + half],
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=100)
    parser.add_argument("--block", type=int, default=3, help="seconds per block (>= 2)")
    parser.add_argument("--hz", type=float, default=10.0, help="wait-event sampling rate")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument(
        "--sched",
        choices=("batch", "normal", "both"),
        default="batch",
        help="the observer's scheduling policy (both: in turns, compared)",
    )
    parser.add_argument("--bindir", default="/usr/lib/postgresql/15/bin")
    parser.add_argument("--major", type=int, default=15, help="the server's major version")
    parser.add_argument("--save", type=Path, help="write the cycles' ratios to this JSON file")
    args = parser.parse_args()
    if args.block < 2:
        parser.error("--block must be at least 2 (its first second is left out)")
    with tempfile.TemporaryDirectory(prefix="pgfsb-toggle-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        with raw_server(work, Path(args.bindir)) as server:
            result = measure(server, args)
    if args.save:
        args.save.write_text(json.dumps(result, indent=1) + "\n")
        print(f"saved to {args.save}")


if __name__ == "__main__":
    main()
