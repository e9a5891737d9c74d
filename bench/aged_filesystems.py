#!/usr/bin/env python3
"""Fresh against aged: ext4, xfs, btrfs and ZFS (a pool of one device, recordsize 8K;
zfs-fuse here, its figures marked FUSE) each fresh from mkfs, aged by files and aged by its
own database, on loop files of this machine's disk, pgbench tpcb-like over whole
checkpoint cycles, as one pgfsbench campaign; then the
fragmentation figures, TPS with verdicts of each aged filesystem against its fresh self,
whether the filesystems' ranking changes, the time each aging took, and the time a reused
copy took. Long: an hour or more; as root.

    .venv/bin/python bench/aged_filesystems.py [--size 4G] [--scale 20] [--overwritten 2]
        [--fullness 0.5] [--budget 60m] [--cycles 2] [--repetitions auto|N]
        [--filesystems ext4,xfs,btrfs,zfs] [--save F.json] [--workdir DIR]

The campaign is a spec written to the work directory (its text is in the saved JSON); the
results store is kept there too (results.sqlite), for `pgfsbench report`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def spec_text(a: argparse.Namespace) -> str:
    lines = [
        'name = "aged-filesystems"',
        "[defaults]",
        f"scale = {a.scale}",
        "clients = 16",
        "threads = 4",
        *(
            [f"cycles = {a.cycles}"]
            if a.cycles
            else [f'duration = "{a.duration}"', 'warmup = "5s"']
        ),
        *(
            [f"repetitions = {a.repetitions}"]
            if a.repetitions.isdigit()
            else ['repetitions = "auto"', "repetitions_min = 3", "repetitions_max = 6"]
        ),
        f'budget = "{a.budget}"',
        "[postgres.cycles]",
        'settings = { checkpoint_timeout = "30s", shared_buffers = "128MB" }',
        "[workload.tpcb-like]",
        'builtin = "tpcb-like"',
    ]
    ages = {
        "": None,
        "-aged-files": f'{{ recipe = "files", seed = 1, overwritten = {a.overwritten}, '
        f"fullness = {a.fullness} }}",
        "-aged-db": f'{{ recipe = "postgres", seed = 1, overwritten = {a.overwritten}, '
        f"fullness = {a.fullness} }}",
    }
    for fs in a.filesystems:
        for suffix, age in ages.items():
            lines += [f"[storage.{fs}{suffix}]", f'fs = "{fs}"']
            if fs == "zfs":
                lines += [
                    f'pool = {{ devices = ["loop:{a.size}"] }}',
                    'data = { properties = { recordsize = "8K" } }',
                ]
            else:
                lines.append(f'device = "loop:{a.size}"')
            if age:
                lines.append(f"age = {age}")
    return "\n".join(lines) + "\n"


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pgfsbench", *argv], cwd=ROOT, capture_output=True, text=True
    )


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--size", default="4G")
    p.add_argument("--scale", type=int, default=20)
    p.add_argument("--overwritten", type=float, default=2.0)
    p.add_argument("--fullness", type=float, default=0.5)
    p.add_argument("--budget", default="60m")
    p.add_argument(
        "--cycles", type=int, default=2, help="whole 30 s checkpoint cycles a run (0: --duration)"
    )
    p.add_argument("--duration", default="15s", help="with --cycles 0: the window, after 5 s")
    p.add_argument("--repetitions", default="auto", help='"auto" or a number of runs a cell')
    p.add_argument(
        "--filesystems",
        default="ext4,xfs,btrfs" + (",zfs" if shutil.which("zpool") else ""),
        help="comma-separated: ext4, xfs, btrfs, zfs",
    )
    p.add_argument("--workdir", type=Path, default=Path("/var/tmp/pgfsbench-aged"))
    p.add_argument("--save", type=Path)
    a = p.parse_args()
    a.filesystems = [f for f in a.filesystems.split(",") if f]
    a.workdir.mkdir(parents=True, exist_ok=True)
    spec = a.workdir / "aged.toml"
    spec.write_text(spec_text(a))
    results = a.workdir / "results.sqlite"
    started = time.time()
    done = run(["run", str(spec), "--results", str(results), "--workdir", str(a.workdir / "w")])
    took = time.time() - started
    print(done.stdout[-6000:])
    if done.returncode not in (0, 6):
        print(done.stderr[-4000:], file=sys.stderr)
        return 1
    from pgfsbench.results.store import Store

    store = Store(str(results))
    runs = [store.get_run(r.run_id) for r in store.list_runs()]
    per: dict[str, dict[str, Any]] = {}
    for r in runs:
        if r is None or not r.ok:
            continue
        entry = per.setdefault(r.storage, {"tps": [], "state": [], "age": None})
        entry["tps"].append(r.figure)
        entry["state"].append(r.storage_details.get("state_after_load"))
        data = r.storage_details.get("data")
        if isinstance(data, dict) and data.get("age"):
            entry["age"] = {
                "image": data["age"].get("image"),
                "aging": data["age"].get("aging"),
                "copy_seconds": data["age"].get("copy_seconds"),
            }
    comparisons = []
    for fs in a.filesystems:
        for suffix in ("-aged-files", "-aged-db"):
            if f"{fs}{suffix}" in per and fs in per:
                cmp = run(["compare", fs, f"{fs}{suffix}", "--results", str(results), "--json"])
                comparisons.append(json.loads(cmp.stdout) if cmp.returncode == 0 else cmp.stderr)
    summary = run(["results", "summary", "--results", str(results), "--json"])
    out = {
        "spec": spec.read_text(),
        "campaign_seconds": round(took),
        "per_storage": per,
        "aged_against_fresh": comparisons,
        "summary": json.loads(summary.stdout) if summary.returncode == 0 else summary.stderr,
        "machine": subprocess.run(["uname", "-a"], capture_output=True, text=True).stdout,
    }
    if a.save:
        a.save.write_text(json.dumps(out, indent=1, default=str) + "\n")
    for name, e in sorted(per.items()):
        tps = e["tps"]
        print(
            f"{name:20} {len(tps)} runs, mean {sum(tps) / len(tps):8.1f} tps; state {e['state'][0]}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
