"""What an emulated disk's daemon costs in CPU, and whether it keeps up with its model.

Two daemons side by side in one run (the one built from the tree, and one built from an
earlier commit; or the tree's on its two transports), alternated ABBA, each case on a
fresh emulated disk:

  - sata-ssd, 8 KiB random writes, queue depth 32 (fio, libaio, direct): IOPS, and the
    daemon's own CPU (user + system of all its threads, /proc/PID/stat) per I/O;
  - sata-ssd, 8 KiB random reads, queue depth 32: the same;
  - nvme-ssd, sequential 1 MiB writes, queue depth 4: MB/s against the model's 1,050,
    and the CPU per MB;
  - sata-ssd, 8 KiB random writes, queue depth 1: the completion latency (the model's
    28 us plus what the layer adds), so that a cheaper daemon is not a later one.

Each line also has the daemon's count of late replies (late_s per request) and, for the
new daemon, what its completer did (wake-ups, batches).

    .venv/bin/python bench/disk_cpu.py --before-commit 74cdfdf [--reps 3] [--seconds 10]
        [--save bench/results/disk-cpu-....json]
    .venv/bin/python bench/disk_cpu.py --transports [--reps 3]   the tree's daemon on
        /dev/fuse and on FUSE over io_uring (Linux 6.14+) side by side
    .venv/bin/python bench/disk_cpu.py --profile [--transport io_uring] [--seconds 10]
        the tree's daemon under its own CPU profiler (pprof) and perf, on the first case

Needs root and Go; works under /dev/shm (the images in memory, so the host disk is in no
figure) and removes what it made.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
from device_model import emit, fio, remove_work, with_device  # noqa: E402
from rawserver import measured_commit  # noqa: E402

from pgfsbench.spec.models import EmulatedDevice  # noqa: E402
from pgfsbench.storage.devices import attach_emulated, disk_counters  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")

# the random cases keep to 1 GiB of the disk, written once before they are measured (a
# database's disk is written over, not filled for the first time: a first write to a
# hole of the sparse image costs the host a page's allocation, measured apart in
# "first writes")
REGION = {"size": "1g"}
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "sata-ssd 8k randwrite qd32": (
        "sata-ssd",
        {"rw": "randwrite", "bs": "8k", "iodepth": 32, **REGION},
    ),
    "sata-ssd 8k randread qd32": (
        "sata-ssd",
        {"rw": "randread", "bs": "8k", "iodepth": 32, **REGION},
    ),
    "nvme-ssd 1M write qd4": ("nvme-ssd", {"rw": "write", "bs": "1M", "iodepth": 4}),
    "sata-ssd 8k randwrite qd1": (
        "sata-ssd",
        {"rw": "randwrite", "bs": "8k", "iodepth": 1, **REGION},
    ),
    "first writes: sata-ssd 8k randwrite qd32 over 4 GiB": (
        "sata-ssd",
        {"rw": "randwrite", "bs": "8k", "iodepth": 32},
    ),
}


def go() -> str:
    found = shutil.which("go") or "/usr/local/go/bin/go"
    if not Path(found).exists():
        sys.exit("Go is needed to build the daemons")
    return found


def build(source: Path, out: Path) -> Path:
    subprocess.run(
        [go(), "build", "-trimpath", "-o", str(out), "."],
        cwd=source,
        check=True,
        env={**os.environ, "CGO_ENABLED": "0"},
    )
    return out


def build_commit(commit: str, work: Path) -> Path:
    """The daemon as it was at ``commit``."""
    src = work / f"src-{commit}"
    src.mkdir()
    archive = subprocess.run(
        ["git", "archive", commit, "native/diskmodel"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
    return build(src / "native" / "diskmodel", work / f"pgfsbench-disk-{commit}")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime


def switches(pid: int) -> int:
    """The daemon's context switches so far, over its threads (voluntary and not)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            for line in (task / "status").read_text().splitlines():
                if line.endswith("ctxt_switches:") or "ctxt_switches" in line:
                    total += int(line.split()[1])
        except (OSError, ValueError):
            continue
    return total


def measure(where: Path, dev: str, job: dict[str, Any], seconds: float) -> dict[str, Any]:
    pid = int((where / "emulated.pid").read_text().split()[0])
    if job.get("size"):  # written once, unmeasured
        subprocess.run(
            [
                "fio",
                "--name=fill",
                f"--filename={dev}",
                "--rw=write",
                "--bs=1M",
                "--ioengine=libaio",
                "--iodepth=4",
                "--direct=1",
                f"--size={job['size']}",
            ],
            check=True,
            capture_output=True,
        )
    before_c = disk_counters(where / "emulated.stats.jsonl")
    cpu0, sw0 = cpu_seconds(pid), switches(pid)
    got = fio(dev, seconds, **job)
    cpu, sw = cpu_seconds(pid) - cpu0, switches(pid) - sw0
    time.sleep(1.2)  # the daemon's next line, after the last request
    after_c = disk_counters(where / "emulated.stats.jsonl")
    d = {k: after_c.get(k, 0.0) - before_c.get(k, 0.0) for k in after_c}
    requests = max(1.0, d.get("reads", 0) + d.get("writes", 0) + d.get("flushes", 0))
    ios = got["iops"] * seconds
    got.update(
        cpu_s=cpu,
        cpu_share=cpu / seconds,
        cpu_us_per_io=1e6 * cpu / max(1.0, ios),
        cpu_ms_per_mb=1e3 * cpu / max(1e-9, got["mbps"] * seconds),
        switches_per_io=sw / max(1.0, ios),
        requests_per_io=requests / max(1.0, ios),
        requests=requests,
        late_ms_per_request=1e3 * d.get("late_s", 0.0) / requests,
        wakeups_per_io=d.get("loop_wakeups", 0) / max(1.0, ios),
        holds=d.get("loop_holds"),
    )
    return got


