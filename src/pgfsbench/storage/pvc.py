"""A PersistentVolumeClaim, seen from inside the pod that mounts it (cluster/ runs the pod).

The claims are made and mounted by the cluster; the engine finds them at the pod's mount
points and uses them as it uses a directory the user mounted (storage/existing.py): it
reads their type and options and removes only the directory it made inside. On a host, a
pvc storage cannot run, and says why.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.spec.cluster import POD_DATA_MOUNT, POD_WAL_MOUNT, PVC_NEEDS_CLUSTER, PvcStorage
from pgfsbench.storage.base import (
    ProvisionContext,
    ProvisionedStorage,
    StorageDriver,
    prepare_dir,
    space_figures,
)
from pgfsbench.storage.existing import own_directory
from pgfsbench.system.errors import CapabilityError
from pgfsbench.system.runner import Runner

# set in the pod's environment by the Job's manifest (kube/manifests.py)
IN_POD_ENV = "PGFSBENCH_IN_POD"


def in_pod() -> bool:
    return os.environ.get(IN_POD_ENV) == "1"


@dataclass(frozen=True)
class PvcDriver(StorageDriver[PvcStorage]):
    def check(self, config: PvcStorage, runner: Runner, workdir: Path) -> None:
        if not in_pod():
            raise CapabilityError(PVC_NEEDS_CLUSTER)
        for mount, wanted in ((POD_DATA_MOUNT, True), (POD_WAL_MOUNT, config.wal is not None)):
            if wanted and not Path(mount).is_dir():
                raise CapabilityError(f"the pod has no volume mounted at {mount}")

    def provision(self, name: str, config: PvcStorage, ctx: ProvisionContext) -> ProvisionedStorage:
        data = own_directory(name, Path(POD_DATA_MOUNT), "data", ctx)
        wal = own_directory(name, Path(POD_WAL_MOUNT), "wal", ctx) if config.wal else None
        details: dict[str, object] = {
            "storage_class": config.storage_class,
            "size": config.size,
            "access_mode": config.access_mode,
        }
        if config.wal is not None:
            details["wal"] = {"storage_class": config.wal.storage_class, "size": config.wal.size}
        waldir = prepare_dir(wal.mountpoint / "pg_wal", ctx.postgres_user) if wal else None
        return ProvisionedStorage(
            name, data.fs, data, data.mountpoint / "pgdata", wal=wal, waldir=waldir, details=details
        )

    def space(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, object]:
        return dict(space_figures(storage))  # the claim is the run's alone


DRIVER = PvcDriver()
