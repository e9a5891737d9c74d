"""Which CPUs the server side and the client side run on (`defaults.server_cpus`).

On one host, the clients (pgbench, sysbench, the replayer) and PostgreSQL share the CPUs:
a client that spends more CPU on each transaction takes it from the server, and the
throughput then says as much about the client as about the storage. Published benchmarks
put the clients on another machine; on one host the same separation is CPU affinity:
PostgreSQL (the postmaster, every process it forks from then on) and its pooler on the
CPUs the spec names, pgfsbench and the clients it starts on the others.

Affinity, not a cpuset cgroup: it works under cgroup v1 and v2 and in containers alike,
children inherit it at fork, and `taskset -p PID` shows it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_CPU = 8191  # the kernel's default NR_CPUS ceiling


def parse_cpu_list(text: str) -> frozenset[int]:
    """A CPU list as the kernel writes it ("0", "0-3,8", "1,3-5"); ValueError otherwise."""
    cpus: set[int] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            raise ValueError(f"{text!r}: an empty item in the CPU list")
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise ValueError(f"{text!r}: {part!r} is not a CPU number or a range a-b")
        first, last = int(low), int(high) if dash else int(low)
        if first > last:
            raise ValueError(f"{text!r}: the range {part!r} runs backwards")
        if last > MAX_CPU:
            raise ValueError(f"{text!r}: CPU {last} is beyond any machine's")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def format_cpu_list(cpus: Iterable[int]) -> str:
    """The kernel's list format, ranges folded: {0, 1, 2, 5} -> "0-2,5"."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class CpuSplit:
    """The server side's CPUs and the client side's (every other CPU this process may use)."""

    server: frozenset[int]
    clients: frozenset[int]

    def as_dict(self) -> dict[str, str]:
        return {"server": format_cpu_list(self.server), "clients": format_cpu_list(self.clients)}


def split_cpus(server_text: str, available: frozenset[int] | None = None) -> CpuSplit:
    """The split ``server_cpus`` asks for on this host; ValueError saying why it cannot be."""
    have = available if available is not None else frozenset(os.sched_getaffinity(0))
    server = parse_cpu_list(server_text)
    missing = server - have
    if missing:
        raise ValueError(
            f"server_cpus = {server_text!r}: CPU {format_cpu_list(missing)} is not among "
            f"this host's (pgfsbench may use {format_cpu_list(have)})"
        )
    clients = have - server
    if not clients:
        raise ValueError(
            f"server_cpus = {server_text!r} leaves no CPU for the clients (this host has "
            f"{format_cpu_list(have)}): name fewer"
        )
    return CpuSplit(server, clients)


def cpu_record(split: CpuSplit, pids: dict[str, int | None]) -> dict[str, str | None]:
    """What a run records: the split, and the CPUs each named process (the postmaster, the
    pooler) and pgfsbench's own thread were allowed at the end of the measured phase
    (None: the process is gone)."""
    record: dict[str, str | None] = dict(split.as_dict())
    for name, pid in pids.items():
        record[f"{name}_at_end"] = None
        if pid is not None:
            with contextlib.suppress(OSError):
                record[f"{name}_at_end"] = format_cpu_list(os.sched_getaffinity(pid))
    record["clients_at_end"] = format_cpu_list(os.sched_getaffinity(0))
    return record


def pin_process(pid: int, cpus: frozenset[int], proc: Path = Path("/proc")) -> None:
    """Every thread of ``pid`` on ``cpus`` (the threads it makes later inherit it); a
    process or thread gone meanwhile is skipped."""
    try:
        tids = [int(t.name) for t in (proc / str(pid) / "task").iterdir()]
    except (FileNotFoundError, ProcessLookupError):
        return
    for tid in tids:
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(tid, cpus)


@contextlib.contextmanager
def this_thread_on(cpus: frozenset[int] | None) -> Iterator[None]:
    """The calling thread (and the threads and children it starts meanwhile) on ``cpus``,
    put back as it was afterwards; None: unchanged."""
    if cpus is None:
        yield
        return
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
