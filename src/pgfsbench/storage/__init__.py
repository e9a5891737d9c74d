"""Storage drivers, one per kind of storage configuration (spec `fs`)."""

from __future__ import annotations

from pgfsbench.storage.base import StorageDriver
from pgfsbench.storage.blockfs import BlockFsDriver
from pgfsbench.storage.existing import ExistingDriver


def driver_for(fs: str) -> StorageDriver:
    if fs in ("ext4", "xfs", "btrfs", "tmpfs"):
        return BlockFsDriver()
    if fs == "existing":
        return ExistingDriver()
    if fs == "zfs":
        from pgfsbench.storage.zfs import ZfsDriver

        return ZfsDriver()
    raise ValueError(f"no storage driver for {fs!r}")


def needs_root(fs: str) -> bool:
    return fs != "existing"
