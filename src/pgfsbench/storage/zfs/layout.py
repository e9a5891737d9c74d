"""Pool and dataset layout as command lines (pure): zpool create, zfs create."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.system.bounds import POOL_PREFIX  # the undo bounds know our pools by it

__all__ = ["POOL_PREFIX"]


SPACE_PROPS = (
    "used",
    "logicalused",
    "referenced",
    "logicalreferenced",
    "compressratio",
    "recordsize",
    "compression",
)


def zpool_create_argv(
    name: str,
    layout: str,
    devices: list[str],
    log: list[str],
    log_layout: str,
    cache: list[str],
    ashift: int | None,
    properties: dict[str, str],
) -> list[str]:
    argv = ["zpool", "create", "-o", "cachefile=none", "-m", "none"]
    if ashift is not None:
        argv += ["-o", f"ashift={ashift}"]
    for k, v in properties.items():
        argv += ["-o", f"{k}={v}"]
    argv.append(name)
    if layout in ("mirror", "raidz1", "raidz2", "raidz3"):
        argv.append("raidz" if layout == "raidz1" else layout)
    argv += devices
    if log:
        argv.append("log")
        if log_layout == "mirror":
            argv.append("mirror")
        argv += log
    if cache:
        argv += ["cache", *cache]
    return argv


def zfs_create_argv(dataset: str, mountpoint: Path, properties: dict[str, str]) -> list[str]:
    argv = ["zfs", "create", "-o", f"mountpoint={mountpoint}"]
    for k, v in properties.items():
        argv += ["-o", f"{k}={v}"]
    return [*argv, dataset]
