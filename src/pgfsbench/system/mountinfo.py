"""The kernel's mount table and the processes using a path (pure readers of /proc).

Kept in the bottom layer so that undo actions can refuse to act across a mount point
(removing a directory that still has a filesystem mounted inside it would delete that
filesystem's files, or block for ever if it is frozen)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class MountInfo:
    target: str
    source: str
    fstype: str
    options: str  # per-mount and superblock options, as the kernel reports them
    dev: str = ""  # major:minor


def _unescape(field: str) -> str:
    return field.encode().decode("unicode_escape") if "\\" in field else field


def parse_mountinfo(text: str) -> list[MountInfo]:
    entries = []
    for line in text.splitlines():
        if " - " not in line:
            continue
        left, right = line.split(" - ", 1)
        lf, rf = left.split(), right.split()
        if len(lf) < 6 or len(rf) < 2:
            continue
        opts = lf[5]
        if len(rf) > 2 and rf[2] not in ("rw", "ro"):
            opts = f"{opts},{rf[2]}"
        elif len(rf) > 2:
            opts = ",".join(dict.fromkeys(opts.split(",") + rf[2].split(",")))
        entries.append(MountInfo(_unescape(lf[4]), _unescape(rf[1]), rf[0], opts, lf[2]))
    return entries


def mount_table() -> list[MountInfo]:
    return parse_mountinfo(Path("/proc/self/mountinfo").read_text())


def mounts_under(path: Path | str) -> list[MountInfo]:
    """Mounts whose target is ``path`` or lies inside it."""
    base = os.path.realpath(path) if Path(path).exists() else str(path)
    prefix = base.rstrip("/") + "/"
    return [m for m in mount_table() if m.target == base or m.target.startswith(prefix)]


def disconnected() -> list[str]:
    """Mounts that answer "Transport endpoint is not connected": a FUSE mount whose daemon
    died, and what is mounted from a loop device over it. Tools that walk the mount table
    (mkfs.btrfs's mounted check) fail on them with that error whatever device they are
    given."""
    import errno

    found = []
    for m in mount_table():
        try:
            Path(m.target).stat()
        except OSError as e:
            if e.errno == errno.ENOTCONN:
                found.append(m.target)
            continue
        if m.source.startswith("/dev/loop"):
            name = Path(m.source).name
            try:
                back = Path(f"/sys/block/{name}/loop/backing_file").read_text().strip()
                Path(back).stat()
            except OSError as e:
                if e.errno == errno.ENOTCONN:
                    found.append(f"{m.target} (from {m.source}, whose file {back} is gone)")
    return found


@dataclass(frozen=True)
class Holder:
    pid: int
    command: str
    state: str  # R, S, D (stuck in the kernel), ...

    def __str__(self) -> str:
        stuck = " stuck in the kernel (state D)" if self.state == "D" else ""
        return f"pid {self.pid} ({self.command}){stuck}"


def holders(path: Path | str) -> list[Holder]:
    """Processes whose working directory, root or an open file lies under ``path``."""
    prefix = str(path).rstrip("/") + "/"

    def inside(target: str) -> bool:
        return target == str(path) or target.startswith(prefix)

    found: list[Holder] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        links: list[str] = []
        try:
            links += [os.readlink(entry / "cwd"), os.readlink(entry / "root")]
            links += [os.readlink(fd) for fd in (entry / "fd").iterdir()]
        except OSError:
            pass
        if any(inside(t) for t in links):
            try:
                stat = (entry / "stat").read_text()
                command = stat[stat.index("(") + 1 : stat.rindex(")")]
                state = stat[stat.rindex(")") + 2 :].split()[0]
            except (OSError, ValueError):
                continue
            found.append(Holder(int(entry.name), command, state))
    return found
