"""A directory on a filesystem the user already mounted (a managed host, a cloud volume).

pgfsbench reads its type and mount options, never formats or remounts it, and removes
only the directory it created inside.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.spec import ExistingStorage
from pgfsbench.storage.base import (
    ProvisionContext,
    ProvisionedStorage,
    StorageDriver,
    Volume,
    space_figures,
)
from pgfsbench.storage.mounts import mount_of
from pgfsbench.system.errors import ProvisionError
from pgfsbench.system.held import Held
from pgfsbench.system.journal import Undo
from pgfsbench.system.runner import Runner


def own_directory(name: str, base: Path, role: str, ctx: ProvisionContext) -> Volume:
    """pgfsbench's own directory in ``base`` (journaled, removed on undo), as a volume of
    the filesystem it is on."""
    if not base.is_dir():
        raise ProvisionError(f"storage {name}: {base} is not a directory")
    if not os.access(base, os.W_OK | os.X_OK):
        raise ProvisionError(f"storage {name}: {base} is not writable by this user")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    suffix = "" if role == "data" else f"-{role}"
    own = base / f"pgfsbench-{stamp}-{os.getpid()}-{ctx.directory.name}{suffix}"
    ctx.journal.record(f"mkdir {own}", Undo("remove_path", {"path": str(own)}))
    # made beneath the held base (which the server's user may own), and kept root's: the
    # directories PostgreSQL gets are made in it (postgres/instance.py), never by path
    with Held.open(base) as held, held.make_dir(own.name, 0o755):
        pass
    info = mount_of(own)
    return Volume(
        role,
        info.fstype,
        own,
        info.source,
        (),
        info.options,
        details={"mount_target": info.target, "existing": True},
    )


@dataclass(frozen=True)
class ExistingDriver(StorageDriver[ExistingStorage]):
    def provision(
        self, name: str, config: ExistingStorage, ctx: ProvisionContext
    ) -> ProvisionedStorage:
        base = Path(config.path)
        volume = own_directory(name, base, "data", ctx)
        return ProvisionedStorage(
            name,
            volume.fs,
            volume,
            volume.mountpoint / "pgdata",
            details={"existing_path": str(base)},
        )

    def space(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, object]:
        figures: dict[str, object] = dict(space_figures(storage))
        # the filesystem is shared with whatever else lives there: its use says little
        figures.pop("fs_used_bytes", None)
        return figures


DRIVER = ExistingDriver()
