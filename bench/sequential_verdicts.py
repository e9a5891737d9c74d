#!/usr/bin/env python3
"""What pgfsbench's verdicts are worth, by simulation through its real code: both paths a
campaign takes, `repetitions = "auto"` (analysis/auto.plan_round, round after round) and a
fixed number of runs (analysis/compare.compare and family_wise, as the summary takes them),
via analysis/simulate.py.

The worlds (cells truly alike on the campaign's estimand unless an effect is given):
- normal noise at one CV (k = 1, 4, 8, 12; CV 1-10%);
- unequal noise: cells at CV 10% beside a baseline at 2%, one noisy cell among steady ones,
  a noisy baseline;
- mixtures (a checkpoint in some windows and not others), their cause recorded in each run
  (its stratum): every cell bimodal (half the runs 30-50% slower), the baseline bimodal
  (20% of runs 20-30% slower), one side bimodal and the other steady; and the same
  worlds with the cause NOT recorded (each side's interval then allows for a slow mode
  its runs may have missed: analysis/hidden.py);
- drift over the campaign, AR(1) noise between successive runs (0.5), heavy tails
  (Student's t, 3 df), one run a cell disturbed by a neighbour (and caught);
- whole-cycle windows (one stratum by design);
- a true 10% and 5% difference (power) and the final interval's coverage.

Each world's share of families with a false "faster" or "slower" (family-wise) with its
95% Wilson interval, power, coverage and the runs a family took.

    .venv/bin/python bench/sequential_verdicts.py [--families 2000] [--save F.json]

No root, no PostgreSQL: pure arithmetic; about 10 minutes for 2,000 families on this VM.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pgfsbench.analysis.simulate import World, run_many

MIX_ALL = {"mix_p": 0.5, "mix_drop": (0.3, 0.5), "mix_who": "all"}
MIX_BASE = {"mix_p": 0.2, "mix_drop": (0.2, 0.3), "mix_who": "baseline"}
MIX_ONE = {"mix_p": 0.3, "mix_drop": (0.2, 0.4), "mix_who": "first"}


def grid() -> list[World]:
    worlds = [
        World(f"normal CV {cv:.0%} k={k}", k, cv=cv)
        for k in (1, 4, 8, 12)
        for cv in (0.01, 0.05, 0.10)
    ]
    worlds += [
        World("cells 10%, baseline 2%, k=4", 4, cv=0.10, cv_baseline=0.02),
        World("one cell 10% among 1%, k=8", 8, cv=0.01, cv_first=0.10),
        World("baseline 10% among 2%, k=3", 3, cv=0.02, cv_baseline=0.10),
        World("every cell bimodal, k=4", 4, cv=0.02, **MIX_ALL),  # type: ignore[arg-type]
        World("baseline bimodal, k=3", 3, cv=0.02, **MIX_BASE),  # type: ignore[arg-type]
        World("one side bimodal, k=1", 1, cv=0.02, **MIX_ONE),  # type: ignore[arg-type]
        World(
            "baseline bimodal, cause NOT recorded, k=3",
            3,
            cv=0.02,
            labelled=False,
            **MIX_BASE,  # type: ignore[arg-type]
        ),
        World(
            "every cell bimodal, cause NOT recorded, k=4",
            4,
            cv=0.02,
            labelled=False,
            **MIX_ALL,  # type: ignore[arg-type]
        ),
        World(
            "one side bimodal, cause NOT recorded, k=1",
            1,
            cv=0.02,
            labelled=False,
            **MIX_ONE,  # type: ignore[arg-type]
        ),
        World("normal CV 5%, NOT recorded, k=4", 4, cv=0.05, labelled=False),
        World("drift 0.2%/run, k=4", 4, cv=0.03, drift_per_run=0.002),
        World("AR(1) 0.5, k=4", 4, cv=0.05, ar1=0.5),
        World("heavy tails (t3), k=4", 4, cv=0.05, heavy_tail=True),
        World("one disturbed run a cell, k=4", 4, cv=0.03, disturbed_per_cell=1),
        World("whole cycles, CV 5%, k=4", 4, cv=0.05, cycles=True),
        World("true +10%, CV 2%, k=4", 4, cv=0.02, effect=0.10, most=16),
        World("true +5%, CV 2%, k=4", 4, cv=0.02, effect=0.05, most=16),
        World("true -10%, CV 5%, k=4", 4, cv=0.05, effect=-0.10, most=16),
        World("true +10%, baseline bimodal, k=3", 3, cv=0.02, effect=0.10, most=16, **MIX_BASE),  # type: ignore[arg-type]
        World(
            "true +10%, baseline bimodal, NOT recorded, k=3",
            3,
            cv=0.02,
            effect=0.10,
            most=16,
            labelled=False,
            **MIX_BASE,  # type: ignore[arg-type]
        ),
        World(
            "true -30%, baseline bimodal, NOT recorded, k=3",
            3,
            cv=0.05,
            effect=-0.30,
            most=16,
            labelled=False,
            **MIX_BASE,  # type: ignore[arg-type]
        ),
    ]
    return worlds


PATHS = ("auto", "fixed 3", "fixed 5", "fixed 10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--families", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--save", type=Path)
    parser.add_argument("--only", default="", help="only the worlds whose name holds this")
    args = parser.parse_args()
    rows = []
    print(f"{'world':46} {'path':8} | false [95% CI]        | power  | cover (of n)  | runs")
    for i, world in enumerate(grid()):
        if args.only not in world.name:
            continue
        for j, path in enumerate(args.paths.split(",")):
            started = time.monotonic()
            s = run_many(world, args.families, args.seed + 100 * i + j, path)
            power = "-" if s.power is None else f"{s.power:.3f}"
            cover = "-" if s.coverage is None else f"{s.coverage:.3f} ({s.intervals})"
            print(
                f"{world.name:46} {path:8} | {s.false_rate:6.2%} [{s.false_ci[0]:.2%}, "
                f"{s.false_ci[1]:.2%}] | {power:>6} | {cover:>13} | {s.runs_per_family:6.1f}"
                f"  ({time.monotonic() - started:.0f} s)",
                flush=True,
            )
            rows.append(s.as_dict())
    if args.save:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
        args.save.write_text(
            json.dumps(
                {"head": head, "families": args.families, "seed": args.seed, "rows": rows},
                indent=1,
            )
            + "\n"
        )


if __name__ == "__main__":
    main()
