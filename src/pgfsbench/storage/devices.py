"""Block devices: loop files pgfsbench creates, and the guard in front of real devices.

A real block device is written only when the spec names it AND the command line confirms
it (`--destroy-data-on DEV`). It is refused, whatever the flags, while it is mounted,
has mounted partitions, is held by md/LVM/dm, or is a member of an imported zpool; and
refused unless `--force` too when it carries any filesystem or partition-table signature.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.system.errors import CommandError, GuardError
from pgfsbench.system.journal import Journal, Undo, undo_action
from pgfsbench.system.runner import Runner
from pgfsbench.system.wait import wait_until
from pgfsbench.units import parse_size


@dataclass(frozen=True)
class DevicePolicy:
    """What the command line allowed: confirmed devices and whether signatures may be erased."""

    confirmed: frozenset[str] = frozenset()
    force: bool = False


@dataclass(frozen=True)
class BlockDevice:
    path: str  # /dev/loopN or the real device
    backing_file: str | None = None  # set for loop devices pgfsbench created
    size_bytes: int = 0


@dataclass
class DeviceFactory:
    """Creates the devices of one provisioning, numbered for readable file names."""

    journal: Journal
    runner: Runner
    directory: Path
    policy: DevicePolicy = field(default_factory=DevicePolicy)
    _count: int = 0

    def get(self, spec_device: str, label: str) -> BlockDevice:
        if spec_device.startswith("loop:"):
            self._count += 1
            return attach_loop(self.journal, self.runner,
                               self.directory / f"{label}-{self._count}.img",
                               parse_size(spec_device[5:]))
        check_real_device(self.runner, spec_device, self.policy)
        return BlockDevice(spec_device, None, _block_size(spec_device))


def attach_loop(journal: Journal, runner: Runner, image: Path, size: int) -> BlockDevice:
    """A sparse file attached with direct I/O, so the host page cache does not double-cache."""
    journal.record(f"create sparse file {image} ({size} bytes)",
                   Undo("remove_path", {"path": str(image)}))
    image.parent.mkdir(parents=True, exist_ok=True)
    with image.open("xb") as fh:
        fh.truncate(size)
    journal.record(f"losetup {image}", Undo("detach_loop", {"backing_file": str(image)}))
    done = runner.run(["losetup", "--find", "--show", "--direct-io=on", str(image)], timeout=60)
    return BlockDevice(done.stdout.strip(), str(image), size)


def loops_backed_by(runner: Runner, image: str) -> list[str]:
    done = runner.run(["losetup", "--noheadings", "--output", "NAME,BACK-FILE", "--list"],
                      timeout=30)
    found = []
    for line in done.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().removesuffix(" (deleted)") == image:
            found.append(parts[0])
    return found


@undo_action("detach_loop")
def _detach_loop(runner: Runner, args: dict[str, Any]) -> None:
    image = str(args["backing_file"])

    def detached() -> bool:
        for dev in loops_backed_by(runner, image):
            runner.run(["losetup", "--detach", dev], timeout=30, check=False)
        return not loops_backed_by(runner, image)

    wait_until(detached, timeout=30, interval=0.5, what=f"loop device of {image} to detach")


# ---------------------------------------------------------------- the guard


def _block_size(dev: str) -> int:
    name = Path(os.path.realpath(dev)).name
    try:
        return int(Path(f"/sys/class/block/{name}/size").read_text()) * 512
    except OSError:
        return 0


def mounted_sources() -> dict[str, str]:
    """Mounted block devices: 'major:minor' -> mount point (from /proc/self/mountinfo)."""
    result: dict[str, str] = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        result.setdefault(fields[2], fields[4])
    return result


def _dev_numbers(name: str) -> str | None:
    try:
        return Path(f"/sys/class/block/{name}/dev").read_text().strip()
    except OSError:
        return None


def device_problems(runner: Runner, dev: str) -> tuple[list[str], list[str]]:
    """(reasons that always refuse, signatures that --force may override) for a device."""
    hard: list[str] = []
    path = Path(dev)
    try:
        mode = path.stat().st_mode
    except OSError:
        return [f"{dev} does not exist"], []
    if not stat.S_ISBLK(mode):
        return [f"{dev} is not a block device"], []
    name = Path(os.path.realpath(dev)).name
    sys_dir = Path(f"/sys/class/block/{name}")
    mounts = mounted_sources()
    numbers = _dev_numbers(name)
    if numbers and numbers in mounts:
        hard.append(f"{dev} is mounted on {mounts[numbers]}")
    for part in sorted(p.name for p in sys_dir.iterdir() if p.name.startswith(name)):
        pnum = _dev_numbers(part)
        if pnum and pnum in mounts:
            hard.append(f"its partition /dev/{part} is mounted on {mounts[pnum]}")
    holders = sys_dir / "holders"
    if holders.is_dir():
        held = sorted(h.name for h in holders.iterdir())
        if held:
            hard.append(f"{dev} is in use by {', '.join(held)} (md/LVM/device-mapper)")
    if _swap_in_use(dev):
        hard.append(f"{dev} is an active swap device")
    if _in_imported_zpool(runner, name):
        hard.append(f"{dev} belongs to an imported zpool")
    signatures = _signatures(runner, dev)
    if any("zfs_member" in s for s in signatures) and not hard:
        signatures = [s + " (a zpool label: the pool may be exported)" if "zfs_member" in s else s
                      for s in signatures]
    return hard, signatures


def _swap_in_use(dev: str) -> bool:
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return False
    real = os.path.realpath(dev)
    return any(os.path.realpath(line.split()[0]) == real for line in lines if line.strip())


def _in_imported_zpool(runner: Runner, name: str) -> bool:
    try:
        done = runner.run(["zpool", "status", "-P"], timeout=15, check=False)
        if done.returncode != 0:  # zfs-fuse's zpool has no -P
            done = runner.run(["zpool", "status"], timeout=15, check=False)
    except CommandError:
        return False  # no zpool command: no pools
    members = {line.split()[0] for line in done.stdout.splitlines() if line.strip()}
    return bool(members & {name, f"/dev/{name}"})


def _signatures(runner: Runner, dev: str) -> list[str]:
    """Every filesystem, RAID, LVM, zpool or partition-table signature wipefs can see."""
    try:
        done = runner.run(["wipefs", "--no-act", "--noheadings", "--output", "TYPE,OFFSET", dev],
                          timeout=30, check=False)
    except CommandError:
        return []
    sigs = [" at ".join(line.split()) for line in done.stdout.splitlines() if line.strip()]
    if done.returncode != 0 and not sigs:
        sigs = [f"unreadable ({done.stderr.strip()})"]
    return sigs


def check_real_device(runner: Runner, dev: str, policy: DevicePolicy) -> None:
    """Refuse a real device unless the user named it on the command line and it is not in use."""
    if not dev.startswith("/dev/"):
        raise GuardError(f"{dev}: not a device path")
    real = os.path.realpath(dev)
    confirmed = {os.path.realpath(d) for d in policy.confirmed}
    if real not in confirmed:
        raise GuardError(f"{dev} is a real block device: its data would be destroyed; "
                         f"confirm with --destroy-data-on {dev}")
    hard, signatures = device_problems(runner, dev)
    if hard:
        raise GuardError(f"refusing {dev}: " + "; ".join(hard))
    if signatures and not policy.force:
        raise GuardError(f"refusing {dev}: it carries {', '.join(signatures)}; "
                         "add --force as well to erase it")
