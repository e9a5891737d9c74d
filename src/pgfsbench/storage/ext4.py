"""ext4: mkfs and information commands (pure argv builders), and its driver."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.storage.blockfs import MkfsDriver

# Lazy inode-table and journal initialisation would run in a kernel thread during the
# benchmark and write to the device under test; do it all at mkfs time instead.
EAGER_INIT = "lazy_itable_init=0,lazy_journal_init=0"


def mkfs_argv(device: str, options: list[str]) -> list[str]:
    opts = list(options)
    if not any(o == "-E" or o.startswith("-E") for o in opts):
        opts = ["-E", EAGER_INIT, *opts]
    return ["mkfs.ext4", "-F", *opts, device]


def info_argv(device: str, mountpoint: Path) -> list[str]:
    return ["tune2fs", "-l", device]


DRIVER = MkfsDriver("ext4", mkfs_argv, info_argv)
