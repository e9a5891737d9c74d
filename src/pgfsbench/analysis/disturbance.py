"""Was the measured phase the storage's alone? What else used the host meanwhile (pure).

A stall or a slowdown stands out against the rest of its run. A disturbance that lasts the
whole measured phase does not: its median is the disturbed level, no second falls below
it, and the run's figure is the neighbour's as much as the storage's. So the measured phase
is also read as a whole, against absolute bounds:

- CPU taken by processes outside the benchmark (pgfsbench and what it started, the
  postmaster and its children, the storage's daemons are the benchmark) while the host had
  no CPU to spare (collect/cpu_use: two readings of every process, on every run);
- the hypervisor's steal;
- I/O by processes outside the benchmark that reached the storage under test or the disk
  beneath it (the samplers' process table and device series, on watched runs);
- memory pressure (said, not held against the run: the workload itself may cause it).

A run whose figure such work could have moved is marked disturbed, with the figures and
who took the machine. Nothing is said of a run where none was measured: a run without the
samplers is judged on CPU and steal only, and says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgfsbench.analysis.outside import short, top_outside
from pgfsbench.analysis.series import Aligned, align
from pgfsbench.results.records import StoredRun

FORMAT = 1

# A tenth of the machine: on this project's 2-CPU hosts a fifth of one CPU. A quiet host's
# own life (sshd, journald, a monitoring agent) takes 1-3% of a CPU; a CPU hog, a build or
# a backup takes a whole one. A tenth is well above the first and well below the second.
OUTSIDE_CPU_SHARE = 0.10
# Outside CPU moves the figure only where the benchmark wanted that CPU: a host busier than
# this (user + system, % of all CPUs) had none to spare. An I/O-bound run on an idle host
# loses nothing to a CPU hog beside it (measured: ext4 on an emulated HDD, 30% busy).
BUSY_HOST_PCT = 70.0
# Steal: the hypervisor gave the CPUs to another guest. 10% of the CPUs is what a
# quiet cloud VM never shows and a noisy neighbour does.
STEAL_PCT = 10.0
# Outside I/O counts from this many MB/s (a log writer or an agent does well under 1).
OUTSIDE_IO_MBPS = 5.0
# The disk beneath carried this much that the storage under test does not explain.
EXTRA_BENEATH_MBPS = 10.0
# Outside processes asleep in I/O on a volume under test in this share of the seconds:
# they were reading or writing the very filesystem the benchmark measures.
BLOCKED_ON_TEST_SHARE = 0.25
# Memory pressure: tasks stalled on memory this share of the time (PSI "some").
MEMORY_PRESSURE_PCT = 10.0
# "Most of the measured phase": outside work in at least half of its sampled seconds. A
# shorter disturbance is an episode against the rest of the run (analysis/stalls), named
# there with its cause; a run is marked only for what no episode can show. (Seen in the
# corpus: a 4 s burst of a Go build beside a 16 s run, 12 MB/s of I/O on average, moved
# nothing; it is not a disturbed run.)
SUSTAINED_SHARE = 0.5


@dataclass(frozen=True)
class Cause:
    """One thing that took the host during the measured phase."""

    kind: str  # host_cpu, steal, host_io, memory, replay_fidelity
    text: str  # the figures, and who
    disturbs: bool  # could it have moved the figure (the run is then marked)

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "text": self.text, "disturbs": self.disturbs}


@dataclass(frozen=True)
class Disturbance:
    """What else used the host during a run's measured phase."""

    causes: tuple[Cause, ...] = ()
    not_measured: tuple[str, ...] = ()  # what could not be judged, and why

    @property
    def disturbed(self) -> bool:
        return any(c.disturbs for c in self.causes)

    def reasons(self) -> list[str]:
        return [c.text for c in self.causes if c.disturbs]

    def warning(self) -> str | None:
        """The run's warning: the figures and who, or None when nothing disturbed it."""
        if not self.disturbed:
            return None
        return (
            "disturbed during the measured phase: "
            + "; ".join(self.reasons())
            + ": its figure may be the neighbours' as much as the storage's"
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "format": FORMAT,
            "disturbed": self.disturbed,
            "causes": [c.as_dict() for c in self.causes],
            "not_measured": list(self.not_measured),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Disturbance:
        causes = tuple(
            Cause(str(c.get("kind")), str(c.get("text")), bool(c.get("disturbs")))
            for c in data.get("causes") or []
            if isinstance(c, Mapping)
        )
        return cls(causes, tuple(str(x) for x in data.get("not_measured") or []))


@dataclass(frozen=True)
class CpuFigures:
    """metrics.cpu of a run (collect/cpu_use), as far as it has them."""

    cpus: int = 0
    busy_pct: float | None = None
    steal_pct: float | None = None
    outside_cpus: float | None = None
    # command lines that took most: lowest pid, name, command line, CPUs, processes
    outside_top: tuple[tuple[int, str, str, float, int], ...] = field(default_factory=tuple)

    @classmethod
    def of(cls, cpu: Mapping[str, Any]) -> CpuFigures:
        def num(key: str) -> float | None:
            v = cpu.get(key)
            return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

        top = tuple(
            (int(r[0]), str(r[1]), str(r[2]), float(r[3]), int(r[4]) if len(r) > 4 else 1)
            for r in cpu.get("outside_top") or []
            if isinstance(r, list | tuple) and len(r) >= 4
        )
        return cls(
            int(cpu.get("cpus") or 0), num("busy_pct"), num("steal_pct"), num("outside_cpus"), top
        )


def assess(cpu: CpuFigures, al: Aligned | None) -> Disturbance:
    """What else used the host during the measured phase (see the module)."""
    causes: list[Cause] = []
    missing: list[str] = []
    for found in (_host_cpu(cpu, al, missing), _steal(cpu, al), _host_io(al, missing), _memory(al)):
        if found is not None:
            causes.append(found)
    return Disturbance(tuple(causes), tuple(missing))


def _mean(al: Aligned | None, name: str) -> float:
    if al is None or not al.has(name):
        return math.nan
    v = al.get(name)
    return float(np.nanmean(v[np.isfinite(v)]))


def _who_cpu(top: Sequence[tuple[int, str, str, float, int]]) -> str:
    return "; ".join(
        f"{comm} ({f'pid {pid}' if n == 1 else f'{n} processes from pid {pid}'}: "
        f"{short(cmd)}) {cpus:.2f} CPU"
        for pid, comm, cmd, cpus, n in top
    )


def _top_from_series(al: Aligned, by: str, seconds: np.ndarray | None = None) -> str:
    """The outside processes that took most over the phase (or over ``seconds``), from the
    samplers' table."""
    values = al.structured.get("outside_top", [])
    if seconds is not None:
        values = [v for v, on in zip(values, seconds, strict=False) if on]
    return top_outside(values, sum(1 for v in values if v is not None), by)


def _host_cpu(cpu: CpuFigures, al: Aligned | None, missing: list[str]) -> Cause | None:
    cpus = cpu.cpus or 1
    if cpu.outside_cpus is not None:
        outside, who = cpu.outside_cpus, _who_cpu(cpu.outside_top)
    elif math.isfinite(_mean(al, "outside_cpu_pct")):
        assert al is not None
        outside, who = _mean(al, "outside_cpu_pct") / 100, _top_from_series(al, "cpu")
    else:
        missing.append("the CPU of processes outside the benchmark (not recorded for this run)")
        return None
    share = outside / cpus
    if share < OUTSIDE_CPU_SHARE:
        return None
    seconds = _seconds_over(al, "outside_cpu_pct", 100 * OUTSIDE_CPU_SHARE * cpus)
    if seconds is not None and seconds[0] < SUSTAINED_SHARE * seconds[1]:
        return None  # a burst: an episode's matter, not the whole run's
    busy = cpu.busy_pct
    if busy is None and al is not None and al.has("cpu_idle_pct"):
        busy = 100.0 - _mean(al, "cpu_idle_pct") - max(0.0, _mean(al, "cpu_iowait_pct"))
    squeezed = busy is not None and busy >= BUSY_HOST_PCT
    text = (
        f"processes outside the benchmark took {outside:.2f} CPU ({100 * share:.0f}% of the "
        f"machine's {cpus}) on a host {busy:.0f}% busy"
        if busy is not None
        else f"processes outside the benchmark took {outside:.2f} CPU ({100 * share:.0f}% of the "
        f"machine's {cpus})"
    )
    if seconds is not None:
        text += f", in {seconds[0]} of {seconds[1]} seconds"
    if who:
        text += f": {who}"
    if not squeezed:
        text += " (the host had CPU to spare: not held against the figure)"
    return Cause("host_cpu", text, squeezed)


def _seconds_over(al: Aligned | None, name: str, threshold: float) -> tuple[int, int] | None:
    """(seconds at or above ``threshold``, seconds sampled) of a per-second series, or None
    when it was not sampled (the run is then judged on its phase's mean)."""
    if al is None or not al.has(name):
        return None
    v = al.get(name)
    sampled = np.isfinite(v)
    return int((sampled & (v >= threshold)).sum()), int(sampled.sum())


def _steal(cpu: CpuFigures, al: Aligned | None) -> Cause | None:
    steal = cpu.steal_pct if cpu.steal_pct is not None else _mean(al, "cpu_steal_pct")
    if not math.isfinite(steal) or steal < STEAL_PCT:
        return None
    return Cause("steal", f"the hypervisor took {steal:.0f}% of the CPUs (steal)", True)


def _host_io(al: Aligned | None, missing: list[str]) -> Cause | None:
    if al is None or not al.has("outside_write_mbps"):
        missing.append("I/O by processes outside the benchmark (the samplers were off)")
        return None
    per_second = np.nan_to_num(al.get("outside_write_mbps")) + np.nan_to_num(
        al.get("outside_read_mbps")
    )
    sampled = np.isfinite(al.get("outside_write_mbps"))
    busy = sampled & (per_second >= OUTSIDE_IO_MBPS)
    if not sampled.any() or busy.sum() < SUSTAINED_SHARE * sampled.sum():
        return None  # none, or a burst: an episode's matter, not the whole run's
    outside = float(per_second[busy].mean())
    where: list[str] = []
    if al.beneath and all(al.has(f"disk.{d}.write_mbps") for d in al.beneath):
        total = sum(
            (
                np.nan_to_num(al.device(d, f))
                for d in al.beneath
                for f in ("write_mbps", "read_mbps")
                if al.has(f"disk.{d}.{f}")
            ),
            np.zeros(al.seconds),
        )
        ours = np.nan_to_num(al.get("disk_write_mbps")) + np.nan_to_num(al.get("disk_read_mbps"))
        extra = float(np.mean(np.clip(total - ours, 0, None)[busy]))
        if extra >= EXTRA_BENEATH_MBPS:
            where.append(
                f"the disk beneath ({', '.join(al.beneath)}) carried {extra:,.1f} MB/s "
                "the storage under test does not explain"
            )
    blocked = [
        s
        for s, on in zip(al.structured.get("blocked", []), busy, strict=False)
        if s is not None and on
    ]
    on_test = sum(
        1
        for sec in blocked
        if any(
            k.split("|")[0] == "outside" and k.split("|")[2] not in ("", "elsewhere")
            for k in (sec or {})
        )
    )
    if blocked and on_test / len(blocked) >= BLOCKED_ON_TEST_SHARE:
        where.append(
            f"outside processes waited on I/O in a volume under test in {on_test} of "
            f"{len(blocked)} seconds"
        )
    if not where:
        return None
    who = _top_from_series(al, "io", busy)
    return Cause(
        "host_io",
        f"processes outside the benchmark did {outside:,.1f} MB/s of I/O in "
        f"{int(busy.sum())} of {int(sampled.sum())} seconds"
        + (f" ({who})" if who else "")
        + "; "
        + "; ".join(where),
        True,
    )


def _memory(al: Aligned | None) -> Cause | None:
    some = _mean(al, "psi_memory_some_pct")
    if not math.isfinite(some) or some < MEMORY_PRESSURE_PCT:
        return None
    return Cause(
        "memory",
        f"tasks stalled on memory {some:.0f}% of the time (pressure): the figure includes "
        "waiting for memory",
        False,
    )


def disturbance_of(run: StoredRun) -> Disturbance:
    """A stored run's disturbance: as recorded when it ran, else assessed from what it
    recorded (its CPU readings, its series when they were loaded)."""
    stored = run.recorded.disturbance
    return (
        Disturbance.from_dict(stored)
        if stored is not None and "causes" in stored
        else assess_run(run)
    )


def assess_run(run: StoredRun) -> Disturbance:
    """Assess a stored run from what it recorded, whatever was recorded before."""
    return assess(
        CpuFigures.of(run.recorded.cpu or {}),
        align(run) if run.series else None,
    )


def is_disturbed(run: StoredRun) -> bool:
    return run.ok and disturbance_of(run).disturbed


__all__ = [
    "Cause",
    "CpuFigures",
    "Disturbance",
    "assess",
    "assess_run",
    "disturbance_of",
    "is_disturbed",
]
