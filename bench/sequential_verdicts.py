#!/usr/bin/env python3
"""What `repetitions = "auto"`'s verdicts are worth, by simulation through its real code
(analysis/sequential.py's `next_round` and `group_verdicts`, via analysis/simulate.py):

- identical cells (k = 1, 4, 8 against a baseline; CV 1%, 2%, 5%, 10%; a slow drift; a
  heavy tail): the share of matrices with at least one false "faster" or "slower"
  (family-wise), with its 95% Wilson interval;
- a true 10% difference at CV 2%: the share of matrices where it is found within
  repetitions_max;
- unequal noise: a baseline at CV 10% among cells at 2%, one cell at 10% or 20% among
  cells at 1% or 2%, cells at 10% beside a baseline at 2% (each comparison's interval has
  its own two variances; the baseline's share of a round follows its spread against the
  open cells'); power beside a noisy baseline;
- runs a matrix takes, against fixed 3 and 5 repetitions (k + 1 cells x 3 or 5).

    .venv/bin/python bench/sequential_verdicts.py [--matrices 2000] [--save F.json]

No root, no PostgreSQL: pure arithmetic, a few minutes on this VM.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pgfsbench.analysis.simulate import World, run_many


def grid() -> list[World]:
    worlds = [World(k, cv) for k in (1, 4, 8) for cv in (0.01, 0.02, 0.05, 0.10)]
    worlds += [World(4, 0.02, drift_per_run=0.002), World(4, 0.02, heavy_tail=True)]
    worlds += [World(k, 0.02, effect=0.10) for k in (1, 4, 8)]
    # unequal noise: a noisy baseline among steady cells, one noisy cell among steady ones
    worlds += [World(k, 0.02, cv_baseline=0.10) for k in (1, 3)]
    worlds += [World(4, 0.02, cv_first=0.10), World(8, 0.01, cv_first=0.10)]
    worlds += [World(8, 0.01, cv_first=0.20), World(4, 0.10, cv_baseline=0.02)]
    worlds += [World(4, 0.02, effect=0.10, cv_baseline=0.05)]
    worlds += [World(3, 0.02, effect=0.10, cv_baseline=0.10, most=16)]
    return worlds


def cv_text(cv: float | None) -> str:
    return "-" if cv is None else f"{cv:.0%}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--matrices", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261128)
    parser.add_argument("--save", type=Path)
    args = parser.parse_args()
    rows = []
    print(
        f"{'k':>2} {'CV':>5} {'base':>5} {'first':>5} {'effect':>6} {'drift':>6} {'tail':>5} "
        f"{'max':>3} "
        "| false verdicts [95% CI]"
        f"       | power  | runs/matrix (fixed 3: , fixed 5: )"
    )
    for i, world in enumerate(grid()):
        started = time.monotonic()
        s = run_many(world, args.matrices, args.seed + i)
        fixed3, fixed5 = 3 * (world.cells + 1), 5 * (world.cells + 1)
        power = "-" if s.power is None else f"{s.power:.3f}"
        print(
            f"{world.cells:>2} {world.cv:>5.0%} {cv_text(world.cv_baseline):>5} "
            f"{cv_text(world.cv_first):>5} {world.effect:>6.0%} {world.drift_per_run:>6.3f} "
            f"{'t3' if world.heavy_tail else 'norm':>5} {world.most:>3} | {s.false_rate:6.2%} "
            f"[{s.false_ci[0]:.2%}, {s.false_ci[1]:.2%}] | {power:>6} | "
            f"{s.runs_per_matrix:5.1f} ({fixed3}, {fixed5})  {time.monotonic() - started:.0f} s",
            flush=True,
        )
        rows.append({**asdict(s), "fixed3_runs": fixed3, "fixed5_runs": fixed5})
    if args.save:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        args.save.write_text(
            json.dumps(
                {"commit": commit, "when": time.strftime("%Y-%m-%d %H:%M"), "rows": rows},
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
