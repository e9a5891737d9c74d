"""What a campaign changes for every process on the host, not only for its own: kernel
settings (sysctls, transparent huge pages), huge pages reserved for its server, the page
cache dropped before a cold run. `plan` lists each with how long it holds and what it does
to the other processes, so a DBA running pgfsbench beside a production server knows
before anything is changed (pure reading: the values in force now are read, never set).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from pgfsbench.spec import Cell
from pgfsbench.units import human_seconds

# what a sysctl does to the processes that are not pgfsbench's, by name (longest prefix)
EFFECTS = {
    "vm.dirty": "every process's writes are held and flushed by these limits",
    "vm.swappiness": "how eagerly every process's memory is swapped out",
    "vm.overcommit": "whether every process's memory allocations succeed",
    "vm.nr_hugepages": "memory reserved as huge pages, taken from every other process",
    "vm.min_free_kbytes": "memory the kernel keeps free, taken from every other process",
    "vm.vfs_cache_pressure": "how every process's cached directories and inodes are reclaimed",
    "vm.zone_reclaim_mode": "where every process's memory is reclaimed from",
    "kernel.numa_balancing": "whether every process's memory is moved between NUMA nodes",
    "kernel.sched": "how every process is scheduled",
}
THP_EFFECT = "whether every process's memory is backed by transparent huge pages"


def effect_of(name: str) -> str:
    best = max((p for p in EFFECTS if name.startswith(p)), key=len, default=None)
    return EFFECTS[best] if best else "applies to every process on this host"


def _now(name: str) -> str:
    from pgfsbench.kernel import read_sysctl

    try:
        return read_sysctl(name)
    except OSError:
        return "not readable here"


def _thp_now(key: str) -> str:
    from pgfsbench.kernel import THP, selected

    try:
        return selected((THP / key).read_text())
    except OSError:
        return "not readable here"


def host_changes(cells: Sequence[Cell], seconds_of: Callable[[Sequence[Cell]], float]) -> list[str]:
    """One line per host-wide change: what is set (and what it is now), while which cells
    run and for about how long of the estimate, put back when, and its effect on the other
    processes. ``seconds_of`` gives the plan's estimate for some of its cells."""
    out: list[str] = []
    by_kernel: dict[str, list[Cell]] = {}
    for c in cells:
        by_kernel.setdefault(c.kernel_name, []).append(c)
    for name, members in by_kernel.items():
        k = members[0].kernel
        held = (
            f"while its {len(members)} cell(s) run (about "
            f"{human_seconds(seconds_of(members))} of the estimate), put back after each cell"
        )
        for key, value in k.sysctl.items():
            out.append(f"kernel {name}: {key} = {value} (now {_now(key)}) {held}: {effect_of(key)}")
        for thp_key, thp in (
            ("enabled", k.transparent_hugepage),
            ("defrag", k.transparent_hugepage_defrag),
        ):
            if thp is not None:
                out.append(
                    f"kernel {name}: transparent_hugepage/{thp_key} = {thp} (now "
                    f"{_thp_now(thp_key)}) {held}: {THP_EFFECT}"
                )
    huge = [
        c
        for c in cells
        if str(c.postgres.settings.get("huge_pages", "off")).lower() in ("on", "try", "true", "1")
        and "vm.nr_hugepages" not in c.kernel.sysctl
    ]
    if huge:
        out.append(
            f"vm.nr_hugepages (now {_now('vm.nr_hugepages')}) raised by what the server needs "
            f"while each of {len(huge)} cell(s) with huge_pages on/try runs (about "
            f"{human_seconds(seconds_of(huge))}), put back after each: "
            + EFFECTS["vm.nr_hugepages"]
        )
    from pgfsbench.spec.matrix import workload_config
    from pgfsbench.spec.models import WorkloadBase

    cold = [c for c in cells if workload_config(c.workload, WorkloadBase).cache == "cold"]
    if cold:
        out.append(
            f"the page cache is dropped before each run of {len(cold)} cell(s) with cache = "
            '"cold" (vm.drop_caches): every process on this host reads its files from disk '
            "again"
        )
    return out
