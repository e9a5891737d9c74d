"""btrfs: mkfs and information commands (pure argv builders)."""

from __future__ import annotations

from pathlib import Path


def mkfs_argv(device: str, options: list[str]) -> list[str]:
    return ["mkfs.btrfs", "-f", *options, device]


def info_argv(device: str, mountpoint: Path) -> list[str]:
    return ["btrfs", "filesystem", "usage", "-b", str(mountpoint)]
