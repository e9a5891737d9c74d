"""Who outside the benchmark took the CPU or the disks, named from the samplers' per-second
table of the top outside processes (pure): the processes of one command line together, with
what they took on average over the seconds considered."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

NAMED_AT_LEAST = 0.5  # % of a CPU or MB/s on average: below, a process is not named
NAMED = 3  # command lines named at most


def short(command: str, width: int = 80) -> str:
    command = " ".join(command.split())
    return command if len(command) <= width else command[: width - 3] + "..."


def top_outside(seconds: Sequence[Any], n: int, by: str) -> str:
    """The command lines that took the most CPU (``by`` = "cpu") or I/O ("io") over ``n``
    seconds of the samplers' "outside_top" values (None where not sampled); "" when none
    is worth naming."""
    agg: dict[str, list[Any]] = {}
    for sec in seconds:
        for pid, comm, cmdline, cpu, rmb, wmb in sec or []:
            command = " ".join(str(cmdline or comm).split())
            row = agg.setdefault(command, [comm, set(), 0.0, 0.0])
            row[1].add(pid)
            row[2] += cpu
            row[3] += rmb + wmb
    n = max(1, n)
    rows = sorted(agg.items(), key=lambda kv: -(kv[1][2] if by == "cpu" else kv[1][3]))[:NAMED]
    out = []
    for command, (comm, pids, cpu, io) in rows:
        if (cpu if by == "cpu" else io) / n < NAMED_AT_LEAST:
            continue
        figure = f"{cpu / n:.0f}% of a CPU" if by == "cpu" else f"{io / n:,.1f} MB/s"
        who = (
            f"pid {min(pids)}"
            if len(pids) == 1
            else f"{len(pids)} processes, pids {', '.join(map(str, sorted(pids)[:4]))}"
            + ("..." if len(pids) > 4 else "")
        )
        out.append(f"{comm} ({who}: {short(command)}) {figure}")
    return "; ".join(out)
