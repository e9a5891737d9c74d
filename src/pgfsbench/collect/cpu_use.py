"""Where the CPU went during the measured phase: how busy the host was, and how much of it
the storage's own daemons took (zfs-fuse, the emulated disks' pgfsbench-disk), which a
real storage stack of the same kind does not pay for (kernel ZFS has no FUSE round trips,
a real disk has its own controller).

Two readings, one when the measured phase begins and one when it ends: /proc/stat for the
host, /proc/<pid>/stat of every process. The processes that are not the benchmark's (not
pgfsbench and what it started, not the postmaster and its children, not the storage's
daemons) are the outside: what they took is what a disturbed figure owes to the
neighbours, with the ones that took most named. Independent of the samplers (which may be
off, or on every other run).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.collect.processes import (
    UNSEEN_FLOOR_PCT,
    ProcStat,
    descendants,
    parse_proc_stat,
)
from pgfsbench.collect.procfs import CpuTimes, cpu_percentages, parse_stat

OUTSIDE_TOP = 3  # outside processes named with a run
MIN_NAMED_CPUS = 0.05  # below 5% of a CPU over the measured phase, a process is not named
# CPU no reading saw counts as outside above this (processes.UNSEEN_FLOOR_PCT: the host's
# tick-sampled totals and the processes' differ a little)
UNSEEN_FLOOR_CPUS = UNSEEN_FLOOR_PCT / 100


@dataclass(frozen=True)
class CpuReading:
    t: float
    host: CpuTimes
    daemons: dict[int, tuple[str, float]]  # pid -> (name, CPU seconds so far)
    # every user-space process: pid -> its stat (ppid, name, CPU ticks, start time)
    processes: dict[int, ProcStat] = field(default_factory=dict)
    # the CPU seconds of the benchmark's own cgroup (kernel.CpuGroup), when it has one
    group: float | None = None


def read_cpu(
    names: Sequence[str],
    proc: Path = Path("/proc"),
    group: Callable[[], float | None] | None = None,
) -> CpuReading:
    """The host's CPU times, every process's (kernel threads' included), the CPU seconds
    of each process named one of ``names``, and of the benchmark's cgroup (``group``)."""
    t = time.monotonic()
    host = parse_stat((proc / "stat").read_text())
    ticks = os.sysconf("SC_CLK_TCK")
    daemons: dict[int, tuple[str, float]] = {}
    processes: dict[int, ProcStat] = {}
    wanted = set(names)
    for entry in os.listdir(proc):  # noqa: PTH208 (names only)
        if not entry.isdigit():
            continue
        try:
            st = parse_proc_stat((proc / entry / "stat").read_bytes())
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        processes[st.pid] = st
        if st.comm in wanted and not st.kernel_thread:
            daemons[st.pid] = (st.comm, st.cpu_ticks / ticks)
    return CpuReading(t, host, daemons, processes, group() if group else None)


def cpu_use(
    a: CpuReading,
    b: CpuReading,
    cpus: int,
    roots: Sequence[int] = (),
    proc: Path = Path("/proc"),
) -> dict[str, object]:
    """Between two readings: the host's busy and iowait shares (% of all its CPUs), each
    daemon's CPU in CPUs (1.0 = one CPU all the time), summed over its processes, and the
    CPU of the processes outside the benchmark (not under ``roots`` nor a daemon), with
    those that took most. A process seen only at the end started in between: all its time
    counts; one seen only at the start ended in between: its last part is not known and is
    left out."""
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
    out: dict[str, object] = {
        "seconds": round(seconds, 3),
        "cpus": cpus,
        "busy_pct": round(busy, 2),
        "iowait_pct": pct["iowait"],
        "steal_pct": pct["steal"],
        "daemons_cpus": {name: round(v, 3) for name, v in sorted(daemons.items())},
    }
    if b.processes and roots:
        out.update(_outside(a, b, seconds, roots, proc))
    return out


def _outside(
    a: CpuReading, b: CpuReading, seconds: float, roots: Sequence[int], proc: Path
) -> dict[str, object]:
    """The CPU the processes outside the benchmark took (in CPUs), and the command lines
    that took most: [lowest pid, name, command line, CPUs, processes]."""
    ticks = os.sysconf("SC_CLK_TCK")
    parents = {pid: s.ppid for pid, s in {**a.processes, **b.processes}.items()}
    own = descendants(parents, roots) | set(a.daemons) | set(b.daemons)
    own = descendants(parents, own)
    used: list[tuple[float, ProcStat]] = []
    seen = own_seen = 0.0  # ticks
    for pid, later in b.processes.items():
        earlier = a.processes.get(pid)
        start = earlier.cpu_ticks if earlier and earlier.starttime == later.starttime else 0
        delta = max(0, later.cpu_ticks - start)
        seen += delta
        if pid in own:
            own_seen += delta
            continue
        if later.kernel_thread:
            continue
        cpus_used = delta / ticks / seconds
        if cpus_used > 0:
            used.append((cpus_used, later))
    # the processes of one command line together (four busy loops are one culprit)
    by_command: dict[str, list[Any]] = {}
    for c, st in used:
        command = _cmdline(proc, st.pid) or st.comm
        row = by_command.setdefault(command, [st.pid, st.comm, command, 0.0, 0])
        row[0] = min(row[0], st.pid)
        row[3] += c
        row[4] += 1
    ranked = sorted(by_command.values(), key=lambda r: -r[3])
    top = [
        [pid, comm, command, round(c, 3), n]
        for pid, comm, command, c, n in ranked[:OUTSIDE_TOP]
        if c >= MIN_NAMED_CPUS
    ]
    outside = sum(c for c, _ in used)
    out: dict[str, object] = {"outside_cpus": round(outside, 3), "outside_top": top}
    if a.group is not None and b.group is not None:
        # what no reading saw: processes that started and ended in between (a build's
        # compilers, a cron job's), the last part of those that ended; the benchmark's own
        # from its cgroup, the rest outside
        host = (b.host.user + b.host.nice + b.host.system) - (
            a.host.user + a.host.nice + a.host.system
        )
        own_unseen = max(0.0, (b.group - a.group) * ticks - own_seen)
        unseen = max(0.0, host - seen - own_unseen) / ticks / seconds
        out["unseen_cpus"] = round(unseen, 3)
        if unseen > UNSEEN_FLOOR_CPUS:
            out["outside_cpus"] = round(outside + unseen, 3)
    return out


def _cmdline(proc: Path, pid: int) -> str:
    try:
        raw = (proc / str(pid) / "cmdline").read_bytes()
    except OSError:
        return ""
    return " ".join(part.decode(errors="replace") for part in raw.split(b"\0") if part)[:200]


__all__ = ["CpuReading", "cpu_use", "read_cpu"]
