"""What the emulated-disk layer costs, and what an emulated disk gives (fio, direct I/O).

Two questions, each answered side by side in one run, in alternating order (ABBA), each
figure the median of the repetitions with their range:

  --layer: 8 KiB random writes (fio, libaio, direct=1) on a loop device over a plain
    sparse file in memory against the same over `pgfsbench-disk` with the zero model: IOPS at queue
    depth 1 and 16, and the median completion latency at depth 1. The layer's own cost is
    the difference (the target: at least 20,000 IOPS, at most 50 us more per operation).

  --calibrate MODEL: the datasheet figures on an emulated MODEL (hdd-7200...): random 4 KiB
    reads at QD1, sequential 1 MiB reads and writes, and fsync latency after an 8 KiB write,
    with the drive's write cache on and off.

  --priority: what the daemon's scheduling priority does to the replies when the CPU is
    busy, two CPU-bound loops beside fio on this 2-core machine, the daemon at nice 0,
    nice -10 and SCHED_FIFO, alternated; two cases where the model allows more than the
    layer and the CPU can give: 8 KiB random reads at queue depth 32 on sata-ssd (77 us
    each on 8 channels), 8 KiB random writes at queue depth 32 on io2 (0.5 ms each, up to
    64,000 IOPS). Figures:
    IOPS, p50/p99 completion, and the daemon's own count of what the host lost (late,
    and of it the wake-up after the model's time).

    .venv/bin/python bench/device_model.py --layer [--reps 4] [--seconds 5] [--save F.json]
    .venv/bin/python bench/device_model.py --calibrate hdd-7200 [--seconds 10]
    .venv/bin/python bench/device_model.py --priority [--reps 3] [--seconds 10]
Needs root; works in a directory of its own under /dev/shm (the images in memory, so that
the host disk's latency is in neither figure) and removes it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
from rawserver import measured_commit  # noqa: E402

from pgfsbench.spec.models import EmulatedDevice  # noqa: E402
from pgfsbench.storage import devices  # noqa: E402
from pgfsbench.storage.devices import attach_emulated, attach_loop, disk_counters  # noqa: E402
from pgfsbench.system.journal import Journal  # noqa: E402
from pgfsbench.system.runner import Runner  # noqa: E402

SIZE = 4 << 30


def fio(dev: str, seconds: float, **job: Any) -> dict[str, Any]:
    """One fio job on ``dev``; its read or write figures (IOPS, MB/s, clat percentiles)."""
    argv = [
        "fio",
        "--name=j",
        f"--filename={dev}",
        "--ioengine=libaio",
        "--direct=1",
        "--time_based",
        f"--runtime={seconds}",
        "--output-format=json",
        "--randrepeat=0",
        *(f"--{k}={v}" for k, v in job.items()),
    ]
    out = json.loads(subprocess.run(argv, check=True, capture_output=True, text=True).stdout)
    j = out["jobs"][0]
    side = "write" if j["write"]["io_bytes"] >= j["read"]["io_bytes"] else "read"
    s = j[side]
    pct = s["clat_ns"].get("percentile", {})
    sync = j.get("sync", {}).get("lat_ns", {})
    return {
        "iops": s["iops"],
        "mbps": s["bw_bytes"] / 1e6,
        "clat_p50_us": pct.get("50.000000", 0) / 1e3,
        "clat_p99_us": pct.get("99.000000", 0) / 1e3,
        "fsync_mean_ms": sync.get("mean", 0) / 1e6 if sync else None,
    }


def with_device(
    work: Path, name: str, make: Callable[[Journal, Runner, Path], str], test: Callable[[str], Any]
) -> Any:
    runner = Runner()
    journal = Journal.create(work / name, runner)
    try:
        with journal.scope():
            return test(make(journal, runner, work / name))
    finally:
        journal.close()


def plain(journal: Journal, runner: Runner, d: Path) -> str:
    return attach_loop(journal, runner, d / "plain.img", SIZE).path


def emulated(model: str, **extra: Any) -> Callable[[Journal, Runner, Path], str]:
    def make(journal: Journal, runner: Runner, d: Path) -> str:
        spec = EmulatedDevice(size="4G", model=model, **extra)
        return attach_emulated(journal, runner, d, "emulated", spec).path

    return make


def layer(work: Path, reps: int, seconds: float) -> dict[str, Any]:
    jobs = {
        "qd1": {"rw": "randwrite", "bs": "8k", "iodepth": 1},
        "qd16": {"rw": "randwrite", "bs": "8k", "iodepth": 16},
    }
    rows: dict[str, dict[str, list[dict[str, Any]]]] = {"plain": {}, "zero": {}}
    order = [("plain", plain), ("zero", emulated("zero"))]
    for rep in range(reps):
        for name, make in order if rep % 2 == 0 else order[::-1]:  # ABBA
            for job, params in jobs.items():
                got = with_device(
                    work, f"{name}-{rep}-{job}", make, lambda d, p=params: fio(d, seconds, **p)
                )
                rows[name].setdefault(job, []).append(got)
                print(
                    f"rep {rep + 1} {name:<5} {job}: {got['iops']:,.0f} IOPS, "
                    f"p50 {got['clat_p50_us']:.1f} us",
                    flush=True,
                )
    summary: dict[str, Any] = {}
    for name in rows:
        for job, runs in rows[name].items():
            iops = [r["iops"] for r in runs]
            p50 = [r["clat_p50_us"] for r in runs]
            summary[f"{name}.{job}"] = {
                "iops_median": statistics.median(iops),
                "iops_range": [min(iops), max(iops)],
                "p50_us_median": statistics.median(p50),
                "p50_us_range": [min(p50), max(p50)],
            }
    added = [
        z["clat_p50_us"] - p["clat_p50_us"]
        for z, p in zip(rows["zero"]["qd1"], rows["plain"]["qd1"], strict=True)
    ]
    summary["added_p50_us_qd1"] = {
        "median": statistics.median(added),
        "range": [min(added), max(added)],
    }
    return summary


def calibrate(work: Path, model: str, seconds: float) -> dict[str, Any]:
    jobs = {
        "random 4 KiB reads, QD1, over the whole drive": (
            {"drive": "4G"},
            {"rw": "randread", "bs": "4k", "iodepth": 1},
        ),
        "random 4 KiB reads, QD1, in 4 GiB of a 1 TiB drive": (
            {},
            {"rw": "randread", "bs": "4k", "iodepth": 1},
        ),
        "sequential 1 MiB reads, QD4": ({}, {"rw": "read", "bs": "1M", "iodepth": 4}),
        "sequential 1 MiB writes, QD4": (
            {},
            {"rw": "write", "bs": "1M", "iodepth": 4, "ramp_time": 2},
        ),
        # psync: each write done before its fsync (with libaio, fio's fsync also waits
        # for the write it has just queued)
        "8 KiB write + fsync, write cache on": (
            {"write_cache": True},
            {"rw": "randwrite", "bs": "8k", "ioengine": "psync", "fsync": 1},
        ),
        "8 KiB write + fsync, write cache off": (
            {"write_cache": False},
            {"rw": "randwrite", "bs": "8k", "ioengine": "psync", "fsync": 1},
        ),
    }
    out = {}
    for what, (extra, params) in jobs.items():
        if "write_cache" in extra and not model.startswith("hdd"):
            continue
        got = with_device(
            work,
            what.split()[0] + str(len(out)),
            emulated(model, **extra),
            lambda d, p=params: fio(d, seconds, **p),
        )
        out[what] = got
        print(
            f"{model}: {what}: {got['iops']:,.0f} IOPS, {got['mbps']:,.1f} MB/s, "
            f"p50 {got['clat_p50_us'] / 1e3:.2f} ms"
            + (f", fsync {got['fsync_mean_ms']:.2f} ms" if got["fsync_mean_ms"] else ""),
            flush=True,
        )
    return out


PRIORITIES = {
    "nice 0": [],
    "nice -10": ["nice", "-n", "-10"],
    "SCHED_FIFO": ["chrt", "--fifo", str(devices.REALTIME_PRIORITY)],
}


# the two cases of --priority: (device, fio job)
PRIORITY_CASES: dict[str, tuple[EmulatedDevice, dict[str, Any]]] = {
    "sata-ssd, 8 KiB random reads, QD32": (
        EmulatedDevice(size="4G", model="sata-ssd"),
        {"rw": "randread", "bs": "8k", "iodepth": 32},
    ),
    # io2 of 128 GiB: 64,000 IOPS, 0.5 ms a write; fio keeps to 4 GiB of it (the image
    # is in memory)
    "io2 128 GiB, 8 KiB random writes, QD32": (
        EmulatedDevice(size="128G", model="io2"),
        {"rw": "randwrite", "bs": "8k", "iodepth": 32, "size": "4g"},
    ),
}


def busy_loops(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def priority(work: Path, reps: int, seconds: float) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    names = list(PRIORITIES)
    for case, (spec, job) in PRIORITY_CASES.items():
        rows: dict[str, list[dict[str, Any]]] = {name: [] for name in PRIORITIES}
        for rep in range(reps):
            for name in names if rep % 2 == 0 else names[::-1]:
                devices.controller_priority = (  # type: ignore[assignment]
                    lambda _runner, p=PRIORITIES[name], n=name: (p, n)
                )
                where = f"prio-{len(summary)}-{rep}-{names.index(name)}"
                got = with_device(
                    work,
                    where,
                    lambda j, r, d, spec=spec: attach_emulated(j, r, d, "emulated", spec).path,
                    lambda dev, job=job, where=where: loaded_fio(
                        dev, seconds, job, work / where / "emulated.stats.jsonl"
                    ),
                )
                rows[name].append(got)
                print(
                    f"{case}, rep {rep + 1}, {name:<10}: {got['iops']:,.0f} IOPS, p50 "
                    f"{got['clat_p50_us'] / 1e3:.2f} ms, p99 {got['clat_p99_us'] / 1e3:.2f} "
                    f"ms, late {got['late_ms_per_request']:.3f} ms/request (wake-up "
                    f"{got['oversleep_ms_per_request']:.3f})",
                    flush=True,
                )
        summary[case] = {
            name: {
                k: {
                    "median": statistics.median(r[k] for r in runs),
                    "range": [min(r[k] for r in runs), max(r[k] for r in runs)],
                }
                for k in (
                    "iops",
                    "clat_p50_us",
                    "clat_p99_us",
                    "late_ms_per_request",
                    "oversleep_ms_per_request",
                )
            }
            for name, runs in rows.items()
        }
    return summary


def loaded_fio(dev: str, seconds: float, job: dict[str, Any], stats: Path) -> dict[str, Any]:
    """fio beside two CPU-bound loops; with the daemon's count of how late it answered."""
    loops = busy_loops(2)
    try:
        got = fio(dev, seconds, **job)
    finally:
        for p in loops:
            p.kill()
            p.wait()
    time.sleep(1.2)  # the daemon's next line a second, after the last request
    c = disk_counters(stats)
    n = max(1.0, c.get("reads", 0) + c.get("writes", 0) + c.get("flushes", 0))
    got["late_ms_per_request"] = 1e3 * c.get("late_s", 0) / n
    got["oversleep_ms_per_request"] = 1e3 * c.get("oversleep_s", 0) / n
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--layer", action="store_true")
    ap.add_argument("--calibrate", metavar="MODEL")
    ap.add_argument("--priority", action="store_true")
    ap.add_argument("--reps", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--save", type=Path)
    args = ap.parse_args()
    # the images in memory (tmpfs) for both sides: the host disk's own latency and its
    # writeback are then in neither figure
    work = Path(tempfile.mkdtemp(prefix="pgfsbench-devmodel-", dir="/dev/shm"))
    try:
        result: dict[str, Any] = {"commit": measured_commit()}
        if args.layer:
            result["layer"] = layer(work, args.reps, args.seconds)
        if args.priority:
            result["priority"] = priority(work, args.reps, args.seconds)
        if args.calibrate:
            result["calibration"] = {args.calibrate: calibrate(work, args.calibrate, args.seconds)}
        emit(result, args.save)
    finally:
        remove_work(work)


def emit(result: dict[str, Any], save: Path | None) -> None:
    """The figures on stdout, and in ``save`` when given (bench/results)."""
    print(json.dumps(result, indent=1))
    if save:
        save.write_text(json.dumps(result, indent=1) + "\n")


def remove_work(work: Path) -> None:
    """The scratch directory, never crossing into a filesystem mounted beneath it."""
    subprocess.run(["rm", "-rf", "--one-file-system", str(work)], check=False)


if __name__ == "__main__":
    main()
