"""What a result was measured on, read one way for a campaign, for every run (ok or failed)
and for the doctor: the host (kernel, distribution, CPU, memory), the kernel's vm.* settings
in effect now, the PostgreSQL build, and the filesystems under test as mounted."""

from __future__ import annotations

from collections.abc import Iterable

from pgfsbench.collect.host import host_environment
from pgfsbench.kernel import snapshot_vm
from pgfsbench.storage.base import Volume


def read_environment(
    *, vm: bool = True, postgresql: str | None = None, volumes: Iterable[Volume] = ()
) -> dict[str, object]:
    """The environment record: ``vm`` adds the vm.* settings (read before a run's are
    restored), ``postgresql`` the server's version line, ``volumes`` each mount's source,
    type and options by role."""
    env = host_environment()
    if vm:
        env["vm"] = snapshot_vm()
    if postgresql is not None:
        env["postgresql"] = postgresql
    mounts = {v.role: {"source": v.source, "fs": v.fs, "options": v.mount_options} for v in volumes}
    if mounts:
        env["mounts"] = mounts
    return env
