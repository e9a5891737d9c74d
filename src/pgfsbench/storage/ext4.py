"""ext4: mkfs and information commands (pure argv builders), and its driver."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.storage.blockfs import MkfsDriver

# Lazy inode-table and journal initialisation would run in a kernel thread during the
# benchmark and write to the device under test; do it all at mkfs time instead.
EAGER_INIT = "lazy_itable_init=0,lazy_journal_init=0"


def mkfs_argv(device: str, options: list[str]) -> list[str]:
    """mkfs.ext4's argv: the user's options, with their extended options (-E, which
    mke2fs takes once: a second -E replaces the first) merged into one, after the eager
    initialisation unless the user set lazy_itable_init or lazy_journal_init."""
    extended: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(options):
        o = options[i]
        if o == "-E" and i + 1 < len(options):
            extended += options[i + 1].split(",")
            i += 2
            continue
        if o.startswith("-E") and len(o) > 2:
            extended += o[2:].split(",")
        else:
            rest.append(o)
        i += 1
    given = {e.split("=", 1)[0] for e in extended if e}
    eager = [e for e in EAGER_INIT.split(",") if e.split("=", 1)[0] not in given]
    merged = ",".join([*eager, *(e for e in extended if e)])
    return ["mkfs.ext4", "-F", "-E", merged, *rest, device]


def info_argv(device: str, mountpoint: Path) -> list[str]:
    return ["tune2fs", "-l", device]


DRIVER = MkfsDriver("ext4", mkfs_argv, info_argv)
