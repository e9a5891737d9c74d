"""Facts about the host, read the same way for a run's environment and for the doctor:
kernel, distribution, CPU, memory, and how busy the machine is right now."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from pgfsbench import __version__
from pgfsbench.collect.procfs import CpuTimes, cpu_percentages, parse_meminfo, parse_stat
from pgfsbench.units import human_seconds


def host_name() -> str:
    return socket.gethostname()


def meminfo(proc: Path = Path("/proc")) -> dict[str, int]:
    """/proc/meminfo in kB."""
    try:
        return parse_meminfo((proc / "meminfo").read_text())
    except OSError:
        return {}


def host_environment(proc: Path = Path("/proc"), etc: Path = Path("/etc")) -> dict[str, object]:
    """Kernel, distribution, CPU model and count, memory."""
    uname = os.uname()
    env: dict[str, object] = {
        "hostname": uname.nodename,
        "kernel": uname.release,
        "machine": uname.machine,
        "cpus": os.cpu_count(),
        "pgfsbench": __version__,
    }
    with contextlib.suppress(OSError):
        for line in (etc / "os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                env["distribution"] = line.split("=", 1)[1].strip('"')
    with contextlib.suppress(OSError):
        for line in (proc / "cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                env["cpu_model"] = line.split(":", 1)[1].strip()
                break
    mem = meminfo(proc)
    if "MemTotal" in mem:
        env["memory_bytes"] = mem["MemTotal"] * 1024
    return env


@dataclass(frozen=True)
class HostLoad:
    """How busy the machine was over a short sample, in % of all CPUs."""

    busy_pct: float  # user + system (not idle, not iowait)
    iowait_pct: float
    steal_pct: float
    load1: float
    running: int  # processes runnable at the end of the sample
    seconds: float

    def as_dict(self) -> dict[str, float]:
        return {
            "busy_pct": self.busy_pct,
            "iowait_pct": self.iowait_pct,
            "steal_pct": self.steal_pct,
            "load1": self.load1,
            "running": self.running,
            "seconds": self.seconds,
        }


def _steal(a: CpuTimes, b: CpuTimes) -> float:
    total = b.total - a.total
    return round(100.0 * (b.steal - a.steal) / total, 2) if total > 0 else 0.0


def sample_load(seconds: float = 1.0, proc: Path = Path("/proc")) -> HostLoad:
    """CPU use over ``seconds`` (the caller's own processes should be idle meanwhile)."""
    a = parse_stat((proc / "stat").read_text())
    time.sleep(seconds)  # the sample is the point: a fixed window, not a wait for a state
    text = (proc / "stat").read_text()
    b = parse_stat(text)
    pct = cpu_percentages(a, b)
    running = 0
    for line in text.splitlines():
        if line.startswith("procs_running"):
            running = int(line.split()[1])
    try:
        load1 = float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        load1 = 0.0
    return HostLoad(
        round(pct["user"] + pct["system"], 2), pct["iowait"], _steal(a, b), load1, running, seconds
    )


def busy_warning(
    load: HostLoad, busy_pct: float, steal_pct: float, when: str = "before the run"
) -> str | None:
    """A warning when the host was busy (None when quiet enough)."""
    parts = []
    if load.busy_pct > busy_pct:
        parts.append(f"CPU {load.busy_pct:.0f}% busy")
    if load.steal_pct > steal_pct:
        parts.append(f"CPU steal {load.steal_pct:.0f}%")
    if not parts:
        return None
    return (
        f"busy host {when}: {' and '.join(parts)} over {human_seconds(load.seconds)} "
        f"(load average {load.load1:.2f}); its numbers may be disturbed"
    )


def load_between(
    a_stat: str, b_stat: str, busy_pct: float, seconds: float, proc: Path = Path("/proc")
) -> HostLoad:
    """A HostLoad from two /proc/stat texts (its steal and iowait) and a busy share measured
    otherwise (the CPU of the processes outside the benchmark, % of the whole machine)."""
    a, b = parse_stat(a_stat), parse_stat(b_stat)
    pct = cpu_percentages(a, b)
    try:
        load1 = float((proc / "loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        load1 = 0.0
    return HostLoad(round(busy_pct, 2), pct["iowait"], _steal(a, b), load1, 0, seconds)
