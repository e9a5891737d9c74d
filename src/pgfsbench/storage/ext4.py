"""ext4: mkfs and information commands (pure argv builders), and its driver."""

from __future__ import annotations

from pathlib import Path

from pgfsbench.storage.blockfs import MkfsDriver

# Lazy inode-table initialisation runs in a kernel thread (ext4lazyinit) after the mount,
# writing zeros to the device under test while the benchmark runs: on a 1 TB HDD some 16 GiB
# of inode tables, for minutes. Writing them at mkfs time instead costs those minutes before
# every run (3 of a 5-minute run on the emulated 1 TB HDD, 2026-11-28). Neither: mkfs leaves
# the inode tables of unused groups unwritten, and the mount tells the kernel not to zero
# them (noinit_itable): a group's table is written when its inodes are first used, as on
# any ext4, and nothing runs in the background. The journal is small and written at mkfs
# time (lazy_journal_init=0). A user's own lazy_* or init_itable options are kept.
INIT = "lazy_itable_init=1,lazy_journal_init=0"
NO_BACKGROUND_INIT = "noinit_itable"


def mkfs_argv(device: str, options: list[str]) -> list[str]:
    """mkfs.ext4's argv: the user's options, with their extended options (-E, which
    mke2fs takes once: a second -E replaces the first) merged into one, after the eager
    initialisation settings (INIT) unless the user set lazy_itable_init or
    lazy_journal_init."""
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
    eager = [e for e in INIT.split(",") if e.split("=", 1)[0] not in given]
    merged = ",".join([*eager, *(e for e in extended if e)])
    return ["mkfs.ext4", "-F", "-E", merged, *rest, device]


def info_argv(device: str, mountpoint: Path) -> list[str]:
    return ["tune2fs", "-l", device]


def mount_options(options: list[str]) -> list[str]:
    """The user's mount options, with noinit_itable unless they chose (no)init_itable."""
    chosen = {o.split("=", 1)[0] for opts in options for o in opts.split(",")}
    if chosen & {"init_itable", "noinit_itable"}:
        return list(options)
    return [*options, NO_BACKGROUND_INIT]


DRIVER = MkfsDriver("ext4", mkfs_argv, info_argv, mount_options)
