"""Real stored campaigns for `pgfsbench history`: one spec run again and again, each
campaign a `pgfsbench run` of its own into one results file, as a team would over weeks.

  --change vm.dirty_bytes=262144 --at 10: campaigns 1-10 on the host as it is, then the
    sysctl is set on the host (not in the spec: the cell stays the same) and campaigns
    11-20 run with it. The sysctl is put back at the end, whatever happens.
  without --change: nothing changes between campaigns (no change point may be found).

    .venv/bin/python bench/history_corpus.py --out tests/data/history/step.sqlite \\
        --campaigns 20 --change vm.dirty_bytes=262144 --at 10
    .venv/bin/python bench/history_corpus.py --out tests/data/history/flat.sqlite --campaigns 20

The spec is tiny (ext4 on a 1 GiB loop file, scale 2, 4 clients, 4 s): the whole corpus
takes about 4 minutes here. On this machine vm.dirty_bytes=262144 halves pgbench's TPS and
multiplies the load time by 3-8 (writers throttled once 256 KiB are dirty). What a run
writes beside the results file (its raw logs) is removed: the history needs the runs only.
Needs root (loop devices, sysctl).
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PGFSBENCH = ROOT / ".venv" / "bin" / "pgfsbench"

SPEC = """\
name = "history"
description = "one ext4 cell, run again and again (a corpus for pgfsbench history)"

[defaults]
scale = 2
clients = 4
threads = 2
duration = "4s"
warmup = "1s"
repetitions = 1

[storage.ext4]
fs = "ext4"
device = "loop:1G"

[postgres.default]
settings = { shared_buffers = "128MB", max_wal_size = "1GB" }

[workload.tpcb-like]
builtin = "tpcb-like"
"""


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--campaigns", type=int, default=20)
    ap.add_argument("--change", help="NAME=VALUE: a sysctl set on the host from --at on")
    ap.add_argument("--at", type=int, default=10, help="campaigns before the change")
    args = ap.parse_args()
    saved: dict[Path, str] = {}
    if args.change:
        name = args.change.split("=", 1)[0]
        # vm.dirty_bytes and vm.dirty_ratio set each other to 0: save both of a pair
        names = {name}
        pairs = (
            ("dirty_bytes", "dirty_ratio"),
            ("dirty_background_bytes", "dirty_background_ratio"),
        )
        for a, b in pairs:
            if name.endswith(a) or name.endswith(b):
                names |= {f"vm.{a}", f"vm.{b}"}
        # of such a pair, the one that is not 0 is written back (writing it zeroes the
        # other; the kernel refuses a 0 for *_bytes)
        for n in sorted(names):
            value = sysctl_path(n).read_text().strip()
            if value != "0":
                saved[sysctl_path(n)] = value
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix="pgfsbench-history-", dir="/var/tmp"))
    try:
        spec = work / "history.toml"
        spec.write_text(SPEC)
        results = work / "history.sqlite"
        for i in range(1, args.campaigns + 1):
            if args.change and i == args.at + 1:
                n, v = args.change.split("=", 1)
                sysctl_path(n).write_text(v)
                print(f"campaign {i}: {args.change} set on the host", flush=True)
            proc = subprocess.run(
                [str(PGFSBENCH), "run", str(spec), "--results", str(results)],
                capture_output=True,
                text=True,
                check=False,
            )
            tail = proc.stdout.strip().splitlines()[-1:] or proc.stderr.strip().splitlines()[-1:]
            print(f"campaign {i}: rc={proc.returncode} {' '.join(tail)}", flush=True)
            if proc.returncode != 0:
                print(proc.stderr, file=sys.stderr)
                return 1
        with sqlite3.connect(results) as db:
            db.execute("VACUUM")
        shutil.copyfile(results, args.out)
        with sqlite3.connect(args.out) as db:
            rows = db.execute(
                "SELECT id, started_at, tps, load_seconds FROM run ORDER BY id"
            ).fetchall()
        for row in rows:
            print(*row)
        print(f"{args.out}: {args.out.stat().st_size:,} bytes")
        return 0
    finally:
        for path, value in saved.items():
            path.write_text(value)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
