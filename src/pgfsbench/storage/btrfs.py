"""btrfs: mkfs and information commands (pure argv builders), and its driver: with
`snapshots`, the data directory is a subvolume, snapshotted during the measured phase."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgfsbench.spec import FilesystemStorage
from pgfsbench.storage.base import ProvisionContext, ProvisionedStorage, Volume, settle_commands
from pgfsbench.storage.blockfs import MkfsDriver
from pgfsbench.storage.snapshots import Snapshotter
from pgfsbench.system.held import Held, new_dir
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner


def mkfs_argv(device: str, options: list[str]) -> list[str]:
    return ["mkfs.btrfs", "-f", *options, device]


def info_argv(device: str, mountpoint: Path) -> list[str]:
    return ["btrfs", "filesystem", "usage", "-b", str(mountpoint)]


@dataclass(frozen=True)
class BtrfsDriver(MkfsDriver):
    def settle(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, object]:
        """`btrfs subvolume sync`: the cleaning of deleted subvolumes (the snapshots of a
        run before) done, on each btrfs volume."""
        return settle_commands(
            runner,
            [
                ("btrfs subvolume sync", ["btrfs", "subvolume", "sync", str(v.mountpoint)])
                for v in storage.volumes
                if v.fs == "btrfs"
            ],
        )

    def data_directory(
        self, config: FilesystemStorage, data: Volume, ctx: ProvisionContext
    ) -> Path:
        pgdata = data.mountpoint / "pgdata"
        if config.snapshots is None:
            return pgdata
        # the data directory as a subvolume, so that it can be snapshotted; snapshots go
        # next to it (the filesystem, and they with it, goes at teardown)
        ctx.runner.run(["btrfs", "subvolume", "create", str(pgdata)], timeout=60)
        # root's, in the filesystem's root (root's): the server's user is handed the data
        # directory when it holds a cluster (postgres/instance.py)
        new_dir(data.mountpoint / "snapshots", 0o700)
        with Held.open(pgdata) as subvolume:
            subvolume.hand_to(None, 0o700)
        return pgdata

    def snapshotter(
        self,
        config: FilesystemStorage,
        storage: ProvisionedStorage,
        journal: Journal,
        runner: Runner,
    ) -> Snapshotter | None:
        if config.snapshots is None:
            return None
        return Snapshotter(
            "btrfs",
            [str(storage.pgdata)],
            storage.data.mountpoint / "snapshots",
            config.snapshots.every,
            config.snapshots.keep,
            journal,
            runner,
        )


DRIVER = BtrfsDriver("btrfs", mkfs_argv, info_argv)
