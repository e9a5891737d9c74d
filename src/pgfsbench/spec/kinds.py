"""One row per kind of storage and per workload tool: everything else is built from here.

The spec's unions (what `fs` and `tool` may say, and the model each selects), the error
messages' tag tables, the doctor's and the advisor's choices, the engine's capabilities
(copy-on-write, native snapshots, a sync before measuring, a cache to evict), the artifacts
a tool leaves and the units of its series all come from these rows. Adding a filesystem is
one module under `storage/` (its mkfs argv and its driver) and one row here.

The spec sits below the storage and workload packages, so a row names its driver by its
import path ("module:attribute"), resolved when the engine needs it
(`storage.driver_for`, `workloads.workload_for`); a unit test resolves every row.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Annotated, Literal, TypeAlias, Union

from pydantic import Discriminator, Field, Tag, create_model

from pgfsbench.spec.cluster import PvcStorage
from pgfsbench.spec.models import (
    BtrfsStorage,
    CopyWorkload,
    DumpWorkload,
    ExistingStorage,
    Ext4Storage,
    FilesystemStorage,
    KindFacts,
    PgbenchWorkload,
    ReplayWorkload,
    StorageCommon,
    SysbenchWorkload,
    TmpfsStorage,
    WorkloadBase,
    XfsStorage,
    ZfsStorage,
    register_kinds,
)
from pgfsbench.system.errors import SpecError


@dataclass(frozen=True)
class StorageKind:
    """A kind of storage configuration (the spec's `fs`)."""

    name: str
    model: type[StorageCommon]
    driver: str  # "module:attribute" of its StorageDriver
    summary: str
    mkfs: bool = False  # a filesystem made on a device (mkfs, mount; limits apply)
    ram: bool = False  # lives in memory: never a candidate's figures, no device beneath
    copy_on_write: bool = False  # full_page_writes and wal_init_zero matter differently
    snapshots: bool = False  # native snapshots during the measured phase
    # syncfs(2) before measuring flushes it (ZFS commits its transaction group itself,
    # tmpfs has nothing to flush)
    sync_before_measure: bool = True
    needs_root: bool = True
    # runs in a pod of a Kubernetes cluster (`[kubernetes]`), never on the host itself
    cluster: bool = False
    # the kernel wait channels (prefixes) of its own I/O paths: a process asleep in one
    # waits for this filesystem's I/O (the diagnosis reads them)
    wait_channels: tuple[str, ...] = ()
    volume: bool = False  # can hold a separate WAL volume (`wal = { fs = ... }`)
    host_fstype: bool = True  # a filesystem type a host can mount (doctor, advise)
    # how much more room than the data it needs, over what any filesystem needs (plan's
    # warning): btrfs keeps the old copy of each block until its transaction commits and
    # allocates metadata in chunks of its own (DUP: twice over); a 4 GiB btrfs held pgbench
    # scale 100 after the load (2.7 GB used, as ext4 and ZFS) and ran out of space during
    # the run, while ZFS on the same 4 GiB did not (yohgaki example, 100 clients, 2026-11-26)
    space_headroom: float = 1.0


@dataclass(frozen=True)
class WorkloadTool:
    """A load generator (the spec's workload `tool`)."""

    name: str
    model: type[WorkloadBase]
    workload: str  # "module:attribute" of a factory (cell, defaults) -> Workload
    summary: str
    # the files a run of it leaves in the artifacts directory, by the kind they are stored as
    artifacts: Mapping[str, str] = field(default_factory=dict)
    series_units: Mapping[str, str] = field(default_factory=dict)
    load_seconds_per_scale: float = 0.6  # plan's estimate, measured on a small machine
    paced: bool = True  # takes a rate (a dump or a bulk load is not paced)


def filesystem_model(name: str) -> type[FilesystemStorage]:
    """The spec model of a filesystem made by mkfs that needs no option of its own."""
    return create_model(
        f"{name.capitalize()}Storage",
        __base__=FilesystemStorage,
        fs=(Literal[name], ...),  # type: ignore[arg-type]
    )


STORAGE_KINDS: tuple[StorageKind, ...] = (
    StorageKind(
        "ext4",
        Ext4Storage,
        "pgfsbench.storage.ext4:DRIVER",
        "ext4 made by mkfs",
        mkfs=True,
        volume=True,
        wait_channels=("ext4_", "jbd2"),
    ),
    StorageKind(
        "xfs",
        XfsStorage,
        "pgfsbench.storage.xfs:DRIVER",
        "XFS made by mkfs",
        mkfs=True,
        volume=True,
        wait_channels=("xfs_", "xlog"),
    ),
    StorageKind(
        "btrfs",
        BtrfsStorage,
        "pgfsbench.storage.btrfs:DRIVER",
        "btrfs made by mkfs (the data directory a subvolume when snapshotted)",
        mkfs=True,
        copy_on_write=True,
        snapshots=True,
        volume=True,
        space_headroom=1.5,
        wait_channels=("btrfs_",),
    ),
    StorageKind(
        "tmpfs",
        TmpfsStorage,
        "pgfsbench.storage.tmpfs:DRIVER",
        "RAM: the ceiling no disk reaches",
        ram=True,
        sync_before_measure=False,
        volume=True,
    ),
    StorageKind(
        "existing",
        ExistingStorage,
        "pgfsbench.storage.existing:DRIVER",
        "a directory on a filesystem already mounted (never formatted)",
        needs_root=False,
        host_fstype=False,
    ),
    StorageKind(
        "zfs",
        ZfsStorage,
        "pgfsbench.storage.zfs:DRIVER",
        "an OpenZFS (kernel) or zfs-fuse pool and its datasets",
        copy_on_write=True,
        snapshots=True,
        sync_before_measure=False,
        # OpenZFS in the kernel (zfs-fuse's waits are the FUSE daemon's, in userspace)
        wait_channels=("zio_wait", "txg_wait", "zil_commit"),
    ),
    StorageKind(
        "pvc",
        PvcStorage,
        "pgfsbench.storage.pvc:DRIVER",
        "a PersistentVolumeClaim of a StorageClass and a size, in a pod of a cluster",
        needs_root=False,
        host_fstype=False,
        cluster=True,
    ),
)

# the series every transaction tool reports each second (pgbench -P, sysbench --report)
_TX_SERIES = {
    "tps": "tps",
    "latency_avg_ms": "ms",
    "latency_stddev_ms": "ms",
    "lag_ms": "ms",
    "failed": "tx",
}

WORKLOAD_TOOLS: tuple[WorkloadTool, ...] = (
    WorkloadTool(
        "pgbench",
        PgbenchWorkload,
        "pgfsbench.workloads.pgbench:for_cell",
        "pgbench: a builtin script or your own",
        # pgbench -i and its write-out: 0.13 s per scale at scale 2, 0.09 at scale 50
        # (bench/results/own-time-*-2026-11-27.json); the larger share of the small scale
        # is the fixed part of a load (vacuum, primary keys)
        load_seconds_per_scale=0.13,
        artifacts={
            "pgbench.stdout": "pgbench_stdout",
            "pgbench.stderr": "pgbench_stderr",
            "warmup.stdout": "warmup_stdout",
            "warmup.stderr": "warmup_stderr",
            "pgbench-init.txt": "pgbench_init",
            "txlog.gz": "txlog",
        },
        series_units=_TX_SERIES,
    ),
    WorkloadTool(
        "sysbench",
        SysbenchWorkload,
        "pgfsbench.workloads.sysbench:for_cell",
        "sysbench's OLTP scripts (pgsql driver)",
        artifacts={
            "sysbench.stdout": "sysbench_output",
            "sysbench-warmup.stdout": "sysbench_warmup_output",
            "sysbench-prepare.txt": "sysbench_prepare",
        },
        series_units=_TX_SERIES,
    ),
    WorkloadTool(
        "pg_dump",
        DumpWorkload,
        "pgfsbench.workloads.dump:for_cell",
        "pg_dump of the pgbench data, again and again (MB/s)",
        artifacts={"pgbench-init.txt": "pgbench_init"},
        paced=False,
    ),
    WorkloadTool(
        "copy",
        CopyWorkload,
        "pgfsbench.workloads.copy:for_cell",
        "bulk load by COPY (MB/s, rows/s)",
        paced=False,
    ),
    WorkloadTool(
        "replay",
        ReplayWorkload,
        "pgfsbench.workloads.replay:for_cell",
        "your own workload: a capture replayed (pgfsbench capture)",
        artifacts={
            "replay.stderr": "replay_stderr",
            "replay-stats.json": "replay_stats",
            "txlog.gz": "txlog",
        },
        series_units=_TX_SERIES,
        load_seconds_per_scale=0.0,
        paced=False,
    ),
)

_BY_FS = {k.name: k for k in STORAGE_KINDS}
_BY_TOOL = {t.name: t for t in WORKLOAD_TOOLS}


def storage_kind(fs: str) -> StorageKind:
    kind = _BY_FS.get(fs)
    if kind is None:
        raise SpecError(f"no kind of storage is called {fs!r} (kinds: {', '.join(_BY_FS)})")
    return kind


def workload_tool(tool: str) -> WorkloadTool:
    found = _BY_TOOL.get(tool)
    if found is None:
        raise SpecError(f"no workload tool is called {tool!r} (tools: {', '.join(_BY_TOOL)})")
    return found


def volume_kinds() -> tuple[StorageKind, ...]:
    return tuple(k for k in STORAGE_KINDS if k.volume)


# what the models' own validators need of the kinds (they cannot import this module)
register_kinds(
    KindFacts(
        ram=lambda fs: storage_kind(fs).ram,
        snapshots=lambda fs: storage_kind(fs).snapshots,
        volume_kinds=lambda: [k.name for k in volume_kinds()],
        snapshot_kinds=lambda: [k.name for k in STORAGE_KINDS if k.snapshots],
    )
)


def cluster_kinds() -> tuple[StorageKind, ...]:
    """The kinds that run in a pod ([kubernetes]), never on the host."""
    return tuple(k for k in STORAGE_KINDS if k.cluster)


def filesystem_wait_channels() -> tuple[str, ...]:
    """Every kind's own I/O wait channels (prefixes)."""
    return tuple(w for k in STORAGE_KINDS for w in k.wait_channels)


def host_fstypes() -> tuple[str, ...]:
    """The filesystem types the doctor and the advisor know how to judge."""
    return tuple(k.name for k in STORAGE_KINDS if k.host_fstype)


def syncs_before_measure(fstype: str) -> bool:
    """Whether syncfs(2) flushes a volume of this type (unknown types, say a user's
    existing NFS mount, are synced: it costs nothing where there is nothing to flush)."""
    kind = _BY_FS.get(fstype)
    return kind.sync_before_measure if kind is not None else True


def resolve(path: str) -> object:
    """The object a row names by "module:attribute"."""
    module, _, attribute = path.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _workload_tag(v: object) -> str:
    if isinstance(v, dict):
        return str(v.get("tool", "pgbench"))
    return str(getattr(v, "tool", "pgbench"))


def tool_choices() -> str:
    """What a workload's `tool` may say, in words."""
    names = [t.name for t in WORKLOAD_TOOLS]
    return f"tool must be {', '.join(names[:-1])} or {names[-1]}"


# mypy sees the common base of each union (a kind's own fields are reached through its
# driver, generic on its model, or an isinstance); pydantic sees the tagged union
if TYPE_CHECKING:
    StorageConfig: TypeAlias = StorageCommon
    WorkloadConfig: TypeAlias = WorkloadBase
else:
    StorageConfig = Annotated[
        Union[tuple(k.model for k in STORAGE_KINDS)],  # noqa: UP007
        Field(discriminator="fs"),
    ]
    WorkloadConfig = Annotated[
        Union[tuple(Annotated[t.model, Tag(t.name)] for t in WORKLOAD_TOOLS)],  # noqa: UP007
        Discriminator(_workload_tag, custom_error_type="tool", custom_error_message=tool_choices()),
    ]
