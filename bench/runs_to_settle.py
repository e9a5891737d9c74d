#!/usr/bin/env python3
"""How many runs a cell `repetitions = "auto"` needs to settle a true difference against
the baseline, given the noise a campaign measured: each cell's own log-scale sd and the
baseline's (the campaign's interval has each comparison's two variances, Welch's), then
the first n at which the mixture interval (analysis/sequential.interval) around the
expected difference excludes 0 at the family-wise level of k comparisons, the cell and
the baseline at n runs each. Beside it, the most a fixed design could do with the same
noise: the first n at which Welch's t test at alpha/k (Bonferroni, the first step of
Holm) on the expected data excludes 0, and the n at which it does so in 80% of campaigns
(its power, from the noncentral t).

    .venv/bin/python bench/runs_to_settle.py RESULTS.json [...] --effect -0.12 --effect -0.09

RESULTS.json: a bench result with "runs" ([{cell, throughput or tps}...]), at its top or
in its parts; the cell's first path part names it (several files: their runs together).
The baseline: --baseline, or the first cell met. No root, no PostgreSQL.
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
    parser.add_argument("--baseline", help="the baseline cell (default: the first met)")
    parser.add_argument("--comparisons", type=int, help="k (default: cells - 1)")
    parser.add_argument("--minutes-a-run", type=float, default=2.3)
    args = parser.parse_args()
    by: dict[str, list[float]] = {}
    for path in args.results:
        for r in runs_in(json.loads(path.read_text())):
            tps = r.get("throughput") or r.get("tps")
            if r.get("status", "ok") == "ok" and tps:
                by.setdefault(r["cell"].split("/")[0], []).append(math.log(tps))
    base = args.baseline or next(iter(by))
    k = args.comparisons or max(1, len(by) - 1)
    sd = {c: statistics.stdev(v) for c, v in by.items() if len(v) > 1}
    print(
        "log-scale sd by cell: " + ", ".join(f"{c} {s:.3f} (n={len(by[c])})" for c, s in sd.items())
    )
    minutes = (k + 1) * args.minutes_a_run
    for effect in args.effect or [-0.10]:
        d = math.log1p(effect)
        for cell in (c for c in sd if c != base):
            seq = sequential_runs(d, sd[base], sd[cell], ALPHA / k)
            expected, powered = fixed_design(d, sd[base], sd[cell], ALPHA / k)
            print(
                f"{effect:+.0%} {cell} vs {base} (level {ALPHA}/{k}): the campaign's interval "
                f"at {seq} runs a cell ({seq * minutes:.0f} min for {k + 1} cells at "
                f"{args.minutes_a_run:g} min a run); a fixed design at {expected} on the "
                f"expected data ({expected * minutes:.0f} min), in 80% of campaigns at "
                f"{powered} ({powered * minutes:.0f} min)"
            )


def welch(sa: float, sb: float, n: int) -> tuple[float, float]:
    """Welch's standard error with n runs a side, and its degrees of freedom."""
    va, vb = sa * sa / n, sb * sb / n
    return math.sqrt(va + vb), (va + vb) ** 2 / ((va * va + vb * vb) / (n - 1))


def sequential_runs(d: float, sa: float, sb: float, level: float) -> int:
    """The first n at which the campaign's interval on the expected data excludes 0."""
    for n in range(3, 10_000):
        se, nu = welch(sa, sb, n)
        found = interval(d, se, nu, n / 2, level)
        if found is not None and (found[1] < 0 or found[0] > 0):
            return n
    return 10_000


def fixed_design(d: float, sa: float, sb: float, level: float) -> tuple[int, int]:
    """Runs a side for Welch's t test at ``level`` (two-sided) to exclude 0 on the
    expected data, and to do so with 80% power."""
    expected = None
    for n in range(2, 10_000):
        se, nu = welch(sa, sb, n)
        crit = float(stats.t.ppf(1 - level / 2, nu))
        shift = abs(d) / se
        if expected is None and shift > crit:
            expected = n
        if float(stats.nct.sf(crit, nu, shift)) >= 0.8:
            return expected or n, n
    return expected or 10_000, 10_000


def runs_in(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A result's "runs", and those of each part it holds ({"sequential": {"runs": ...}})."""
    found = list(doc.get("runs", []))
    for value in doc.values():
        if isinstance(value, dict):
            found += runs_in(value)
    return found


if __name__ == "__main__":
    main()
