"""The bounds of undo actions: what a journal step may name, so that a journal which is not
what pgfsbench wrote cannot make root delete, write, unmount, detach or kill anything else.

Each undo action is registered with one of these (system/journal.py). They are pure checks
of the step's arguments against the journal's scope (its work directory, its run's real
devices, its writer's identity), with the kernel read only where identity lives there
(a process's start time, a loop device's backing file).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path

from pgfsbench.system.journal import Bound, Scope
from pgfsbench.system.trust import inside

# fuse's switch for FUSE over io_uring (a boolean: Y or N), on while an emulated disk mounts
FUSE_URING = re.compile(r"/sys/module/fuse/parameters/enable_uring")
# What pgfsbench writes with restore_value: the kernel's vm.* sysctls, transparent huge
# pages, a loop device's rotational flag (emulated HDDs), OpenZFS's module parameters,
# fuse's switch for FUSE over io_uring.
KERNEL_FILES = (
    re.compile(r"/proc/sys/vm/[a-z0-9_-]+"),
    re.compile(r"/sys/kernel/mm/transparent_hugepage/(enabled|defrag)"),
    re.compile(r"/sys/block/loop[0-9]+/queue/rotational"),
    re.compile(r"/sys/module/zfs/parameters/[a-z0-9_]+"),
    FUSE_URING,
)
_BOOLEANS = frozenset({"Y", "N", "1", "0"})
_HUGE = 2**63 - 1
# The vm.* sysctls pgfsbench sets and restores, each with the values it may restore (a
# journal that restores vm.mmap_min_addr = 0, or enables userfaultfd for everyone, would
# weaken the host: such keys are not here, and are refused by the spec too).
VM_SYSCTLS: dict[str, tuple[int, int]] = {
    "dirty_background_bytes": (0, _HUGE),
    "dirty_background_ratio": (0, 100),
    "dirty_bytes": (0, _HUGE),
    "dirty_ratio": (0, 100),
    "dirty_expire_centisecs": (0, 2**31 - 1),
    "dirty_writeback_centisecs": (0, 2**31 - 1),
    "dirtytime_expire_seconds": (0, 2**31 - 1),
    "swappiness": (0, 200),
    "nr_hugepages": (0, 2**31 - 1),
    "nr_overcommit_hugepages": (0, 2**31 - 1),
    "overcommit_memory": (0, 2),
    "overcommit_ratio": (0, 2**31 - 1),
    "overcommit_kbytes": (0, _HUGE),
    "zone_reclaim_mode": (0, 7),
    "min_free_kbytes": (0, 2**31 - 1),
    "watermark_scale_factor": (1, 3000),
    "watermark_boost_factor": (0, 2**31 - 1),
    "vfs_cache_pressure": (0, 2**31 - 1),
    "stat_interval": (1, 2**31 - 1),
    "page-cluster": (0, 31),
    "max_map_count": (65530, 2**31 - 1),
}


def vm_value_problem(key: str, value: str) -> str | None:
    """Why ``value`` is not one pgfsbench may set or restore for the sysctl vm.``key``."""
    if key not in VM_SYSCTLS:
        return f"vm.{key} is not a sysctl pgfsbench sets (it sets {', '.join(VM_SYSCTLS)})"
    low, high = VM_SYSCTLS[key]
    try:
        number = int(value)
    except ValueError:
        return f"vm.{key} = {value!r} is not a number"
    if not low <= number <= high:
        return f"vm.{key} = {number} is outside {low}..{high}"
    return None


_INTEGERS = re.compile(r"-?[0-9]+( -?[0-9]+)*")
_CHOICE = re.compile(r"[a-z_+ \[\]]+")
DEV_NUMBERS = re.compile(r"[0-9]+:[0-9]+")
CGROUP_ROOT = Path("/sys/fs/cgroup")
POOL_PREFIX = "pgfsb_"  # every ZFS pool pgfsbench creates is named so, and only those


def in_workdir(*keys: str) -> Bound:
    """Each of ``keys`` names a path inside the journal's work directory."""

    def bound(args: dict[str, object], scope: Scope) -> str | None:
        for key in keys:
            value = args.get(key)
            if value is None:
                continue
            if not inside(str(value), scope.workdir):
                return f"{key} {value} is not inside the work directory {scope.workdir}"
        return None

    return bound


def own_directory_name(path: str, scope: Scope) -> bool:
    """A directory pgfsbench makes on a filesystem the user named (fs = "existing"):
    'pgfsbench-<date>-<time>-<pid of the journal's writer>-<cell>'."""
    name = Path(path).name
    pattern = rf"pgfsbench-[0-9]{{8}}-[0-9]{{6}}-{scope.writer_pid}-[A-Za-z0-9_.-]+"
    return (
        Path(path).is_absolute()
        and ".." not in Path(path).parts
        and scope.writer_pid is not None
        and re.fullmatch(pattern, name) is not None
    )


# the server's socket directory when the work directory's path is too long for a unix
# socket (engine/cell.socket_dir): /tmp/pgfsb- and 8 random hex digits, made 0700
SHORT_SOCKET_DIR = re.compile(r"/tmp/pgfsb-[0-9a-f]{8}")


def removable_path(args: dict[str, object], scope: Scope) -> str | None:
    path = str(args["path"])
    if ".." in Path(path).parts:  # refused as written, before any normalising
        return f"{path} goes through '..'"
    if inside(path, scope.workdir) or own_directory_name(path, scope):
        return None
    if SHORT_SOCKET_DIR.fullmatch(path):
        return None
    return f"{path} is neither inside the work directory {scope.workdir} nor a directory of its run"


