"""What pgfsbench's own work costs a run: `pgfsbench run` of one cell (ext4 on a loop
file, pgbench tpcb-like, 4 clients) against `bench/bare_run.sh`, the same steps scripted by
hand (mkfs, mount, initdb, start, load, warm-up, measure, stop, unmount), in alternating
order (ABBA) so the host's drift hits both.

Three figures, for each scale:
  - pgfsbench's own time: its wall time less the warm-up, the measured phase and the load
    (pgbench -i's wall clock, as the run recorded it, and the load's write-out: the
    checkpoint and sync after it, which the bare script does too), as a share of its wall
    time (and with the write-out counted as own time, as before 2026-11-27);
  - the same for the bare script (its mkfs, mount, initdb, start, stop and unmount: the part
    of "own" time that no tool can avoid);
  - the ratio of its wall time to the bare script's.
With --profile, one more pgfsbench run under cProfile: where its own seconds go.

The pgfsbench runs share one work directory, as a DBA's runs share the default one: the
first makes the initdb template the later ones copy (postgres/template.py), unless
--fresh-workdir (each run a new work directory, so each runs initdb). A first run at scale 1
makes the template before anything is timed (--no-prime: the first timed run makes it).

    .venv/bin/python bench/own_time.py --scale 2 --reps 4 [--warmup 2] [--duration 5]
        [--fresh-workdir] [--no-prime] [--profile] [--save F.json]
Needs root; works in a directory of its own under /var/tmp and removes it.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from rawserver import measured_commit, signals_unwind  # noqa: E402

SPEC = """
[defaults]
scale = {scale}
clients = 4
threads = 2
duration = "{duration}s"
warmup = "{warmup}s"
repetitions = 1
[storage.ext4]
fs = "ext4"
device = "loop:4G"
[postgres.p]
settings = {{ shared_buffers = "128MB" }}
[workload.tpcb]
builtin = "tpcb-like"
"""


def pgfsbench_run(
    work: Path,
    workdir: Path,
    args: argparse.Namespace,
    profile: Path | None = None,
    scale: int | None = None,
) -> dict[str, float]:
    spec = work / "s.toml"
    spec.write_text(
        SPEC.format(scale=scale or args.scale, duration=args.duration, warmup=args.warmup)
    )
    results = work / "r.sqlite"
    argv = [
        sys.executable,
        *(["-m", "cProfile", "-o", str(profile)] if profile else []),
        "-m",
        "pgfsbench",
        "run",
        str(spec),
        "--results",
        str(results),
        "--workdir",
        str(workdir),
    ]
    started = time.monotonic()
    subprocess.run(
        argv,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "120"},
    )
    wall = time.monotonic() - started
    with sqlite3.connect(results) as db:
        phases = db.execute("SELECT load_phases FROM run ORDER BY id DESC LIMIT 1").fetchone()
    # the load's wall clock (pgbench -i from exec to exit), as the bare script times it;
    # pgbench's own "done in" leaves out its start and its connection
    load_phases = json.loads(phases[0])
    load = float(load_phases["wall_clock"])
    write_out = float(load_phases.get("write_out", 0.0))
    return figures(wall, load, write_out, args)


def figures(
    wall: float, load: float, write_out: float, args: argparse.Namespace
) -> dict[str, float]:
    """own: everything but the warm-up, the measured phase, the load and its write-out (the
    checkpoint and sync after pgbench -i, which both arms do); own_with_write_out: the
    write-out counted as own time, as before 2026-11-27."""
    own = wall - args.warmup - args.duration - load - write_out
    return {
        "wall": wall,
        "load": load,
        "write_out": write_out,
        "own": own,
        "own_with_write_out": own + write_out,
    }


def bare_run(work: Path, args: argparse.Namespace) -> dict[str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [
            "bash",
            str(ROOT / "bench" / "bare_run.sh"),
            str(work),
            str(args.scale),
            str(args.warmup),
            str(args.duration),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    said = dict(line.split(maxsplit=1) for line in done.stdout.splitlines() if " " in line)
    # the same definition as pgfsbench's: mkfs, mount, initdb, start, stop, unmount
    return figures(wall, float(said["load_seconds"]), float(said["write_out_seconds"]), args)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scale", type=int, default=2)
    ap.add_argument("--reps", type=int, default=4, help="pairs (ABBA order)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--duration", type=int, default=5)
    ap.add_argument("--profile", action="store_true", help="one more run under cProfile")
    ap.add_argument(
        "--fresh-workdir", action="store_true", help="a new work directory for each run"
    )
    ap.add_argument("--no-prime", action="store_true", help="no untimed first run")
    ap.add_argument("--save", type=Path)
    args = ap.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"pgfsbench": [], "bare": []}
    with signals_unwind():
        base = Path(tempfile.mkdtemp(prefix="pgfsb-own-", dir="/var/tmp"))
        base.chmod(0o755)
        shared = base / "w"
        try:
            if not (args.fresh_workdir or args.no_prime):
                (base / "prime").mkdir()
                pgfsbench_run(base / "prime", shared, args, scale=1)
            for i in range(args.reps):
                order = ("pgfsbench", "bare") if i % 2 == 0 else ("bare", "pgfsbench")
                for arm in order:
                    work = base / f"{arm}-{i}"
                    work.mkdir()
                    workdir = work / "w" if args.fresh_workdir else shared
                    figures = (
                        pgfsbench_run(work, workdir, args)
                        if arm == "pgfsbench"
                        else bare_run(work, args)
                    )
                    runs[arm].append(figures)
                    print(
                        f"{arm} #{i + 1}: "
                        + ", ".join(f"{k} {v:.2f} s" for k, v in figures.items()),
                        flush=True,
                    )
            summary = summarise(runs)
            if args.profile:
                work = base / "profile"
                work.mkdir()
                workdir = work / "w" if args.fresh_workdir else shared
                pgfsbench_run(work, workdir, args, profile=base / "run.prof")
                stats = pstats.Stats(str(base / "run.prof"))
                # pgfsbench's own functions, by the time spent in them and what they called
                stats.sort_stats("cumulative").print_stats(
                    r"pgfsbench/(engine|storage|postgres|collect|workloads|kernel|results|"
                    r"analysis|report|system/journal|cli/run)",
                    45,
                )
        finally:
            for w in [*base.glob("*/w"), shared]:
                subprocess.run(
                    [sys.executable, "-m", "pgfsbench", "cleanup", "--workdir", str(w)],
                    cwd=ROOT,
                    capture_output=True,
                    check=False,
                )
            shutil.rmtree(base, ignore_errors=True)
    if args.save:
        commit = measured_commit()
        args.save.write_text(
            json.dumps(
                {
                    "commit": commit,
                    "when": time.strftime("%F %T"),
                    "args": {k: str(v) for k, v in vars(args).items()},
                    "runs": runs,
                    "summary": summary,
                },
                indent=1,
            )
        )


def summarise(runs: dict[str, list[dict[str, float]]]) -> dict[str, Any]:
    pg = runs["pgfsbench"]
    bare = runs["bare"]
    wall = statistics.median(r["wall"] for r in pg)
    own = statistics.median(r["own"] for r in pg)
    bare_wall = statistics.median(r["wall"] for r in bare)
    bare_own = statistics.median(r["own"] for r in bare)
    own_w = statistics.median(r["own_with_write_out"] for r in pg)
    bare_own_w = statistics.median(r["own_with_write_out"] for r in bare)
    ratios = [p["wall"] / b["wall"] for p, b in zip(pg, bare, strict=True)]
    out = {
        "pgfsbench_wall_s": round(wall, 2),
        "own_s": round(own, 2),
        "own_share_pct": round(100 * own / wall, 1),
        "bare_wall_s": round(bare_wall, 2),
        "bare_own_s": round(bare_own, 2),
        "bare_own_share_pct": round(100 * bare_own / bare_wall, 1),
        "own_with_write_out_s": round(own_w, 2),
        "own_with_write_out_share_pct": round(100 * own_w / wall, 1),
        "bare_own_with_write_out_s": round(bare_own_w, 2),
        "write_out_s": round(statistics.median(r["write_out"] for r in pg), 2),
        "bare_write_out_s": round(statistics.median(r["write_out"] for r in bare), 2),
        "excess_over_bare_s": round(wall - bare_wall, 2),
        "wall_ratio_median": round(statistics.median(ratios), 3),
        "wall_ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
    }
    print(
        f"\npgfsbench: {wall:.1f} s a run (median of {len(pg)}), of which its own "
        f"{own:.1f} s ({out['own_share_pct']}%); bare script: {bare_wall:.1f} s, of which "
        f"the same steps {bare_own:.1f} s ({out['bare_own_share_pct']}%); "
        f"pgfsbench / bare: {out['wall_ratio_median']} (pairs {out['wall_ratio_range']}); "
        f"the load's write-out {out['write_out_s']} s (bare {out['bare_write_out_s']} s); "
        f"own time counting it: {own_w:.1f} s ({out['own_with_write_out_share_pct']}%), "
        f"bare {bare_own_w:.1f} s"
    )
    return out


if __name__ == "__main__":
    main()
