#!/usr/bin/env python3
"""How many runs a cell `repetitions = "auto"` needs to settle a true difference, given the
noise a campaign measured: the log-scale sd pooled over its cells (as
analysis/sequential.group_verdicts pools it), then the first n at which the mixture
interval (analysis/sequential.interval) around the expected difference excludes 0 at the
family-wise level of k comparisons, every cell and the baseline at n runs. Beside it, the
most a fixed design could do with the same noise: the first n at which a t-test at
alpha/k (Bonferroni, the first step of Holm) on the expected data excludes 0, and the n
at which it does so in 80% of campaigns (its power, from the noncentral t).

    .venv/bin/python bench/runs_to_settle.py RESULTS.json [...] --effect -0.12 --effect -0.09

RESULTS.json: a bench result with "runs" ([{cell, throughput or tps}...]), at its top or
in its parts; the cell's first path part names it (several files: their runs together).
No root, no PostgreSQL.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from scipy import stats

from pgfsbench.analysis.sequential import ALPHA, interval


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, nargs="+")
    parser.add_argument("--effect", type=float, action="append", help="true ratio - 1")
    parser.add_argument("--comparisons", type=int, help="k (default: cells - 1)")
    parser.add_argument("--minutes-a-run", type=float, default=2.3)
    args = parser.parse_args()
    by: dict[str, list[float]] = {}
    for path in args.results:
        for r in runs_in(json.loads(path.read_text())):
            tps = r.get("throughput") or r.get("tps")
            if r.get("status", "ok") == "ok" and tps:
                by.setdefault(r["cell"].split("/")[0], []).append(math.log(tps))
    ss = sum((x - statistics.fmean(v)) ** 2 for v in by.values() if len(v) > 1 for x in v)
    dof = sum(len(v) - 1 for v in by.values() if len(v) > 1)
    s = math.sqrt(ss / dof)
    k = args.comparisons or max(1, len(by) - 1)
    spread = [f"{c} {statistics.stdev(v):.3f} (n={len(v)})" for c, v in by.items() if len(v) > 1]
    print("log-scale sd by cell: " + ", ".join(spread) + f"; pooled {s:.3f}")
    for effect in args.effect or [-0.10]:
        d = math.log1p(effect)
        for n in range(3, 1000):
            found = interval(d, s / math.sqrt(n / 2), len(by) * (n - 1), n / 2, ALPHA / k)
            if found is not None and (found[1] < 0 or found[0] > 0):
                total = (k + 1) * n
                print(
                    f"{effect:+.0%}: settled at about {n} runs a cell (level {ALPHA}/{k}); "
                    f"{total} runs, {total * args.minutes_a_run:.0f} min at "
                    f"{args.minutes_a_run:g} min a run"
                )
                break
        print("   " + fixed_design(d, s, k, len(by), args.minutes_a_run))


def runs_in(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A result's "runs", and those of each part it holds ({"sequential": {"runs": ...}})."""
    found = list(doc.get("runs", []))
    for value in doc.values():
        if isinstance(value, dict):
            found += runs_in(value)
    return found


def fixed_design(d: float, s: float, k: int, cells: int, minutes: float) -> str:
    """The fixed design's runs a cell: the t-test at alpha/k on the expected data, and
    with 80% power (two-sided, pooled variance with cells * (n - 1) degrees of freedom)."""
    expected = powered = None
    for n in range(2, 1000):
        dof = cells * (n - 1)
        crit = float(stats.t.ppf(1 - ALPHA / k / 2, dof))
        shift = abs(d) / (s * math.sqrt(2 / n))
        if expected is None and shift > crit:
            expected = n
        if float(stats.nct.sf(crit, dof, shift)) >= 0.8:
            powered = n
            break
    assert expected is not None and powered is not None
    return (
        f"a fixed design (t-test at {ALPHA}/{k}): excludes 0 on the expected data at {expected} "
        f"runs a cell ({(k + 1) * expected * minutes:.0f} min), in 80% of campaigns at "
        f"{powered} ({(k + 1) * powered * minutes:.0f} min)"
    )


if __name__ == "__main__":
    main()
