"""The storage's own ceiling: what a commit's fsync can get (pg_test_fsync) and what 8 KiB
random I/O can get (fio, JSON output), measured on the empty filesystem before initdb.

Measured once per storage identity (its configuration, the host and the kernel) and kept
in the results store, so the report can show how close PostgreSQL came to the storage.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from pgfsbench.system.errors import CommandError
from pgfsbench.system.runner import Runner

_FSYNC_RE = re.compile(r"^\s+(.+?)\s{2,}([\d.]+) ops/sec\s+(\d+) usecs/op")
_SECTION_RE = re.compile(r"^(?:Compare )?(\S.*?):$")


def identity(storage_config: dict[str, object]) -> str:
    """Same configuration on the same host and kernel = same ceiling."""
    uname = os.uname()
    key = json.dumps(
        {"storage": storage_config, "host": uname.nodename, "kernel": uname.release}, sort_keys=True
    )
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def parse_pg_test_fsync(output: str) -> dict[str, float]:
    """'        fdatasync   1234.567 ops/sec   810 usecs/op' -> {"8kB/fdatasync": 1234.567}."""
    result: dict[str, float] = {}
    section = ""
    for line in output.splitlines():
        head = _SECTION_RE.match(line)
        if head:
            section = head.group(1).strip()
            continue
        m = _FSYNC_RE.match(line)
        if m:
            name = " ".join(m.group(1).split())
            key = f"{section}: {name}" if section else name
            result[key] = float(m.group(2))
    return result


def fio_argv(directory: Path, seconds: int, size: str = "256M") -> list[str]:
    """8 KiB random read/write (70/30), PostgreSQL's page size, synchronous like a backend."""
    return [
        "fio",
        "--name=pg8k",
        f"--directory={directory}",
        "--rw=randrw",
        "--rwmixread=70",
        "--bs=8k",
        f"--size={size}",
        f"--runtime={seconds}",
        "--time_based",
        "--ioengine=psync",
        "--numjobs=2",
        "--group_reporting",
        "--fdatasync=64",
        "--output-format=json",
    ]


def parse_fio(output: str) -> dict[str, float]:
    data = json.loads(output[output.index("{") :])
    job = data["jobs"][0]
    result: dict[str, float] = {}
    for side in ("read", "write"):
        part = job[side]
        result[f"{side}_iops"] = round(float(part["iops"]), 1)
        result[f"{side}_mbps"] = round(float(part["bw"]) * 1024 / 1e6, 2)
        pct = (part.get("clat_ns") or {}).get("percentile") or {}
        if "99.000000" in pct:
            result[f"{side}_p99_ms"] = round(float(pct["99.000000"]) / 1e6, 3)
    sync = job.get("sync") or {}
    if sync.get("lat_ns"):
        result["fdatasync_avg_ms"] = round(float(sync["lat_ns"]["mean"]) / 1e6, 3)
    return result


CEILING_DIR = "pgfsbench_ceiling"


def measure(
    runner: Runner,
    pg_test_fsync: str,
    directory: Path,
    seconds: int = 2,
    os_user: str | None = None,
) -> dict[str, object]:
    """Both measurements in ``directory`` (an empty filesystem of the storage under test),
    in a directory of their own made beneath it (held) and handed to ``os_user``, as whom
    they run: the volume may be another user's (an existing filesystem), and root writes
    nothing there by path."""
    from pgfsbench.system.held import Held, Owner

    result: dict[str, object] = {}
    with Held.open(directory) as volume:
        volume.make_dir(CEILING_DIR, 0o700, Owner.of(os_user)).close()
        try:
            _measure_in(runner, pg_test_fsync, directory / CEILING_DIR, seconds, os_user, result)
        finally:
            volume.remove(CEILING_DIR)
    return result


def _measure_in(
    runner: Runner,
    pg_test_fsync: str,
    place: Path,
    seconds: int,
    os_user: str | None,
    result: dict[str, object],
) -> None:
    done = runner.run(
        [pg_test_fsync, "-f", str(place / "fsync.tmp"), "-s", str(seconds)],
        timeout=300,
        check=False,
        user=os_user,
    )
    result["pg_test_fsync"] = parse_pg_test_fsync(done.stdout)
    result["pg_test_fsync_raw"] = done.stdout[-6000:]
    fio_dir = place
    try:
        # two jobs, each its own file: use at most an eighth of the free space
        st = os.statvfs(fio_dir)
        size_mb = max(16, min(256, st.f_bavail * st.f_frsize // (8 << 20)))
        done = runner.run(
            fio_argv(fio_dir, max(3, seconds * 3), f"{size_mb}M"),
            timeout=600,
            check=False,
            user=os_user,
        )
        if done.returncode == 0:
            result["fio"] = parse_fio(done.stdout)
        else:
            result["fio_error"] = (done.stderr or done.stdout).strip()[-500:]
    except (CommandError, ValueError, KeyError) as exc:
        result["fio_error"] = str(exc)
