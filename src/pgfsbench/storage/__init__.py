"""Storage drivers, one per kind of storage (spec/kinds.py names each kind's driver)."""

from __future__ import annotations

from typing import Any

from pgfsbench.spec.kinds import STORAGE_KINDS, resolve, storage_kind, syncs_before_measure
from pgfsbench.storage.base import ProvisionedStorage, StorageDriver, Volume
from pgfsbench.system.errors import PgfsbenchError
from pgfsbench.system.runner import Runner


def driver_for(fs: str) -> StorageDriver[Any]:
    """The driver of a kind of storage (imported when first needed: ZFS's is large)."""
    driver = resolve(storage_kind(fs).driver)
    if not isinstance(driver, StorageDriver):
        raise TypeError(f"{storage_kind(fs).driver} is not a StorageDriver")
    return driver


def needs_root(fs: str) -> bool:
    return storage_kind(fs).needs_root


def volume_info(runner: Runner, volume: Volume) -> str:
    """What a volume's filesystem says about itself (tune2fs -l, xfs_info, btrfs usage),
    also for a user's existing directory on a filesystem of a kind we know."""
    if volume.fs not in {k.name for k in STORAGE_KINDS}:
        return ""
    try:
        return driver_for(volume.fs).info(volume, runner)
    except PgfsbenchError as exc:  # for the record only: a missing tool is said, not fatal
        return f"(not read: {exc})"


def sync_volumes(runner: Runner, storage: ProvisionedStorage) -> None:
    """syncfs(2) on the filesystems under test only (never sync(2): another filesystem,
    frozen or slow, must not hold us up); a kind that flushes itself (ZFS commits its
    transaction group in its driver, tmpfs is RAM) is left alone."""
    for volume in storage.volumes:
        if syncs_before_measure(volume.fs):
            runner.run(["sync", "--file-system", str(volume.mountpoint)], timeout=300, check=False)
