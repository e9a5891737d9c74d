"""Filesystems made with mkfs on a device and mounted: ext4, xfs, btrfs (and tmpfs for RAM).

The per-filesystem modules hold the pure parts (mkfs argv, info commands); this module
is the shared sequence: device -> mkfs -> mount -> directory for PostgreSQL.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgfsbench.spec import BtrfsStorage, Ext4Storage, TmpfsStorage, WalVolume, XfsStorage
from pgfsbench.storage import btrfs, ext4, tmpfs, xfs
from pgfsbench.storage.base import (
    ProvisionContext,
    ProvisionedStorage,
    Volume,
    prepare_dir,
    space_figures,
)
from pgfsbench.storage.mounts import mount
from pgfsbench.system.runner import Runner
from pgfsbench.units import parse_size

MKFS = {"ext4": ext4.mkfs_argv, "xfs": xfs.mkfs_argv, "btrfs": btrfs.mkfs_argv}
INFO = {"ext4": ext4.info_argv, "xfs": xfs.info_argv, "btrfs": btrfs.info_argv}


def make_volume(ctx: ProvisionContext, role: str, fs: str, device: str, size: str,
                mkfs_options: list[str], mount_options: list[str]) -> Volume:
    target = ctx.directory / "mnt" / role
    if fs == "tmpfs":
        opts = tmpfs.mount_options(parse_size(size), mount_options)
        info = mount(ctx.journal, ctx.runner, "pgfsbench", target, "tmpfs", opts)
        return Volume(role, fs, target, "tmpfs", (), info.options)
    dev = ctx.devices.get(device, role)
    argv = MKFS[fs](dev.path, mkfs_options)
    # mkfs needs no undo of its own: it only writes to a device we own or were allowed to erase.
    ctx.journal.note(step=f"mkfs {dev.path}", argv=argv)
    done = ctx.runner.run(argv, timeout=600)
    info = mount(ctx.journal, ctx.runner, dev.path, target, fs, mount_options)
    details: dict[str, Any] = {"device_size_bytes": dev.size_bytes}
    if dev.backing_file:
        details["loop_backing_file"] = dev.backing_file
        details["loop_direct_io"] = True
    return Volume(role, fs, target, dev.path, (dev.path,), info.options, tuple(argv),
                  (done.stdout + done.stderr).strip(), details)


@dataclass(frozen=True)
class BlockFsDriver:
    def check(self, config: Any, runner: Runner, workdir: Path) -> None:
        return None

    def provision(self, name: str, config: Any, ctx: ProvisionContext) -> ProvisionedStorage:
        if isinstance(config, TmpfsStorage):
            data = make_volume(ctx, "data", "tmpfs", "", config.size, [], config.mount_options)
        else:
            assert isinstance(config, Ext4Storage | XfsStorage | BtrfsStorage)
            data = make_volume(ctx, "data", config.fs, config.device, "0", config.mkfs_options,
                               config.mount_options)
        pgdata = data.mountpoint / "pgdata"
        if getattr(config, "snapshots", None) is not None:
            # the data directory as a subvolume, so that it can be snapshotted; snapshots
            # go next to it (the filesystem, and they with it, goes at teardown)
            ctx.runner.run(["btrfs", "subvolume", "create", str(pgdata)], timeout=60)
            (data.mountpoint / "snapshots").mkdir(mode=0o700)
            if ctx.postgres_user:
                shutil.chown(pgdata, ctx.postgres_user, ctx.postgres_user)
            pgdata.chmod(0o700)
        wal_volume, waldir = None, None
        if config.wal is not None:
            wal_volume = wal_volume_for(ctx, config.wal)
            waldir = wal_volume.mountpoint / "pg_wal"
            prepare_dir(waldir, ctx.postgres_user)
        # initdb wants to create pgdata itself or find it empty; make the parent ours
        prepare_dir(data.mountpoint, ctx.postgres_user)
        roles = {"data": data.devices}
        if wal_volume is not None:
            roles["wal"] = wal_volume.devices
        return ProvisionedStorage(name, config.fs, data, pgdata, wal_volume, waldir,
                                  device_roles={k: v for k, v in roles.items() if v})

    def space(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, Any]:
        return dict(space_figures(storage))


def wal_volume_for(ctx: ProvisionContext, wal: WalVolume) -> Volume:
    return make_volume(ctx, "wal", wal.fs, wal.device, wal.size, wal.mkfs_options,
                       wal.mount_options)


def fs_info(runner: Runner, volume: Volume) -> str:
    """tune2fs -l / xfs_info / btrfs filesystem usage output, for the environment record."""
    builder = INFO.get(volume.fs)
    if builder is None:
        return ""
    done = runner.run(builder(volume.source, volume.mountpoint), timeout=60, check=False)
    return (done.stdout + done.stderr).strip()
