"""Does measuring change what is measured? TPS with every sampler on vs. all off.

The worst case for overhead: PostgreSQL on tmpfs, select-only with prepared statements
(CPU-bound, tens of thousands of transactions a second on 2 cores, so the pgbench
transaction log and the samplers compete with it). Runs are alternated (off, on, off,
on, ...) so drift hits both sides alike; prints each pair's ratio, the median and spread.
Needs root.

    .venv/bin/python bench/overhead.py [--pairs 5] [--duration 20s]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

SPEC = """
name = "overhead"
[defaults]
scale = 10
clients = 2
threads = 2
warmup = "5s"
repetitions = 1
[storage.ram]
fs = "tmpfs"
size = "2G"
[workload.select-only]
builtin = "select-only"
protocol = "prepared"
"""


def one_run(spec: Path, results: Path, workdir: Path, samplers: bool, duration: str) -> float:
    subprocess.run([sys.executable, "-m", "pgfsbench", "run", str(spec), "--results",
                    str(results), "--workdir", str(workdir), "--set", f"duration={duration}",
                    "--set", f"samplers={'true' if samplers else 'false'}"],
                   check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-m", "pgfsbench", "results", "list", "--results",
                          str(results), "--json"], check=True, capture_output=True, text=True)
    last = json.loads(out.stdout)[-1]
    assert last["status"] == "ok", last
    return float(last["tps"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=5)
    parser.add_argument("--duration", default="20s")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pgfsb-overhead-", dir="/var/tmp") as tmp:
        work = Path(tmp)
        work.chmod(0o755)
        spec = work / "overhead.toml"
        spec.write_text(SPEC)
        ratios = []
        for i in range(1, args.pairs + 1):
            bare = one_run(spec, work / "r.sqlite", work / "w", False, args.duration)
            measured = one_run(spec, work / "r.sqlite", work / "w", True, args.duration)
            ratios.append(measured / bare)
            print(f"pair {i}: samplers off {bare:,.0f} tps, on {measured:,.0f} tps, "
                  f"ratio {measured / bare:.4f}", flush=True)
        spread = (f"min {min(ratios):.4f}, max {max(ratios):.4f}"
                  + (f", stdev {statistics.stdev(ratios):.4f}" if len(ratios) > 1 else ""))
        print(f"TPS ratio (samplers on / off): median {statistics.median(ratios):.4f} "
              f"({spread}, {len(ratios)} pairs of {args.duration})")


if __name__ == "__main__":
    main()
