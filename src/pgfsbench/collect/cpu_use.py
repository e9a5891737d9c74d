"""Where the CPU went during the measured phase: how busy the host was, and how much of it
the storage's own daemons took (zfs-fuse, the emulated disks' pgfsbench-disk), which a
real storage stack of the same kind does not pay for (kernel ZFS has no FUSE round trips,
a real disk has its own controller).

Two readings, one when the measured phase begins and one when it ends: /proc/stat for the
host, /proc/<pid>/stat of every process whose name is one of the daemons'. Independent of
the samplers (which may be off, or on every other run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.collect.procfs import CpuTimes, cpu_percentages, parse_process_cpu, parse_stat


@dataclass(frozen=True)
class CpuReading:
    t: float
    host: CpuTimes
    daemons: dict[int, tuple[str, float]]  # pid -> (name, CPU seconds so far)


def read_cpu(names: Sequence[str], proc: Path = Path("/proc")) -> CpuReading:
    """The host's CPU times and the CPU seconds of each process named one of ``names``."""
    t = time.monotonic()
    host = parse_stat((proc / "stat").read_text())
    daemons: dict[int, tuple[str, float]] = {}
    wanted = set(names)
    if wanted:
        ticks = os.sysconf("SC_CLK_TCK")
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                name = (entry / "comm").read_text().strip()
                if name in wanted:
                    stat = (entry / "stat").read_text()
                    daemons[int(entry.name)] = (name, parse_process_cpu(stat, ticks))
            except (OSError, ValueError, IndexError):
                continue  # gone meanwhile
    return CpuReading(t, host, daemons)


def cpu_use(a: CpuReading, b: CpuReading, cpus: int) -> dict[str, object]:
    """Between two readings: the host's busy and iowait shares (% of all its CPUs) and each
    daemon's CPU in CPUs (1.0 = one CPU all the time), summed over its processes. A process
    seen only at the end started in between: all its time counts; one seen only at the
    start ended in between: its last part is not known and is left out."""
    seconds = max(1e-3, b.t - a.t)
    pct = cpu_percentages(a.host, b.host)
    busy = (
        100.0 - pct["idle"] - pct["iowait"] - pct["steal"] if b.host.total > a.host.total else 0.0
    )
    daemons: dict[str, float] = {}
    for pid, (name, used) in b.daemons.items():
        earlier = a.daemons.get(pid)
        start = earlier[1] if earlier is not None and earlier[0] == name else 0.0
        daemons[name] = daemons.get(name, 0.0) + max(0.0, used - start) / seconds
    return {
        "seconds": round(seconds, 3),
        "cpus": cpus,
        "busy_pct": round(busy, 2),
        "iowait_pct": pct["iowait"],
        "daemons_cpus": {name: round(v, 3) for name, v in sorted(daemons.items())},
    }


__all__ = ["CpuReading", "cpu_use", "read_cpu"]
