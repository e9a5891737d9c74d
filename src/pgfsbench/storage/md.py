"""Linux software RAID (md) under a filesystem: the storage's members (loop files, emulated
disks or devices the user named) assembled by mdadm into one array of the level the spec
asks (raid0, raid1, raid10), then mkfs on the array.

The array is created with `--assume-clean` by default: the members of a fresh run are
zeroed sparse files (identical, so there is nothing to resync), and a resync running
under the benchmark would be measured as the filesystem's cost. `assume_clean = false`
lets md resync and waits for it to end before mkfs (`mdadm --wait`).

Journaled before it is done and undone in reverse: the array stopped, then each member's
superblock zeroed (so nothing assembles it again at the next boot). Needs mdadm and a
kernel with md and the level's personality: refused, with the reason, where there is none
(this project's CI machine has no md).
"""

from __future__ import annotations

import hashlib
import re
import shutil
from pathlib import Path

from pgfsbench.system.bounds import device_of_run
from pgfsbench.system.journal import Journal, Scope, Undo, undo_action
from pgfsbench.system.runner import Runner

# the md personality (kernel module) each level needs
PERSONALITY = {"raid0": "raid0", "raid1": "raid1", "raid10": "raid10"}


def personalities(mdstat: str) -> set[str]:
    """The levels the kernel has loaded ('Personalities : [raid0] [raid1]')."""
    for line in mdstat.splitlines():
        if line.startswith("Personalities"):
            return set(re.findall(r"\[(\w+)\]", line))
    return set()


def unavailable(runner: Runner, level: str, mdstat: Path = Path("/proc/mdstat")) -> str | None:
    """Why an md array of ``level`` cannot be made here (None: it can)."""
    if shutil.which("mdadm") is None:
        return "mdadm is not installed (Debian: mdadm)"
    if not mdstat.exists():
        runner.run(["modprobe", "md_mod"], timeout=30, check=False)
        if not mdstat.exists():
            return "the kernel has no md (/proc/mdstat is missing)"
    wanted = PERSONALITY[level]
    if wanted not in personalities(mdstat.read_text()):
        runner.run(["modprobe", wanted], timeout=30, check=False)
        if wanted not in personalities(mdstat.read_text()):
            return f"the kernel's md has no {wanted} personality"
    return None


def array_name(directory: Path, role: str) -> str:
    """A short name of this cell's own (md names are at most 32 bytes)."""
    digest = hashlib.sha256(str(directory.resolve()).encode()).hexdigest()[:8]
    return f"pgfsb-{digest}-{role}"


def create_argv(
    path: str, level: str, members: list[str], chunk_kib: int | None, assume_clean: bool
) -> list[str]:
    argv = [
        "mdadm",
        "--create",
        path,
        "--run",
        "--metadata=1.2",
        "--homehost=<none>",
        f"--level={level}",
        f"--raid-devices={len(members)}",
    ]
    if chunk_kib is not None and level != "raid1":
        argv.append(f"--chunk={chunk_kib}")
    if assume_clean:
        argv.append("--assume-clean")
    return [*argv, *members]


def make_array(
    journal: Journal,
    runner: Runner,
    name: str,
    level: str,
    members: list[str],
    chunk_kib: int | None,
    assume_clean: bool,
) -> tuple[str, dict[str, object]]:
    """The array made of ``members`` (its /dev/md/NAME path) and what was made."""
    path = f"/dev/md/{name}"
    argv = create_argv(path, level, members, chunk_kib, assume_clean)
    journal.record(f"mdadm --create {path}", Undo("md_stop", {"path": path, "members": members}))
    runner.run(argv, timeout=300)
    runner.run(["udevadm", "settle"], timeout=60, check=False)
    if not assume_clean:
        # a resync under the benchmark would be measured: let it finish first
        runner.run(["mdadm", "--wait", path], timeout=24 * 3600, check=False)
    detail = runner.run(["mdadm", "--detail", path], timeout=60, check=False).stdout
    return path, {
        "path": path,
        "kernel_name": Path(path).resolve().name if Path(path).exists() else "",
        "level": level,
        "members": members,
        "chunk_kib": chunk_kib if level != "raid1" else None,
        "assume_clean": assume_clean,
        "argv": argv,
        "detail": detail.strip(),
        "array_bytes": array_bytes(detail),
    }


def array_bytes(detail: str) -> int | None:
    """'Array Size : 2093056 (2044.00 MiB ...)' of `mdadm --detail` (KiB) in bytes."""
    found = re.search(r"Array Size\s*:\s*(\d+)", detail)
    return int(found.group(1)) * 1024 if found else None


def _array_bound(args: dict[str, object], scope: Scope) -> str | None:
    path = str(args["path"])
    if not re.fullmatch(r"/dev/md/pgfsb-[0-9a-f]{8}-[a-z0-9_]+", path):
        return f"{path} is not an array pgfsbench creates"
    members = args.get("members")
    if not isinstance(members, list):
        return "its members are not a list"
    for member in members:
        why = device_of_run(str(member), scope)
        if why is not None:
            return why
    return None


@undo_action("md_stop", bound=_array_bound)
def _undo_md(runner: Runner, args: dict[str, object]) -> None:
    path = str(args["path"])
    if Path(path).exists():
        runner.run(["mdadm", "--stop", path], timeout=300)
    members = args.get("members")
    for member in members if isinstance(members, list) else []:
        if Path(str(member)).exists():
            runner.run(["mdadm", "--zero-superblock", str(member)], timeout=120, check=False)
