"""Filesystems made with mkfs on a device and mounted (ext4, xfs, btrfs...), and the
volumes of a storage (its data, a separate WAL volume of any kind that can hold one).

Each filesystem's module holds its pure parts (mkfs argv, info argv) and its driver, an
instance of MkfsDriver; this module is the shared sequence: device -> mkfs -> mount ->
directory for PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgfsbench.spec import FilesystemStorage, WalVolume
from pgfsbench.spec.kinds import resolve, storage_kind
from pgfsbench.storage import lvm, md
from pgfsbench.storage.aging import Entry
from pgfsbench.storage.base import (
    ProvisionContext,
    ProvisionedStorage,
    StorageDriver,
    Volume,
    prepare_dir,
    prepare_volume_root,
)
from pgfsbench.storage.mounts import mount
from pgfsbench.storage.snapshots import Snapshotter
from pgfsbench.system.errors import CapabilityError, CommandError, ProvisionError
from pgfsbench.system.journal import Journal
from pgfsbench.system.mountinfo import disconnected
from pgfsbench.system.runner import Runner

MkfsArgv = Callable[[str, list[str]], list[str]]
InfoArgv = Callable[[str, Path], list[str]]
MountOptions = Callable[[list[str]], list[str]]  # the user's mount options -> what is used


def as_given(options: list[str]) -> list[str]:
    return list(options)


class VolumeDriver(StorageDriver[Any]):
    """A kind that can make a volume of its own: the data's, or pg_wal's."""

    def volume(
        self, ctx: ProvisionContext, role: str, spec: FilesystemStorage | WalVolume
    ) -> Volume:
        raise NotImplementedError


def volume_driver(fs: str) -> VolumeDriver:
    driver = resolve(storage_kind(fs).driver)
    assert isinstance(driver, VolumeDriver), f"{fs} cannot hold a volume of its own"
    return driver


def wal_volume(ctx: ProvisionContext, wal: WalVolume | None) -> tuple[Volume | None, Path | None]:
    """A separate volume for pg_wal, of whatever kind the spec asks."""
    if wal is None:
        return None, None
    volume = volume_driver(wal.fs).volume(ctx, "wal", wal)
    waldir = volume.mountpoint / "pg_wal"
    prepare_dir(waldir, ctx.postgres_user)
    return volume, waldir


def provisioned(
    name: str, fs: str, data: Volume, pgdata: Path, ctx: ProvisionContext, wal: WalVolume | None
) -> ProvisionedStorage:
    """The storage, its WAL volume made and the data volume's root root's, traversable
    (pgfsbench makes pgdata in it: postgres/instance.py)."""
    wal_vol, waldir = wal_volume(ctx, wal)
    prepare_volume_root(data.mountpoint)
    roles = {"data": data.devices, **({"wal": wal_vol.devices} if wal_vol else {})}
    return ProvisionedStorage(
        name, fs, data, pgdata, wal_vol, waldir, device_roles={k: v for k, v in roles.items() if v}
    )


@dataclass(frozen=True)
class MkfsDriver(VolumeDriver):
    """A filesystem made by mkfs on a device (a loop file or a device the user named)."""

    fs: str
    mkfs_argv: MkfsArgv
    info_argv: InfoArgv
    mount_options: MountOptions = as_given

    def check(self, config: FilesystemStorage, runner: Runner, workdir: Path) -> None:
        if config.lvm is not None:
            why = lvm.unavailable(runner)
            if why is not None:
                raise CapabilityError(f"lvm: not possible here: {why}")
        if config.md is not None:
            why = md.unavailable(runner, config.md.level)
            if why is not None:
                raise CapabilityError(f"md {config.md.level}: not possible here: {why}")

    def volume(
        self, ctx: ProvisionContext, role: str, spec: FilesystemStorage | WalVolume
    ) -> Volume:
        target = ctx.directory / "mnt" / role
        raid = spec.md if isinstance(spec, FilesystemStorage) else None
        aged = ctx.aged.get(role)
        if aged is not None:
            return self._aged_volume(ctx, role, spec, aged, target)
        members = [ctx.devices.get(d, role) for d in (raid.devices if raid else [spec.device])]
        dev = members[0]
        path = dev.path
        details: dict[str, Any] = {"device_size_bytes": dev.size_bytes}
        if raid is not None:
            path, details["md"] = md.make_array(
                ctx.journal,
                ctx.runner,
                md.array_name(ctx.directory, role),
                raid.level,
                [m.path for m in members],
                raid.chunk_kib(),
                raid.assume_clean,
            )
            details["device_size_bytes"] = details["md"]["array_bytes"]
            details["md"]["member_details"] = {
                m.path: {"size_bytes": m.size_bytes, "backing_file": m.backing_file, **m.details}
                for m in members
            }
        if isinstance(spec, FilesystemStorage) and spec.lvm is not None:
            group = lvm.group_name(ctx.directory, role)
            path, details["lvm"] = lvm.make_volume(
                ctx.journal, ctx.runner, path, group, spec.lvm.snapshot_pct
            )
        argv = self.mkfs_argv(path, spec.mkfs_options)
        # mkfs needs no undo of its own: it only writes to a device we own or may erase
        ctx.journal.note(step=f"mkfs {path}", argv=argv)
        try:
            done = ctx.runner.run(argv, timeout=600)
        except CommandError as e:
            stale = disconnected() if "not connected" in str(e) else []
            if not stale:
                raise
            raise ProvisionError(
                f"{e}: mkfs reads the whole mount table, and these mounts are disconnected "
                f"(a FUSE daemon ended under them): {'; '.join(stale)}; unmount them "
                "(`pgfsbench cleanup` if a killed run of ours left them)"
            ) from e
        info = mount(
            ctx.journal, ctx.runner, path, target, self.fs, self.mount_options(spec.mount_options)
        )
        if dev.backing_file and raid is None:
            details["loop_backing_file"] = dev.backing_file
            details["loop_direct_io"] = True
        if raid is None:
            details.update(dev.details)
        return Volume(
            role,
            self.fs,
            target,
            path,
            tuple(m.path for m in members),
            info.options,
            tuple(argv),
            (done.stdout + done.stderr).strip(),
            details,
        )

    def _aged_volume(
        self,
        ctx: ProvisionContext,
        role: str,
        spec: FilesystemStorage | WalVolume,
        aged: Entry,
        target: Path,
    ) -> Volume:
        """The volume on a block-level copy of an aged image: no mkfs (the image holds
        the filesystem, made with these options and aged), mounted with its options."""
        dev = ctx.devices.get(spec.device, role, initial=aged)
        ctx.journal.note(step=f"aged image {aged.key} on {dev.path}")
        info = mount(
            ctx.journal,
            ctx.runner,
            dev.path,
            target,
            self.fs,
            self.mount_options(spec.mount_options),
        )
        details: dict[str, Any] = {
            "device_size_bytes": dev.size_bytes,
            **dev.details,
            "age": {
                "image": aged.key,
                "recipe": aged.manifest.get("recipe"),
                "made": aged.manifest.get("made"),
                "aging": aged.manifest.get("churn"),
                "state_after_aging": aged.manifest.get("state"),
                "copy_seconds": dev.details.get("aged_copy_seconds"),
            },
        }
        if dev.backing_file:
            details["loop_backing_file"] = dev.backing_file
            details["loop_direct_io"] = True
        mkfs = tuple(str(a) for a in aged.manifest.get("mkfs_argv") or ())
        return Volume(
            role,
            self.fs,
            target,
            dev.path,
            (dev.path,),
            info.options,
            mkfs,
            f"(aged image {aged.key}, made {aged.manifest.get('made')})",
            details,
        )

    def provision(
        self, name: str, config: FilesystemStorage, ctx: ProvisionContext
    ) -> ProvisionedStorage:
        data = self.volume(ctx, "data", config)
        pgdata = self.data_directory(config, data, ctx)
        return provisioned(name, self.fs, data, pgdata, ctx, config.wal)

    def data_directory(
        self, config: FilesystemStorage, data: Volume, ctx: ProvisionContext
    ) -> Path:
        """Where initdb puts the data directory on the data volume."""
        return data.mountpoint / "pgdata"

    def info(self, volume: Volume, runner: Runner) -> str:
        done = runner.run(self.info_argv(volume.source, volume.mountpoint), timeout=60, check=False)
        return (done.stdout + done.stderr).strip()

    def snapshotter(
        self,
        config: FilesystemStorage,
        storage: ProvisionedStorage,
        journal: Journal,
        runner: Runner,
    ) -> Snapshotter | None:
        """LVM snapshots of the data volume (ext4, xfs on `lvm`): each gets an equal part of
        the group's free space, enough for `keep` of them and the one being taken."""
        made = storage.data.details.get("lvm")
        if config.snapshots is None or not made:
            return None
        free = lvm.free_bytes(runner, str(made["group"])) or 0
        size = (free // (config.snapshots.keep + 1)) // (4 << 20) * (4 << 20)  # whole extents
        return Snapshotter(
            "lvm",
            [str(made["lv"])],
            None,
            config.snapshots.every,
            config.snapshots.keep,
            journal,
            runner,
            size_bytes=size,
        )