def kernel_value(args: dict[str, object], scope: Scope) -> str | None:
    """restore_value: one of the kernel files pgfsbench changes, and a value of their kind
    (numbers; for a choice file, the words of its choices)."""
    path, value = str(args["path"]), str(args["value"])
    if os.path.normpath(path) != path or not any(p.fullmatch(path) for p in KERNEL_FILES):
        return f"{path} is not a kernel setting pgfsbench changes"
    if FUSE_URING.fullmatch(path):
        return None if value in _BOOLEANS else f"{value!r} is not a value {path} takes (Y or N)"
    choice = path.startswith("/sys/kernel/mm/transparent_hugepage/")
    if choice:
        if not _CHOICE.fullmatch(value):
            return f"{value!r} is not a value {path} takes"
        try:
            offered = Path(path).read_text().replace("[", " ").replace("]", " ").split()
        except OSError:
            offered = []
        words = value.replace("[", " ").replace("]", " ").split()
        if offered and not set(words) <= set(offered):
            return f"{value!r} is not among the choices of {path} ({' '.join(offered)})"
        return None
    if not _INTEGERS.fullmatch(value):
        return f"{value!r} is not a number, as {path} takes"
    if path.startswith("/proc/sys/vm/"):
        return vm_value_problem(path.removeprefix("/proc/sys/vm/"), value)
    return None


def dirty_pair(args: dict[str, object], scope: Scope) -> str | None:
    names = {"vm.dirty_background_bytes", "vm.dirty_background_ratio"}
    names |= {"vm.dirty_bytes", "vm.dirty_ratio"}
    for key, value in args.items():
        if key not in names:
            return f"{key} is not a sysctl pgfsbench restores as a pair"
        if not _INTEGERS.fullmatch(str(value)):
            return f"{key} = {value!r} is not a number"
        if (why := vm_value_problem(key.removeprefix("vm."), str(value))) is not None:
            return why
    if len(args) != 2:
        return "a pair names two sysctls"
    return None


def started_by_run(pid: object, start: object, scope: Scope) -> str | None:
    """A process pgfsbench may end: named by pid and start time, started after the journal's
    writer on the same boot (on another boot it is gone, and the pid means nothing)."""
    if not isinstance(pid, int) or pid <= 1:
        return f"pid {pid!r} is not a process pgfsbench can have started"
    if not isinstance(start, int):
        return f"pid {pid} has no start time to identify it by"
    if scope.writer_start is None:
        return f"pid {pid}: the journal does not say when its writer started"
    if start < scope.writer_start:
        return f"pid {pid} started before the run that wrote the journal"
    return None


def process_group(args: dict[str, object], scope: Scope) -> str | None:
    """A process group the journal's writer started, in this boot (the undo ends it only
    while the boot is the journal's: on another, its pid names someone else)."""
    boot = args.get("boot_id")
    if boot is not None and boot != scope.boot_id:
        return f"pid {args.get('pid')} was started on another boot than the journal's"
    return started_by_run(args.get("pid"), args.get("start_time"), scope)


def pool_name(prefix: str) -> Bound:
    """A ZFS pool pgfsbench created: its prefix, a name of plain characters."""

    def bound(args: dict[str, object], scope: Scope) -> str | None:
        name = str(args["name"])
        if not re.fullmatch(rf"{re.escape(prefix)}[A-Za-z0-9_.]+", name):
            return f"{name} is not the name of a pool pgfsbench creates"
        guid = args.get("guid")
        if guid is not None and not re.fullmatch(r"[0-9]+", str(guid)):
            return f"guid {guid!r} is not a pool's guid"
        return in_workdir("dir")(args, scope)

    return bound


def cgroup_file(*names: str, under: Path = CGROUP_ROOT) -> Callable[[str], str | None]:
    """A cgroup file pgfsbench writes: one of ``names`` under the cgroup hierarchy."""

    def check(path: str) -> str | None:
        p = Path(path)
        if os.path.normpath(path) != path or p.name not in names or under not in p.parents:
            return f"{path} is not a cgroup file pgfsbench writes"
        return None

    return check


def cgroup_directory(pattern: str, under: Path = CGROUP_ROOT) -> Callable[[str], str | None]:
    """A cgroup pgfsbench makes: a directory whose name matches ``pattern``."""

    def check(path: str) -> str | None:
        p = Path(path)
        if os.path.normpath(path) != path or under not in p.parents:
            return f"{path} is not under {under}"
        if not re.fullmatch(pattern, p.name):
            return f"{path} is not a cgroup pgfsbench makes"
        return None

    return check


def device_of_run(device: str, scope: Scope) -> str | None:
    """A block device a step may wipe or stop: one the run was given (the spec's real
    devices, which the guard passed), or a loop device over an image in the work directory."""
    if device in scope.devices:
        return None
    name = Path(device).name
    if re.fullmatch(r"/dev/loop[0-9]+", device):
        try:
            backing = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
        except OSError:
            return None  # detached: there is nothing left to act on
        backing = backing.removesuffix(" (deleted)")
        if inside(backing, scope.workdir):
            return None
        return f"{device} is backed by {backing}, outside the work directory"
    return f"{device} is not a device this run was given"
