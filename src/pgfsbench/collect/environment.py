"""What a result was measured on, read one way for a campaign, for every run (ok or failed)
and for the doctor: the host (kernel, distribution, CPU, memory), the kernel's vm.* settings
in effect now, the PostgreSQL build, and the filesystems under test as mounted."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from pgfsbench.collect.container import CGROUP_ROOT, cgroup_files, limits
from pgfsbench.collect.host import host_environment
from pgfsbench.kernel import snapshot_vm
from pgfsbench.storage.base import Volume
from pgfsbench.storage.pvc import in_pod


def container_facts() -> dict[str, object]:
    """A container's own limits, as its cgroup says (the node's CPUs and memory are what
    /proc shows it)."""
    files = cgroup_files()
    sample: dict[str, str] = {}
    for name in ("cg_memory_limit",):
        path = files.get(name)
        if path is not None:
            with contextlib.suppress(OSError):
                sample[name] = path.read_text()
    version = "v2" if (CGROUP_ROOT / "cgroup.controllers").exists() else "v1"
    return {"cgroup": version, **limits(sample)}


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
    if in_pod():
        env["container"] = container_facts()
    return env
