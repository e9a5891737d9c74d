"""tmpfs: RAM as the ceiling of what storage can give (the seeds' /tmp baseline)."""

from __future__ import annotations

from dataclasses import dataclass

from pgfsbench.spec import FilesystemStorage, TmpfsStorage, WalVolume
from pgfsbench.storage.base import ProvisionContext, ProvisionedStorage, Volume
from pgfsbench.storage.blockfs import VolumeDriver, provisioned
from pgfsbench.storage.mounts import mount
from pgfsbench.units import parse_size


def mount_options(size_bytes: int, extra: list[str]) -> list[str]:
    opts = [o for o in extra if not o.startswith("size=")]
    return [f"size={size_bytes}", "mode=0755", *opts]


@dataclass(frozen=True)
class TmpfsDriver(VolumeDriver):
    def volume(
        self, ctx: ProvisionContext, role: str, spec: FilesystemStorage | WalVolume | TmpfsStorage
    ) -> Volume:
        size = spec.size if isinstance(spec, WalVolume | TmpfsStorage) else "1G"
        opts = mount_options(parse_size(size), spec.mount_options)
        info = mount(
            ctx.journal, ctx.runner, "pgfsbench", ctx.directory / "mnt" / role, "tmpfs", opts
        )
        return Volume(role, "tmpfs", ctx.directory / "mnt" / role, "tmpfs", (), info.options)

    def provision(
        self, name: str, config: TmpfsStorage, ctx: ProvisionContext
    ) -> ProvisionedStorage:
        data = self.volume(ctx, "data", config)
        return provisioned(name, "tmpfs", data, data.mountpoint / "pgdata", ctx, config.wal)


DRIVER = TmpfsDriver()
