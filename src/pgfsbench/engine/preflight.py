"""Everything that can be refused is refused here, before anything is created or changed:
root, the PostgreSQL OS user, binaries, the work directory, what the storage drivers and
the kernel can do, the real devices (the guard), the workloads' files.

Only when every check has passed is the work directory created or made traversable.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import stat
from dataclasses import dataclass, field
from pathlib import Path

from pgfsbench import kernel
from pgfsbench.plan import Plan, is_root
from pgfsbench.postgres import pgbouncer
from pgfsbench.postgres.binaries import (
    Binaries,
    find_binaries,
    io_uring_unsupported,
    setting_problems,
    unknown_settings,
)
from pgfsbench.postgres.instance import SUPERUSER
from pgfsbench.spec import Cell, LoadedSpec
from pgfsbench.spec.models import EmulatedDevice
from pgfsbench.storage import driver_for, limits
from pgfsbench.storage.devices import DevicePolicy, check_real_device, fuse_uring_unsupported
from pgfsbench.system.access import first_unreachable
from pgfsbench.system.cpus import CpuSplit, split_cpus
from pgfsbench.system.errors import CapabilityError, NeedsRootError, UsageError
from pgfsbench.system.held import Held
from pgfsbench.system.runner import Runner
from pgfsbench.system.trust import check_workdir_trusted, make_trusted_dir
from pgfsbench.workloads import workload_for


@dataclass(frozen=True)
class Ready:
    """What the preflight established for the campaign."""

    binaries: Binaries
    os_user: str | None  # PostgreSQL and the benchmark run as this user (None: ourselves)
    workdir: Path
    by_bindir: dict[str, Binaries] = field(default_factory=dict)  # configurations' own
    # cells this machine cannot run (io_method = io_uring without liburing...): id -> why
    unsupported: dict[str, str] = field(default_factory=dict)
    # defaults.server_cpus on this host: the server side's CPUs and the clients'
    cpu_split: CpuSplit | None = None


def check_postgres_versions(
    cells: list[Cell], default: Binaries
) -> tuple[dict[str, Binaries], dict[str, str], list[str]]:
    """Each configuration's PostgreSQL (its own bindir, else the default): the binaries by
    bindir, the cells it cannot run here and why, and the settings it does not know."""
    by_bindir: dict[str, Binaries] = {}
    unsupported: dict[str, str] = {}
    problems: list[str] = []
    for cell in cells:
        pg = cell.postgres
        if pg.bindir and pg.bindir not in by_bindir:
            by_bindir[pg.bindir] = find_binaries(pg.bindir)
        binaries = by_bindir[pg.bindir] if pg.bindir else default
        unknown = unknown_settings(binaries, list(pg.settings))
        if unknown:
            problems.append(
                f"postgres {cell.postgres_name}: PostgreSQL {binaries.version} has "
                f"no setting {', '.join(unknown)}"
            )
        problems += [
            f"postgres {cell.postgres_name}: {p} (PostgreSQL {binaries.version})"
            for p in setting_problems(binaries, dict(pg.settings))
        ]
        method = str(pg.settings.get("io_method", "")).lower()
        if method == "io_uring":
            why = io_uring_unsupported(binaries)
            if why is not None:
                unsupported[cell.id] = f"io_method = io_uring is not supported here: {why}"
    return by_bindir, unsupported, problems


def emulated_disks_unsupported(cells: list[Cell]) -> dict[str, str]:
    """The cells whose emulated disks ask for what this kernel lacks (FUSE over io_uring),
    and why: an answer, not a failed run."""
    why = fuse_uring_unsupported()
    if why is None:
        return {}
    return {
        cell.id: f'an emulated disk\'s transport = "io_uring" is not supported here: {why}'
        for cell in cells
        if any(
            isinstance(d, EmulatedDevice) and d.transport == "io_uring"
            for _, d in cell.storage.devices()
        )
    }


def postgres_os_user() -> str | None:
    """As root, PostgreSQL runs as the 'postgres' OS user; otherwise as ourselves."""
    if not is_root():
        return None
    try:
        pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise UsageError(
            "running as root needs a 'postgres' OS user to run PostgreSQL as "
            "(Debian's postgresql package creates it)"
        ) from None
    return SUPERUSER


def require_root(plan: Plan) -> None:
    if plan.needs_root and not is_root():
        raise NeedsRootError(
            "provisioning storage (losetup, mkfs, mount, sysctl) needs root; "
            'run as root, or use storage with fs = "existing"'
        )


def check_workdir(workdir: Path, os_user: str | None) -> None:
    """Refuse a work directory we could not use, or that someone other than root could
    have written into (system/trust.py), without changing anything."""
    check_workdir_trusted(workdir)
    probe = workdir
    while not probe.exists():
        probe = probe.parent
    if probe != workdir and not probe.is_dir():
        raise UsageError(f"--workdir {workdir}: {probe} is not a directory")
    if workdir.exists():
        if not workdir.is_dir():
            raise UsageError(f"--workdir {workdir}: not a directory")
        if not os.access(workdir, os.W_OK | os.X_OK):
            raise UsageError(
                f"--workdir {workdir} is not writable by this user; choose another with --workdir"
            )
    elif not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--workdir {workdir}: cannot create it in {probe} (not writable)")
    if os_user is None:
        return
    # the PostgreSQL OS user must be able to traverse every ancestor; the work directory
    # itself is made traversable only if we own it (and only after every check)
    blocked = first_unreachable(probe if probe != workdir else workdir.parent, os_user)
    if blocked is not None:
        mode = stat.filemode(blocked.stat().st_mode)
        raise UsageError(
            f"--workdir {workdir}: the {os_user} OS user cannot enter {blocked} "
            f"(mode {mode}); choose a directory under /var/tmp"
        )
    if (
        workdir.exists()
        and workdir.stat().st_uid != os.geteuid()
        and first_unreachable(workdir, os_user) is not None
    ):
        raise UsageError(
            f"--workdir {workdir}: the {os_user} OS user cannot enter it and "
            "it is not ours to change"
        )


def make_workdir(workdir: Path) -> None:
    make_trusted_dir(workdir)
    with Held.open(workdir) as held:
        st = held.stat()
        if st.st_uid == os.geteuid():
            held.hand_to(None, st.st_mode | 0o755)


def preflight(
    loaded: LoadedSpec, plan: Plan, workdir: Path, policy: DevicePolicy, runner: Runner
) -> Ready:
    require_root(plan)
    os_user = postgres_os_user()
    check_workdir(workdir, os_user)
    binaries = find_binaries(loaded.spec.defaults.pg_bindir)
    by_bindir, unsupported, problems = check_postgres_versions(plan.cells, binaries)
    unsupported |= emulated_disks_unsupported(plan.cells)
    for cell in plan.cells:
        problems += [f"kernel {cell.kernel_name}: {p}" for p in kernel.check(cell.kernel)]
        problems += workload_for(cell, loaded.spec.defaults).problems(
            cell, loaded.base_dir, os_user
        )
    if any(cell.postgres.pooler is not None for cell in plan.cells):
        bouncer = pgbouncer.version(runner)  # not installed: refused here, not in a cell
        for cell in plan.cells:
            problems += pgbouncer.problems(cell, bouncer)
    split: CpuSplit | None = None
    if loaded.spec.defaults.server_cpus is not None:
        try:
            split = split_cpus(loaded.spec.defaults.server_cpus)
        except ValueError as exc:
            problems.append(str(exc))
    if problems:
        raise UsageError("; ".join(dict.fromkeys(problems)))
    if any(limits.configured(c.storage) for c in plan.cells):
        limits.require()
    if loaded.spec.defaults.memory_limit:
        why = kernel.memory_cgroup_available()
        if why is not None:
            raise CapabilityError(why)
    for dev in plan.real_devices:
        check_real_device(runner, dev, policy)
    created = not workdir.exists()
    make_workdir(workdir)
    try:
        for cell in plan.cells:
            driver_for(cell.fs).check(cell.storage, runner, workdir)
    except CapabilityError:
        if created:
            with contextlib.suppress(OSError):
                workdir.rmdir()
        raise
    return Ready(binaries, os_user, workdir, by_bindir, unsupported, split)
