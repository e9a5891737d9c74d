"""XFS: mkfs and information commands (pure argv builders), and its driver."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.storage.blockfs import MkfsDriver


def mkfs_argv(device: str, options: list[str]) -> list[str]:
    return ["mkfs.xfs", "-f", *options, device]


def info_argv(device: str, mountpoint: Path) -> list[str]:
    return ["xfs_info", str(mountpoint)]


DRIVER = MkfsDriver("xfs", mkfs_argv, info_argv)