# a daemon to measure: its binary and what carries its requests
Daemon = tuple[Path, Literal["dev_fuse", "io_uring"]]


def run_case(
    work: Path, daemon: Daemon, name: str, rep: int, case: str, seconds: float
) -> dict[str, Any]:
    model, job = CASES[case]
    os.environ["PGFSBENCH_DISK"] = str(daemon[0])
    where = f"{name}-{rep}-{case.replace(' ', '-')}"
    spec = EmulatedDevice(size="4G", model=model, transport=daemon[1])
    return with_device(  # type: ignore[no-any-return]
        work,
        where,
        lambda j, r, d: attach_emulated(j, r, d, "emulated", spec).path,
        lambda dev: measure(work / where, dev, job, seconds),
    )


def compare(work: Path, daemons: dict[str, Daemon], reps: int, seconds: float) -> dict[str, Any]:
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {c: {n: [] for n in daemons} for c in CASES}
    names = list(daemons)
    for rep in range(reps):
        for case in CASES:
            for name in names if rep % 2 == 0 else names[::-1]:
                got = run_case(work, daemons[name], name, rep, case, seconds)
                rows[case][name].append(got)
                print(
                    f"rep {rep + 1} {case:<28} {name:<9}: {got['iops']:>9,.0f} IOPS "
                    f"{got['mbps']:>8,.1f} MB/s  p50 {got['clat_p50_us']:>7.1f} us  CPU "
                    f"{got['cpu_share']:.2f} core, {got['cpu_us_per_io']:.1f} us/IO "
                    f"{got['switches_per_io']:.2f} switches/IO {got['wakeups_per_io']:.2f} "
                    f"wake-ups/IO  late "
                    f"{got['late_ms_per_request']:.3f} ms/req",
                    flush=True,
                )
    keys = ("iops", "mbps", "clat_p50_us", "clat_p99_us", "cpu_share", "cpu_us_per_io")
    keys += ("cpu_ms_per_mb", "switches_per_io", "late_ms_per_request")
    return {
        case: {
            name: {
                k: {
                    "median": statistics.median(r[k] for r in runs),
                    "range": [min(r[k] for r in runs), max(r[k] for r in runs)],
                }
                for k in keys
            }
            for name, runs in by_name.items()
        }
        for case, by_name in rows.items()
    }


def profile(work: Path, daemon: Daemon, seconds: float) -> None:
    """The first case under the daemon's own profiler and under perf (whole system)."""
    prof = work / "cpu.pprof"
    wrapper = work / "pgfsbench-disk"
    wrapper.write_text(f'#!/bin/sh\nexec {daemon[0]} --cpuprofile {prof} "$@"\n')
    wrapper.chmod(0o755)
    perf_data = work / "perf.data"
    perf = subprocess.Popen(
        ["perf", "record", "-a", "-g", "-o", str(perf_data), "--", "sleep", str(seconds + 4)],
        stderr=subprocess.DEVNULL,
    )
    got = run_case(work, (wrapper, daemon[1]), "profile", 0, next(iter(CASES)), seconds)
    perf.wait()
    print(json.dumps(got, indent=1))
    subprocess.run([go(), "tool", "pprof", "-top", "-nodecount=35", str(daemon[0]), str(prof)])
    report = subprocess.run(
        [
            *("perf", "report", "-i", str(perf_data), "--no-children"),
            *("--sort", "comm,dso,sym", "--stdio", "-g", "none", "--percent-limit", "0.7"),
        ],
        capture_output=True,
        text=True,
    )
    print(report.stdout[:12000])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--before-commit", help="compare with the daemon of this commit")
    ap.add_argument(
        "--transports",
        action="store_true",
        help="compare the tree's daemon on /dev/fuse and on FUSE over io_uring",
    )
    ap.add_argument("--transport", choices=("dev_fuse", "io_uring"), default="dev_fuse")
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--save", type=Path)
    ap.add_argument("--only", help="the cases whose name holds this text")
    args = ap.parse_args()
    if args.only:
        for case in [c for c in CASES if args.only not in c]:
            del CASES[case]
    work = Path(tempfile.mkdtemp(prefix="pgfsbench-diskcpu-", dir="/dev/shm"))
    try:
        now = build(ROOT / "native" / "diskmodel", work / "pgfsbench-disk-tree")
        if args.profile:
            profile(work, (now, args.transport), args.seconds)
            return
        daemons: dict[str, Daemon] = {"after": (now, args.transport)}
        if args.before_commit:
            before = build_commit(args.before_commit, work)
            daemons = {"before": (before, "dev_fuse"), "after": (now, args.transport)}
        if args.transports:
            daemons = {"dev_fuse": (now, "dev_fuse"), "io_uring": (now, "io_uring")}
        result: dict[str, Any] = {
            "commit": measured_commit(),
            "before_commit": args.before_commit,
            "daemons": {name: {"transport": t} for name, (_, t) in daemons.items()},
            "seconds": args.seconds,
            "reps": args.reps,
            "cases": compare(work, daemons, args.reps, args.seconds),
        }
        emit(result, args.save)
    finally:
        remove_work(work)


if __name__ == "__main__":
    main()
