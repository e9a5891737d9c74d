"""Kernel settings per cell: sysctl values and transparent huge pages, applied and restored.

Each value is journaled with the value it replaces before it is written, and put back
when the cell ends (or by `pgfsbench cleanup` after a kill).
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.spec import KernelConfig
from pgfsbench.system.actions import write_value
from pgfsbench.system.bounds import cgroup_directory, dirty_pair, vm_value_problem
from pgfsbench.system.errors import ProvisionError
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.runner import Runner

PROC_SYS = Path("/proc/sys")
THP = Path("/sys/kernel/mm/transparent_hugepage")

# Writing one of a pair zeroes the other, and a *_bytes cannot be written back to 0:
# the pair is restored by writing whichever of the two was in force.
DIRTY_PAIRS = {
    "vm.dirty_background_bytes": "vm.dirty_background_ratio",
    "vm.dirty_background_ratio": "vm.dirty_background_bytes",
    "vm.dirty_bytes": "vm.dirty_ratio",
    "vm.dirty_ratio": "vm.dirty_bytes",
}


def sysctl_path(name: str) -> Path:
    return PROC_SYS / name.replace(".", "/")


def read_sysctl(name: str) -> str:
    return " ".join(sysctl_path(name).read_text().split())


def format_value(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


@dataclass(frozen=True)
class AppliedSetting:
    name: str
    before: str
    after: str


def check(config: KernelConfig) -> list[str]:
    """Problems found before anything is changed (unknown sysctl, no THP control)."""
    problems = [
        f"sysctl {k} does not exist on this kernel"
        for k in config.sysctl
        if not sysctl_path(k).exists()
    ]
    # what pgfsbench sets it must be able to restore, within bounds (system/bounds.py)
    for k, v in config.sysctl.items():
        if not k.startswith("vm.") or not sysctl_path(k).exists():
            continue
        if (why := vm_value_problem(k.removeprefix("vm."), str(v))) is not None:
            problems.append(why)
    if config.transparent_hugepage and not (THP / "enabled").exists():
        problems.append("this kernel has no transparent huge page control")
    return problems


def apply(journal: Journal, config: KernelConfig) -> list[AppliedSetting]:
    problems = check(config)
    if problems:
        raise ProvisionError("; ".join(problems))
    applied = []
    for name, setting in config.sysctl.items():
        new = format_value(setting)
        old = read_sysctl(name)
        if old.split() == new.split():
            # already so (in a pod: the kubelet set it, and /proc/sys is read-only there)
            applied.append(AppliedSetting(name, old, old))
            continue
        partner = DIRTY_PAIRS.get(name)
        if partner:
            journal.record(
                f"sysctl {name}={new} (pair {partner})",
                Undo("restore_dirty_pair", {name: old, partner: read_sysctl(partner)}),
            )
            try:
                sysctl_path(name).write_text(new + "\n")
            except OSError as exc:
                raise ProvisionError(f"sysctl {name}={new}: {exc.strerror}") from None
        else:
            try:
                write_value(journal, sysctl_path(name), new, what=f"sysctl {name}")
            except OSError as exc:
                raise ProvisionError(f"sysctl {name}={new}: {exc.strerror}") from None
        applied.append(AppliedSetting(name, old, read_sysctl(name)))
    thp: tuple[tuple[str, str | None], ...] = (
        ("enabled", config.transparent_hugepage),
        ("defrag", config.transparent_hugepage_defrag),
    )
    for key, value in thp:
        if value is None:
            continue
        path = THP / key
        old = path.read_text().strip()
        write_value(journal, path, value, what=f"transparent_hugepage/{key}")
        applied.append(
            AppliedSetting(f"transparent_hugepage.{key}", selected(old), selected(path.read_text()))
        )
    return applied


def selected(choice_line: str) -> str:
    """'always [madvise] never' -> 'madvise'."""
    line = choice_line.strip()
    if "[" in line:
        return line[line.index("[") + 1 : line.index("]")]
    return line


@undo_action("restore_dirty_pair", bound=dirty_pair)
def _restore_dirty_pair(runner: Runner, args: dict[str, object]) -> None:
    values = {k: str(v) for k, v in args.items()}
    bytes_key = next(k for k in values if k.endswith("_bytes"))
    ratio_key = next(k for k in values if k.endswith("_ratio"))
    if values[bytes_key] not in ("0", ""):
        if read_sysctl(bytes_key) != values[bytes_key]:
            sysctl_path(bytes_key).write_text(values[bytes_key] + "\n")
    elif read_sysctl(ratio_key) != values[ratio_key] or read_sysctl(bytes_key) != "0":
        sysctl_path(ratio_key).write_text(values[ratio_key] + "\n")


def huge_page_facts(meminfo: str | None = None) -> dict[str, int]:
    """HugePages_Total/Free/Rsvd and Hugepagesize (kB) from /proc/meminfo."""
    text = meminfo if meminfo is not None else Path("/proc/meminfo").read_text()
    out: dict[str, int] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if (
            name
            in (
                "HugePages_Total",
                "HugePages_Free",
                "HugePages_Rsvd",
                "HugePages_Surp",
                "Hugepagesize",
            )
            and rest.split()
        ):
            out[name] = int(rest.split()[0])
    return out


def reserve_huge_pages(journal: Journal, need: int) -> dict[str, int]:
    """vm.nr_hugepages raised by ``need`` (journaled); what the kernel really gave."""
    before = int(read_sysctl("vm.nr_hugepages"))
    target = before + need
    write_value(journal, sysctl_path("vm.nr_hugepages"), str(target), what="sysctl vm.nr_hugepages")
    after = int(read_sysctl("vm.nr_hugepages"))
    facts = huge_page_facts()
    return {
        "asked": need,
        "obtained": max(0, after - before),
        "before": before,
        "after": after,
        "page_kb": int(facts.get("Hugepagesize", 0)),
    }


def drop_caches() -> None:
    """Write dirty pages out, then drop the page cache, dentries and inodes (needs root)."""
    os.sync()
    (PROC_SYS / "vm" / "drop_caches").write_text("3\n")


def snapshot_vm() -> dict[str, str]:
    """All vm.* sysctls and the THP choice, for the environment record."""
    result: dict[str, str] = {}
    for path in sorted((PROC_SYS / "vm").iterdir()):
        try:
            result[f"vm.{path.name}"] = " ".join(path.read_text().split())
        except OSError:
            continue  # write-only entries such as drop_caches
    for key in ("enabled", "defrag"):
        p = THP / key
        if p.exists():
            result[f"transparent_hugepage.{key}"] = selected(p.read_text())
    return result


# ---------------------------------------------------------------- memory limit (cgroup v1)

MEMORY_CGROUP_ROOT = Path("/sys/fs/cgroup/memory")


def memory_cgroup_available(root: Path = MEMORY_CGROUP_ROOT) -> str | None:
    """None when a memory limit can be set here, else why not."""
    if (root / "memory.limit_in_bytes").exists():
        return None
    if Path("/sys/fs/cgroup/cgroup.controllers").exists():
        return (
            "memory_limit needs the cgroup v1 memory controller; this host has cgroup "
            "v2 only (not supported yet)"
        )
    return "memory_limit needs the cgroup v1 memory controller (/sys/fs/cgroup/memory)"


def limit_memory(
    journal: Journal, name: str, limit: int, pids: list[int], root: Path = MEMORY_CGROUP_ROOT
) -> dict[str, object]:
    """A memory cgroup of ``limit`` bytes holding ``pids`` (the postmaster and its server
    processes; backends forked later inherit it): their private memory and the page cache
    they fill from now on are charged to it. Journaled: undo moves whatever is left back
    to the root group, then removes the group."""
    group = root / name
    journal.record(
        f"memory cgroup {group} ({limit} bytes)",
        Undo("remove_memory_cgroup", {"path": str(group), "root": str(root)}),
    )
    group.mkdir(exist_ok=True)
    (group / "memory.limit_in_bytes").write_text(f"{limit}\n")
    moved = []
    for pid in pids:
        try:
            (group / "cgroup.procs").write_text(f"{pid}\n")
            moved.append(pid)
        except (ProcessLookupError, OSError):
            continue  # a process that ended meanwhile
    return {
        "bytes": limit,
        "cgroup": str(group),
        "pids_moved": len(moved),
        "set": int((group / "memory.limit_in_bytes").read_text()),
    }


def join_memory_cgroup(group: Path, pids: list[int]) -> None:
    """Put more processes in an existing memory cgroup (a restarted postmaster)."""
    for pid in pids:
        try:
            (group / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            continue


def memory_cgroup_usage(group: Path) -> dict[str, int]:
    """Peak and current usage of a memory cgroup, and how often the limit was hit."""
    out: dict[str, int] = {}
    for key, fname in (
        ("peak_bytes", "memory.max_usage_in_bytes"),
        ("usage_bytes", "memory.usage_in_bytes"),
        ("limit_hits", "memory.failcnt"),
    ):
        try:
            out[key] = int((group / fname).read_text())
        except (OSError, ValueError):
            continue
    return out


def _memory_group_bound(args: dict[str, object], scope: Scope) -> str | None:
    root = Path(str(args["root"]))
    if str(root) != str(MEMORY_CGROUP_ROOT) and not str(root).startswith("/sys/fs/cgroup/"):
        return f"{root} is not a memory cgroup hierarchy"
    return cgroup_directory(r"pgfsbench-run-[0-9]+", under=root)(str(args["path"]))


@undo_action("remove_memory_cgroup", bound=_memory_group_bound)
def _remove_memory_cgroup(runner: Runner, args: dict[str, object]) -> None:
    group, root = Path(str(args["path"])), Path(str(args["root"]))
    if not group.exists():
        return
    for pid in (group / "cgroup.procs").read_text().split():
        try:
            (root / "cgroup.procs").write_text(f"{pid}\n")
        except OSError:
            continue
    try:
        group.rmdir()
    except OSError as exc:
        left = (group / "cgroup.procs").read_text().split()
        raise ProvisionError(
            f"{group} could not be removed ({exc.strerror}); processes "
            f"left: {' '.join(left[:8]) or 'none'}"
        ) from None


# ------------------------------------------------ the benchmark's own CPU (cgroup v1 or v2)

CPUACCT_ROOT = Path("/sys/fs/cgroup/cpuacct")
CGROUP2_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class CpuGroup:
    """A cgroup holding pgfsbench and everything it starts from then on (PostgreSQL, its
    backends however short-lived, pgbench, the storage's daemons): what it used, in CPU
    seconds, is the benchmark's; the host's total minus it is everyone else's, the
    processes too short-lived for a once-a-second process table included."""

    path: Path
    version: int  # 1: cpuacct.usage (ns); 2: cpu.stat usage_usec

    def cpu_seconds(self) -> float | None:
        try:
            if self.version == 1:
                return int((self.path / "cpuacct.usage").read_text()) / 1e9
            for line in (self.path / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
        except (OSError, ValueError):
            return None
        return None


def _own_cgroup2(proc_self: Path = Path("/proc/self/cgroup")) -> str | None:
    """This process's cgroup v2 path ("0::/a/b"), or None."""
    try:
        for line in proc_self.read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        return None
    return None


def join_cpu_group(
    journal: Journal,
    name: str,
    *,
    pid: int | None = None,
    v1_root: Path = CPUACCT_ROOT,
    v2_root: Path = CGROUP2_ROOT,
) -> CpuGroup | None:
    """Move this process (``pid``) into a new cgroup of its own, journaled (undo moves
    whatever is left back and removes it): cgroup v1's cpuacct hierarchy, else a child of
    its cgroup v2 one. None where neither can be made (no such controller, a container's
    read-only cgroup files): the benchmark's CPU is then the process table's alone."""
    pid = os.getpid() if pid is None else pid
    if (v1_root / "cpuacct.usage").exists():
        parent, version = v1_root, 1
    elif (v2_root / "cgroup.controllers").exists():
        own = _own_cgroup2()
        if own is None:
            return None
        parent, version = v2_root / own.lstrip("/"), 2
        if not (parent / "cgroup.procs").exists():
            return None
    else:
        return None
    group = parent / name
    try:
        # only in a cgroup root owns (a cgroup delegated to a user is theirs to change)
        if parent.stat().st_uid != 0 or group.exists():
            return None
    except OSError:
        return None
    journal.record(
        f"cpu cgroup {group} (the benchmark's own CPU)",
        Undo("remove_cpu_cgroup", {"path": str(group), "root": str(parent)}),
    )
    try:
        group.mkdir()  # ours alone: one made by someone else meanwhile is refused
        (group / "cgroup.procs").write_text(f"{pid}\n")
    except FileExistsError:
        return None
    except OSError:
        with contextlib.suppress(OSError):
            group.rmdir()
        return None
    found = CpuGroup(group, version)
    return found if found.cpu_seconds() is not None else None


def _cpu_group_bound(args: dict[str, object], scope: Scope) -> str | None:
    root = Path(str(args["root"]))
    if root != CGROUP2_ROOT and CGROUP2_ROOT not in root.parents:
        return f"{root} is not a cgroup hierarchy"
    path = str(args["path"])
    if Path(path).parent != root:  # made right beneath the cgroup pgfsbench was in
        return f"{path} is not a cgroup pgfsbench makes beneath {root}"
    return cgroup_directory(r"pgfsbench-cpu-[0-9]+", under=root)(path)


@undo_action("remove_cpu_cgroup", bound=_cpu_group_bound)
def _remove_cpu_cgroup(runner: Runner, args: dict[str, object]) -> None:
    _remove_memory_cgroup(runner, args)  # the same: move what is left out, remove
