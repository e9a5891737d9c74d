"""Mounting and unmounting, journaled; effective options read back from the kernel."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgfsbench.system.errors import CommandError
from pgfsbench.system.journal import Journal, Undo, undo_action
from pgfsbench.system.runner import Runner
from pgfsbench.system.wait import wait_until


@dataclass(frozen=True)
class MountInfo:
    target: str
    source: str
    fstype: str
    options: str  # per-mount and superblock options, as the kernel reports them


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def mount_table() -> list[MountInfo]:
    entries = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        left, right = line.split(" - ", 1)
        lf, rf = left.split(), right.split()
        opts = lf[5]
        if len(rf) > 2 and rf[2] not in ("rw", "ro"):
            opts = f"{opts},{rf[2]}"
        elif len(rf) > 2:
            opts = ",".join(dict.fromkeys(opts.split(",") + rf[2].split(",")))
        entries.append(MountInfo(_unescape(lf[4]), _unescape(rf[1]), rf[0], opts))
    return entries


def mount_at(target: Path) -> MountInfo | None:
    """The mount whose target is exactly ``target`` (the last one, if stacked)."""
    found = None
    for entry in mount_table():
        if entry.target == str(target):
            found = entry
    return found


def mount_of(path: Path) -> MountInfo:
    """The mount that contains ``path`` (longest matching target)."""
    real = os.path.realpath(path)
    best: MountInfo | None = None
    for entry in mount_table():
        t = entry.target
        if (real == t or real.startswith(t.rstrip("/") + "/")) and (
            best is None or len(t) >= len(best.target)
        ):
            best = entry
    assert best is not None  # "/" contains everything
    return best


def mount(journal: Journal, runner: Runner, source: str, target: Path, fstype: str,
          options: list[str]) -> MountInfo:
    target.mkdir(parents=True, exist_ok=True)
    argv = ["mount", "-t", fstype]
    if options:
        argv += ["-o", ",".join(options)]
    argv += [source, str(target)]
    journal.record(f"mount {source} on {target}", Undo("umount", {"target": str(target)}))
    runner.run(argv, timeout=120)
    info = mount_at(target)
    if info is None:
        raise CommandError(argv, 0, f"{target} is not a mount point after mount")
    return info


@undo_action("umount")
def _umount(runner: Runner, args: dict[str, Any]) -> None:
    target = Path(args["target"])

    def unmounted() -> bool:
        if mount_at(target) is None:
            return True
        runner.run(["umount", str(target)], timeout=120, check=False)
        return mount_at(target) is None

    try:
        wait_until(unmounted, timeout=30, interval=1.0, what=f"{target} to unmount")
    except Exception:
        # Something still holds it; detach it from the tree so the device can be released.
        runner.run(["umount", "--lazy", str(target)], timeout=60)
