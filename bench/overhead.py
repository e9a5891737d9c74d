"""Does measuring change what is measured? TPS with every sampler on vs. all off.

The worst case for overhead: PostgreSQL on tmpfs, select-only with prepared statements
(CPU-bound, tens of thousands of transactions a second on 2 cores, so the pgbench
transaction log and the samplers compete with it). Needs root.

    .venv/bin/python bench/overhead.py [--pairs 100] [--duration 5s] [--warmup 1s]
                                       [--clients 2] [--between-runs] [--save F.json]
                                       [--set txlog_max_lines_per_s=50 ...]
    .venv/bin/python bench/overhead.py --pool A.json B.json

(the defaults take about 25 minutes here; the README has what they gave)

By default one campaign, one cell, one server: `samplers = "alternate"` with
`load_per = "cell"` runs 2 x pairs repetitions of the cell on the same loaded server,
watched and not watched in turns (ABBA: off on, on off, ...). Each run still has its own
warm-up; the pair's ratio compares two neighbouring runs of one server, so the run-to-run
noise of a new server (a new tmpfs, initdb, load, buffer placement) is out of it. The
ratio of means is the geometric mean of the pairs' ratios, with its 95% confidence
interval (t on the log ratios); then what the samplers cost in CPU (their threads' time,
in % of one core, during the measured phase), pgbench's own CPU, watched and not, and
what watching added to it pair by pair (the transaction log's cost, with its 95% CI).

--between-runs alternates whole runs instead (a new server for every run: what the first
version of this script did). It is far noisier here: 16 pairs of 20 s gave 1.006, 95% CI
[0.944, 1.073]. --clients N sets the clients (and pgbench threads); on this 2-core VM
--clients 1 was noisier than 2, not quieter (ratio 0.909, CI [0.697, 1.184] between runs).

On this host, when it is busy, a pair's log ratio has an SD of 0.13-0.16 (the throughput
swings ±10% from one second to the next): even 250 pairs leave a CI of ±2%.
`observer_turns.py` measures the same observer with both arms in the same seconds (two
pgbench processes taking turns of 0.25 s): an SD of 0.02 per repetition.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from rawserver import measured_commit

from pgfsbench.analysis.observer import geometric_ci, observer_effects, robust_ratio
from pgfsbench.results.store import Store

SPEC = """
name = "overhead"
[defaults]
scale = 10
clients = {clients}
threads = {clients}
warmup = "{warmup}"
repetitions = {repetitions}
load_per = "{load_per}"
[storage.ram]
fs = "tmpfs"
size = "2G"
[workload.select-only]
builtin = "select-only"
protocol = "prepared"
"""


def pgfsbench(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pgfsbench", *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        # pgfsbench's own words (a refused spec, a failed run), not a traceback of ours
        sys.exit(
            f"pgfsbench {args[0]} exited {done.returncode}:\n"
            f"{done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


def one_run(
    spec: Path, results: Path, workdir: Path, samplers: bool, duration: str
) -> tuple[float, dict[str, float]]:
    pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(workdir),
        "--set",
        f"duration={duration}",
        "--set",
        f"samplers={'true' if samplers else 'false'}",
    )
    last = json.loads(pgfsbench("results", "list", "--results", str(results), "--json"))[-1]
    assert last["status"] == "ok", last
    shown = json.loads(
        pgfsbench("results", "show", str(last["run_id"]), "--results", str(results), "--json")
    )
    observer = (shown.get("metrics") or {}).get("observer") or {}
    return float(last["tps"]), observer


def between_runs(work: Path, args: argparse.Namespace) -> None:
    spec = work / "overhead.toml"
    spec.write_text(
        SPEC.format(clients=args.clients, warmup="5s", repetitions=1, load_per="repetition")
    )
    ratios, observer = [], []
    for i in range(1, args.pairs + 1):
        bare, _ = one_run(spec, work / "r.sqlite", work / "w", False, args.duration)
        measured, obs = one_run(spec, work / "r.sqlite", work / "w", True, args.duration)
        ratios.append(measured / bare)
        observer.append(obs)
        print(
            f"pair {i}: samplers off {bare:,.0f} tps, on {measured:,.0f} tps, "
            f"ratio {measured / bare:.4f}; samplers used "
            f"{obs.get('sampler_cpu_pct_of_a_core', float('nan')):.2f}% of a core",
            flush=True,
        )
    ratio, low, high = geometric_ci(ratios)
    cpu = [
        o["sampler_cpu_pct_of_a_core"]
        for o in observer
        if o.get("sampler_cpu_pct_of_a_core") is not None
    ]
    print(
        f"TPS ratio (samplers on / off), {len(ratios)} alternated pairs of whole runs of "
        f"{args.duration}, {args.clients} client(s): {ratio:.4f}, "
        f"95% CI [{low or math.nan:.4f}, {high or math.nan:.4f}] "
        f"(median {statistics.median(ratios):.4f}, min {min(ratios):.4f}, "
        f"max {max(ratios):.4f})"
    )
    if cpu:
        print(
            f"samplers' own CPU: median {statistics.median(cpu):.3f}% of one core "
            f"(max {max(cpu):.3f}%)"
        )


def in_one_server(work: Path, args: argparse.Namespace) -> None:
    spec = work / "overhead.toml"
    spec.write_text(
        SPEC.format(
            clients=args.clients, warmup=args.warmup, repetitions=2 * args.pairs, load_per="cell"
        )
    )
    results = work / "r.sqlite"
    pgfsbench(
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(work / "w"),
        "--set",
        f"duration={args.duration}",
        "--set",
        "samplers=alternate",
        *(a for kv in args.set for a in ("--set", kv)),
    )
    store = Store(str(results))
    try:
        runs = store.full_runs()
    finally:
        store.close()
    runs.sort(key=lambda r: r.repetition)
    for r in runs:
        o = r.metrics.get("observer") or {}
        print(
            f"run {r.repetition:>2}: {'watched' if o.get('on') else 'not watched':<11} "
            f"{r.status:<6} {r.tps or 0:>10,.0f} tps",
            flush=True,
        )
    effects = observer_effects(runs)
    if not effects:
        sys.exit("no pair of ok runs: see the runs above")
    e = effects[0]
    print(f"pairs' ratios: {', '.join(f'{x:.4f}' for x in e.ratios)}")
    print(
        f"TPS ratio (samplers on / off), {e.pairs} ABBA pairs in one server, "
        f"{args.duration} each after a {args.warmup} warm-up, {args.clients} client(s): "
        f"{e.ratio:.4f}, 95% CI [{e.ci_low or math.nan:.4f}, "
        f"{e.ci_high or math.nan:.4f}] (median "
        f"{statistics.median(e.ratios):.4f}, min {min(e.ratios):.4f}, "
        f"max {max(e.ratios):.4f})"
    )
    print_robust(e.robust)
    if e.sampler_cpu_pct is not None:
        print(f"samplers' own CPU: median {e.sampler_cpu_pct:.3f}% of one core")
    if e.observer_cpu_pct is not None:
        print(
            f"the samplers and the server backend answering them: median "
            f"{e.observer_cpu_pct:.3f}% of one core"
        )
    if e.benchmark_cpu_pct:
        print(
            "pgbench's CPU (median, % of one core): "
            + ", ".join(f"{side} {v:.1f}%" for side, v in e.benchmark_cpu_pct.items())
        )
    if e.benchmark_cpu_us_per_tx:
        print(
            "pgbench's CPU per transaction (median): "
            + ", ".join(f"{side} {v:.2f} us" for side, v in e.benchmark_cpu_us_per_tx.items())
        )
    extra = e.benchmark_cpu_extra_pct
    if extra is not None:
        print(
            f"what watching added to pgbench's CPU, pair by pair: {extra[0]:+.3f} points "
            f"of one core, 95% CI [{extra[1] or math.nan:+.3f}, {extra[2] or math.nan:+.3f}]"
        )
    if e.total_cpu_pct is not None:
        print(
            f"the whole observer (samplers, their backend, pgbench's log): about "
            f"{e.total_cpu_pct:.3f}% of one core"
        )
    if args.save:
        args.save.write_text(
            json.dumps(
                {
                    "pairs": e.pairs,
                    "duration": args.duration,
                    "warmup": args.warmup,
                    "clients": args.clients,
                    "set": args.set,
                    "ratios": e.ratios,
                    "ratio": e.ratio,
                    "ci": [e.ci_low, e.ci_high],
                    "robust": e.robust,
                    "sampler_cpu_pct": e.sampler_cpu_pct,
                    "observer_cpu_pct": e.observer_cpu_pct,
                    "benchmark_cpu_pct": e.benchmark_cpu_pct,
                    "benchmark_cpu_us_per_tx": e.benchmark_cpu_us_per_tx,
                    "benchmark_cpu_extra_pct": extra,
                    "total_cpu_pct": e.total_cpu_pct,
                    "commit": measured_commit(),
                },
                indent=1,
            )
            + "\n"
        )
        print(f"saved to {args.save}")


def pooled(files: list[Path]) -> None:
    """The pairs of several saved runs taken together (each pair was made in one server,
    so pairs from different runs are still paired measurements)."""
    ratios: list[float] = []
    for f in files:
        saved = json.loads(f.read_text())
        ratios += saved["ratios"]
        print(
            f"{f}: {saved['pairs']} pairs, {saved['ratio']:.4f} "
            f"[{saved['ci'][0]:.4f}, {saved['ci'][1]:.4f}]"
        )
    ratio, low, high = geometric_ci(ratios)
    print(
        f"pooled: {len(ratios)} pairs, TPS ratio {ratio:.4f}, 95% CI "
        f"[{low or math.nan:.4f}, {high or math.nan:.4f}] (median "
        f"{statistics.median(ratios):.4f})"
    )
    print_robust(robust_ratio(ratios))


def print_robust(robust: tuple[float, float | None, float | None] | None) -> None:
    """The ratio that a few pairs disturbed by the host's bursts do not move."""
    if robust is None or robust[1] is None or robust[2] is None:
        return
    print(
        f"robust to disturbed pairs: Hodges-Lehmann {robust[0]:.4f}, 95% CI "
        f"[{robust[1]:.4f}, {robust[2]:.4f}] (Wilcoxon signed-rank)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pairs",
        type=int,
        default=100,
        help="at most 500 in one server (a campaign runs 1,000 repetitions "
        "at most); --pool combines saved runs",
    )
    parser.add_argument("--duration", default="5s")
    parser.add_argument("--warmup", default="1s", help="each run's warm-up (in one server)")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument(
        "--between-runs", action="store_true", help="a new server for every run (noisier)"
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="passed to `pgfsbench run` (e.g. txlog_max_lines_per_s=100)",
    )
    parser.add_argument("--save", type=Path, help="write the pairs' ratios to this JSON file")
    parser.add_argument(
        "--pool",
        type=Path,
        nargs="+",
        metavar="JSON",
        help="measure nothing: pool the pairs of runs saved with --save",
    )
    args = parser.parse_args()
    if args.pool:
        pooled(args.pool)
        return
    if not args.between_runs and not 1 <= args.pairs <= 500:
        parser.error("--pairs: 1 to 500 in one server (2 x pairs repetitions of one cell)")
    with tempfile.TemporaryDirectory(prefix="pgfsb-overhead-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        (between_runs if args.between_runs else in_one_server)(work, args)


if __name__ == "__main__":
    main()
