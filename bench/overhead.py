"""Does measuring change what is measured? TPS with every sampler on vs. all off.

The worst case for overhead: PostgreSQL on tmpfs, select-only with prepared statements
(CPU-bound, tens of thousands of transactions a second on 2 cores, so the pgbench
transaction log and the samplers compete with it). Runs are alternated (off, on, off,
on, ...) so drift hits both sides alike. Prints each pair's ratio, then the ratio of means
as the geometric mean of the paired ratios with its 95% confidence interval (t on the log
ratios), and what the samplers themselves cost in CPU (their threads' time, in % of one
core, during the measured phase). Needs root.

    .venv/bin/python bench/overhead.py [--pairs 10] [--duration 20s] [--clients 2]

--clients N sets the clients (and pgbench threads). On this 2-core VM, --clients 1 was far
noisier than 2, not quieter: 2,900-7,200 TPS from run to run (a single client waits on
every round trip, so each wake-up latency of the VM's vCPUs shows), ratio 0.909 with a 95%
CI of [0.697, 1.184] over 10 pairs of 10 s. Use the default.
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

from pgfsbench.analysis.stats import t_quantile

SPEC = """
name = "overhead"
[defaults]
scale = 10
clients = {clients}
threads = {clients}
warmup = "5s"
repetitions = 1
[storage.ram]
fs = "tmpfs"
size = "2G"
[workload.select-only]
builtin = "select-only"
protocol = "prepared"
"""


def one_run(spec: Path, results: Path, workdir: Path, samplers: bool,
            duration: str) -> tuple[float, dict[str, float]]:
    subprocess.run([sys.executable, "-m", "pgfsbench", "run", str(spec), "--results",
                    str(results), "--workdir", str(workdir), "--set", f"duration={duration}",
                    "--set", f"samplers={'true' if samplers else 'false'}"],
                   check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-m", "pgfsbench", "results", "list", "--results",
                          str(results), "--json"], check=True, capture_output=True, text=True)
    last = json.loads(out.stdout)[-1]
    assert last["status"] == "ok", last
    shown = subprocess.run([sys.executable, "-m", "pgfsbench", "results", "show",
                            str(last["run_id"]), "--results", str(results), "--json"],
                           check=True, capture_output=True, text=True)
    observer = (json.loads(shown.stdout).get("metrics") or {}).get("observer") or {}
    return float(last["tps"]), observer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=10)
    parser.add_argument("--duration", default="20s")
    parser.add_argument("--clients", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgfsb-overhead-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        spec = work / "overhead.toml"
        spec.write_text(SPEC.format(clients=args.clients))
        ratios, observer = [], []
        for i in range(1, args.pairs + 1):
            bare, _ = one_run(spec, work / "r.sqlite", work / "w", False, args.duration)
            measured, obs = one_run(spec, work / "r.sqlite", work / "w", True, args.duration)
            ratios.append(measured / bare)
            observer.append(obs)
            print(f"pair {i}: samplers off {bare:,.0f} tps, on {measured:,.0f} tps, "
                  f"ratio {measured / bare:.4f}; samplers used "
                  f"{obs.get('sampler_cpu_pct_of_a_core', float('nan')):.2f}% of a core",
                  flush=True)
        logs = [math.log(r) for r in ratios]
        centre = statistics.fmean(logs)
        half = (t_quantile(0.975, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
                if len(logs) > 1 else float("nan"))
        cpu = [o["sampler_cpu_pct_of_a_core"] for o in observer
               if o.get("sampler_cpu_pct_of_a_core") is not None]
        print(f"TPS ratio (samplers on / off), {len(ratios)} alternated pairs of "
              f"{args.duration}, {args.clients} client(s): {math.exp(centre):.4f}, "
              f"95% CI [{math.exp(centre - half):.4f}, "
              f"{math.exp(centre + half):.4f}] (median {statistics.median(ratios):.4f}, "
              f"min {min(ratios):.4f}, max {max(ratios):.4f})")
        if cpu:
            print(f"samplers' own CPU: median {statistics.median(cpu):.3f}% of one core "
                  f"(max {max(cpu):.3f}%)")


if __name__ == "__main__":
    main()
