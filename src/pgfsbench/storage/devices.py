"""Block devices: loop files pgfsbench creates, and the guard in front of real devices.

A real block device is written only when the spec names it AND the command line confirms
it (`--destroy-data-on DEV`). It is refused, whatever the flags, while it is mounted,
has mounted partitions, is held by md/LVM/dm, or is a member of an imported zpool; and
refused unless `--force` too when it carries any filesystem or partition-table signature.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench.spec.device_models import resolve_model
from pgfsbench.spec.models import EmulatedDevice
from pgfsbench.storage.aging import Entry, checksum, copy_into
from pgfsbench.storage.mounts import mount_at
from pgfsbench.system.actions import make_dir, write_value
from pgfsbench.system.bounds import in_workdir
from pgfsbench.system.errors import CapabilityError, CommandError, GuardError, ProvisionError
from pgfsbench.system.held import Held, make_dirs
from pgfsbench.system.io_uring import IO_URING_DISABLED, io_uring_refused
from pgfsbench.system.journal import Journal, Undo, undo_action
from pgfsbench.system.mountinfo import mount_table
from pgfsbench.system.runner import (
    Runner,
    process_alive,
    process_start_time,
    process_state,
    reap,
)
from pgfsbench.system.trust import read_text_nofollow
from pgfsbench.system.wait import wait_until
from pgfsbench.units import parse_size

DISK_DAEMON = "pgfsbench-disk"


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
    # an emulated disk: its model, parameters and the daemon's files (for the run's record)
    details: dict[str, Any] = field(default_factory=dict)


@dataclass
class DeviceFactory:
    """Creates the devices of one provisioning, numbered for readable file names."""

    journal: Journal
    runner: Runner
    directory: Path
    policy: DevicePolicy = field(default_factory=DevicePolicy)
    _count: int = 0
    # the emulated disks it made, by loop device: their model and parameters
    emulated: dict[str, dict[str, Any]] = field(default_factory=dict)

    def get(
        self, spec_device: str | EmulatedDevice, label: str, initial: Entry | None = None
    ) -> BlockDevice:
        """The device, new; with ``initial`` (an aged image of the cache), a block-level
        copy of it, its checksum checked as it is copied."""
        if isinstance(spec_device, EmulatedDevice):
            self._count += 1
            dev = attach_emulated(
                self.journal,
                self.runner,
                self.directory,
                f"{label}-{self._count}",
                spec_device,
                initial,
            )
            self.emulated[dev.path] = {"role": label, **dev.details}
            return dev
        if spec_device.startswith("loop:"):
            self._count += 1
            return attach_loop(
                self.journal,
                self.runner,
                self.directory / f"{label}-{self._count}.img",
                parse_size(spec_device[5:]),
                initial,
            )
        check_real_device(self.runner, spec_device, self.policy)
        size = block_size(spec_device)
        details: dict[str, Any] = {}
        if initial is not None:
            details["aged_copy_seconds"] = write_image(spec_device, size, initial)
        return BlockDevice(spec_device, None, size, details)


def attach_loop(
    journal: Journal, runner: Runner, image: Path, size: int, initial: Entry | None = None
) -> BlockDevice:
    """A sparse file attached with direct I/O, so the host page cache does not double-cache;
    with ``initial``, the file a block-level copy of that aged image (its size)."""
    journal.record(
        f"create sparse file {image} ({size} bytes)", Undo("remove_path", {"path": str(image)})
    )
    make_dirs(image.parent, 0o700)  # the devices under test are root's alone
    details: dict[str, Any] = {}
    with Held.open(image.parent) as directory:
        if initial is None:
            directory.create_sized(image.name, size)
        else:
            if initial.size != size:
                raise ProvisionError(
                    f"aged image {initial.key} is {initial.size} bytes, the device {size}"
                )

            def fill(fd: int) -> None:
                details["aged_copy_seconds"] = round(copy_into(initial, fd), 2)

            directory.create_from(image.name, fill)
    return BlockDevice(losetup(journal, runner, image), str(image), size, details)


def write_image(device: str, size: int, initial: Entry) -> float:
    """An aged image written onto a real device the guard allowed, block for block (its
    holes as zeros: what the device held before must not show through), checked."""
    if initial.size != size:
        raise ProvisionError(f"aged image {initial.key} is {initial.size} bytes, {device} {size}")
    started = time.monotonic()
    # O_EXCL on a block device: refused while anything (a mount) holds it
    dst = os.open(device, os.O_WRONLY | os.O_EXCL | os.O_CLOEXEC)
    try:
        zeros = bytes(4 << 20)
        for at in range(0, size, len(zeros)):
            os.pwrite(dst, zeros[: min(len(zeros), size - at)], at)
        copy_into(initial, dst)
        os.fsync(dst)
    finally:
        os.close(dst)
    return round(time.monotonic() - started, 2)


def losetup(journal: Journal, runner: Runner, backing: Path) -> str:
    """A loop device over ``backing``, with direct I/O."""
    journal.record(f"losetup {backing}", Undo("detach_loop", {"backing_file": str(backing)}))
    done = runner.run(["losetup", "--find", "--show", "--direct-io=on", str(backing)], timeout=60)
    return done.stdout.strip()


def disk_daemon() -> str:
    """The emulated disk's daemon (native/diskmodel, built by scripts/bootstrap.sh)."""
    found = os.environ.get("PGFSBENCH_DISK") or shutil.which(
        DISK_DAEMON, path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    )
    if not found:
        raise CapabilityError(
            f"{DISK_DAEMON} is not installed: `bash scripts/bootstrap.sh` builds it (it needs "
            "Go); an emulated disk (device = { model = ... }) cannot run without it"
        )
    return found


def attach_emulated(
    journal: Journal,
    runner: Runner,
    directory: Path,
    stem: str,
    spec: EmulatedDevice,
    initial: Entry | None = None,
) -> BlockDevice:
    """An emulated disk: `pgfsbench-disk` serves it as a file on a FUSE mount of its own,
    answering each request when the model says; a loop device over that file. Each step
    is journaled before it is taken, so the undo detaches the loop device, stops the
    daemon (which unmounts) and removes its files, in that order."""
    size = parse_size(spec.size) // 4096 * 4096
    model = resolve_model(
        spec.model,
        size,
        write_cache=spec.write_cache,
        drive_bytes=parse_size(spec.drive) if spec.drive else None,
    )
    daemon = disk_daemon()
    make_dirs(directory, 0o700)  # the devices under test are root's alone
    image, mnt = directory / f"{stem}.img", directory / f"{stem}.disk"
    pidfile, stats, log = (directory / f"{stem}.{x}" for x in ("pid", "stats.jsonl", "log"))
    journal.record(f"create sparse file {image}", Undo("remove_path", {"path": str(image)}))
    make_dir(journal, mnt, mode=0o700)
    journal.record(
        f"start {DISK_DAEMON} ({model.text}) on {mnt}",
        Undo("stop_disk_daemon", {"pidfile": str(pidfile), "mountpoint": str(mnt)}),
    )
    priority, priority_text = controller_priority(runner)
    argv = [*priority, daemon, "--image", str(image), "--size", str(size)]
    argv += ["--mountpoint", str(mnt)]
    argv += ["--model", model.json(), "--stats", str(stats), "--ready", str(pidfile)]
    if initial is not None:
        if initial.size != size:
            raise ProvisionError(f"aged image {initial.key} is {initial.size} bytes, not {size}")
        argv += ["--initial", str(initial.image)]  # the aged filesystem, block for block
    uring_was = None
    if spec.transport == "io_uring":
        argv += ["--transport", "io_uring"]
        uring_was = enable_fuse_uring(journal)
    try:
        pid = runner.start_daemon(argv, log_path=log)

        def served() -> bool:
            if not process_alive(pid, None) or process_state(pid) == "Z":
                reap(pid)
                tail = read_text_nofollow(log).strip().splitlines()[-3:]
                raise ProvisionError(f"{DISK_DAEMON} ended: {' / '.join(tail) or 'no message'}")
            return pidfile.exists() and mount_at(mnt) is not None

        wait_until(served, timeout=30, interval=0.05, what=f"{DISK_DAEMON} to serve {mnt}")
    finally:
        if uring_was is not None:
            # its mount has its ring (or has done without): the parameter only decides
            # what a new FUSE mount may ask for
            FUSE_URING_PARAM.write_text(uring_was + "\n")
    loop = losetup(journal, runner, mnt / "disk")
    if model.params["kind"] == "hdd":
        # a spinning disk says so: filesystems choose by it (btrfs's ssd mode, mkfs
        # defaults), as the block layer does
        queue = Path("/sys/block") / Path(loop).name / "queue"
        write_value(journal, queue / "rotational", "1", what=f"{loop} rotational")
    # the daemon's copy, checked as any copy is: block for block the cache's image
    if initial is not None and checksum(image) != initial.checksum:
        raise ProvisionError(f"{image}: not a copy of the aged image {initial.key}")
    details = {
        "device_model": model.name,
        "device_model_text": model.text,
        "device_model_params": model.params,
        "device_model_stats": str(stats),
        "device_model_image": str(image),
        "device_model_priority": priority_text,
        "device_model_transport": disk_transport(stats),
    }
    return BlockDevice(loop, str(mnt / "disk"), size, details)


# SCHED_FIFO priority of the emulated disks' daemons: above every ordinary task (all of
# PostgreSQL, pgbench, pgfsbench), below the kernel's own real-time threads (50 and up)
REALTIME_PRIORITY = 10


def controller_priority(runner: Runner) -> tuple[list[str], str]:
    """How an emulated disk's daemon is started: ahead of the benchmark for the CPU, as a
    disk's own controller is, so that a reply the model says is due does not wait for a
    core. Real-time (SCHED_FIFO) where the host allows it. Measured on this 2-vCPU VM
    (examples/yohgaki-2017.toml, ext4 on hdd-7200, 100 clients, 60 s): at nice -10 the
    replies were 23.7 s late in all for 54.6 s of modelled wait, under SCHED_FIFO 0.013 s
    for 57.6 s. Where the layer itself is the limit (an SSD model at 30,000-45,000 IOPS
    beside two CPU-bound loops) the daemon's own CPU then comes first, and fio got 10-15%
    fewer IOPS than at nice -10 (bench/device_model.py --priority). The kernel keeps 5%
    of each second for ordinary tasks (sched_rt_runtime_us). Where real-time is refused
    (a container without CAP_SYS_NICE, a cgroup with no real-time budget), nice -10; the
    run records which (device_model_priority) and what the host still lost (late_s)."""
    fifo = ["chrt", "--fifo", str(REALTIME_PRIORITY)]
    if shutil.which("chrt"):
        probe = runner.run([*fifo, "true"], timeout=10, check=False)
        if probe.returncode == 0:
            return fifo, f"SCHED_FIFO {REALTIME_PRIORITY}"
    return ["nice", "-n", "-10"], "nice -10 (real-time refused here)"


def _last_stats(stats: str | Path) -> dict[str, object]:
    """The daemon's last whole line a second (stats file); {} when there is none."""
    try:
        lines = read_text_nofollow(Path(stats)).splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            got = json.loads(line)
        except ValueError:
            continue
        if isinstance(got, dict):
            return got
    return {}


def disk_counters(stats: str | Path) -> dict[str, float]:
    """An emulated disk's counters now: the numbers of the daemon's last line."""
    return {
        k: float(v)
        for k, v in _last_stats(stats).items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }


def disk_transport(stats: str | Path) -> str:
    """What carries the emulated disk's requests: "io_uring" (FUSE over io_uring) or
    "/dev/fuse"; "unknown" from a daemon that does not say (older than 2026-11-28)."""
    got = _last_stats(stats).get("transport")
    return got if isinstance(got, str) and got in ("io_uring", "/dev/fuse") else "unknown"


# fuse's switch for FUSE over io_uring (Linux 6.14 and later; absent before)
FUSE_URING_PARAM = Path("/sys/module/fuse/parameters/enable_uring")


def fuse_uring_unsupported(
    param: Path = FUSE_URING_PARAM,
    disabled: Path = IO_URING_DISABLED,
) -> str | None:
    """Why an emulated disk cannot take its requests over io_uring here (None: it can)."""
    if not param.exists():
        return "this kernel has no FUSE over io_uring (Linux 6.14 and later)"
    return io_uring_refused(disabled)


def enable_fuse_uring(journal: Journal) -> str | None:
    """Turn fuse's enable_uring parameter on (journaled) for a daemon about to mount, so
    that the kernel offers it FUSE over io_uring; the value to put back once its mount is
    served, or None when there is nothing to do (on already, or a kernel without it).
    The kernel reads it only when a FUSE mount starts: a mount that has its ring keeps it."""
    try:
        old = FUSE_URING_PARAM.read_text().strip()
    except OSError:
        return None
    if old not in ("N", "0"):
        return None
    write_value(
        journal,
        FUSE_URING_PARAM,
        "Y",
        what="fuse enable_uring, while an emulated disk's daemon mounts",
    )
    return old


def disk_delta(before: dict[str, float], after: dict[str, float]) -> dict[str, object]:
    """What an emulated disk served between two readings (about a second each): requests,
    bytes, the wait its model added, how late the host made its replies (late_s, replies
    over a millisecond late), and where that lateness was spent, the three adding up to
    late_s: the image's reads and writes on the host (io_s), the wait for the model
    (model_s), the wait for the reply to be written after the model's time (oversleep_s:
    the daemon's wake-up, and the replies written before it). And the daemon's own CPU
    (cpu_s), and the most its shared wake-ups could have held arrivals (loop_held_s: a
    request read late by at most 5% of the wait the device had queued); both 0 from
    daemons older than 2026-11-27."""
    keys: tuple[str, ...] = ("reads", "writes", "flushes", "read_bytes", "write_bytes")
    keys += ("model_wait_s", "late_s", "io_s", "model_s", "oversleep_s")
    keys += ("cpu_s", "loop_held_s")
    out: dict[str, Any] = {k: round(after.get(k, 0.0) - before.get(k, 0.0), 3) for k in keys}
    requests = out["reads"] + out["writes"] + out["flushes"]
    out["seconds"] = round(after.get("t", 0.0) - before.get("t", 0.0), 3)
    out["model_wait_ms_per_request"] = (
        round(1e3 * out["model_wait_s"] / requests, 3) if requests else None
    )
    out["late_ms_per_request"] = round(1e3 * out["late_s"] / requests, 3) if requests else None
    return out


@undo_action("stop_disk_daemon", bound=in_workdir("pidfile", "mountpoint"))
def _stop_disk_daemon(runner: Runner, args: dict[str, Any]) -> None:
    """Stop the emulated disk's daemon (it unmounts its FUSE mount as it ends); a mount
    left by a daemon that died answers ENOTCONN and is unmounted here."""
    pidfile, mnt = Path(args["pidfile"]), Path(args["mountpoint"])
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        pid = 0
    if pid and _is_disk_daemon(pid, mnt):
        start = process_start_time(pid)
        os.kill(pid, signal.SIGTERM)

        def ended() -> bool:
            reap(pid)
            return not process_alive(pid, start) or process_state(pid) == "Z"

        try:
            wait_until(ended, timeout=30, interval=0.1, what=f"{DISK_DAEMON} to end")
        except Exception:
            if process_alive(pid, start):
                os.kill(pid, signal.SIGKILL)
            reap(pid)
    if mount_at(mnt) is not None:
        runner.run(["umount", "--lazy", str(mnt)], timeout=60, check=False)
    pidfile.unlink(missing_ok=True)


def _is_disk_daemon(pid: int, mnt: Path) -> bool:
    """Ours: the daemon's program, serving this mount point (never a reused pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return (
        bool(cmdline)
        and Path(cmdline[0].decode()).name == DISK_DAEMON
        and (str(mnt).encode() in cmdline)
    )


def loops_backed_by(runner: Runner, image: str) -> list[str]:
    done = runner.run(
        ["losetup", "--noheadings", "--output", "NAME,BACK-FILE", "--list"], timeout=30
    )
    found = []
    for line in done.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip().removesuffix(" (deleted)") == image:
            found.append(parts[0])
    return found


@undo_action("detach_loop", bound=in_workdir("backing_file"))
def _detach_loop(runner: Runner, args: dict[str, Any]) -> None:
    image = str(args["backing_file"])
    numbers = {_dev_numbers(Path(d).name) for d in loops_backed_by(runner, image)}
    still = [m for m in mount_table() if m.dev in numbers]
    if still:
        raise GuardError(f"loop device of {image} is still mounted on {still[0].target}")

    def detached() -> bool:
        for dev in loops_backed_by(runner, image):
            runner.run(["losetup", "--detach", dev], timeout=30, check=False)
        return not loops_backed_by(runner, image)

    wait_until(detached, timeout=30, interval=0.5, what=f"loop device of {image} to detach")


# ---------------------------------------------------------------- the guard


def block_size(dev: str) -> int:
    name = Path(os.path.realpath(dev)).name
    try:
        return int(Path(f"/sys/class/block/{name}/size").read_text()) * 512
    except OSError:
        return 0


def _dev_numbers(name: str) -> str | None:
    try:
        return Path(f"/sys/class/block/{name}/dev").read_text().strip()
    except OSError:
        return None


def partitions_of(name: str) -> list[str]:
    """Kernel names of a disk's partitions (sdb -> sdb1, sdb2; loop3 -> loop3p1)."""
    sys_dir = Path(f"/sys/class/block/{name}")
    try:
        return sorted(p.name for p in sys_dir.iterdir() if (p / "partition").exists())
    except OSError:
        return []


def _real(path: str) -> str:
    return os.path.realpath(path)


def _swap_devices() -> set[str]:
    try:
        lines = Path("/proc/swaps").read_text().splitlines()[1:]
    except OSError:
        return set()
    return {_real(line.split()[0]) for line in lines if line.strip()}


def resolve_vdev(token: str) -> set[str]:
    """The device paths a name in `zpool status` may stand for: an absolute path, a
    kernel name (sdb1), or a /dev/disk/by-*/ link name, each resolved to /dev/..."""
    if token.startswith("/"):
        return {_real(token)}
    found = set()
    for candidate in [f"/dev/{token}", *(str(p) for p in Path("/dev/disk").glob(f"by-*/{token}"))]:
        if Path(candidate).exists():
            found.add(_real(candidate))
    return found


def parse_pool_members(status: str) -> set[str]:
    """Device names listed in the config sections of `zpool status` (pure)."""
    names: set[str] = set()
    in_config = False
    skip = {
        "NAME",
        "mirror",
        "raidz",
        "raidz1",
        "raidz2",
        "raidz3",
        "logs",
        "cache",
        "spares",
        "special",
        "dedup",
        "draid",
    }
    for line in status.splitlines():
        stripped = line.strip()
        if stripped.startswith("config:"):
            in_config = True
            continue
        if stripped.startswith("errors:") or (stripped and not line.startswith((" ", "\t"))):
            in_config = False
        if not in_config or not stripped:
            continue
        token = stripped.split()[0]
        if token in skip or token.split("-")[0] in skip:
            continue
        names.add(token)
    return names


def imported_pool_members(runner: Runner) -> set[str]:
    """Real device paths of every vdev of every imported pool (pool and group names
    resolve to no device and drop out)."""
    try:
        done = runner.run(["zpool", "status", "-P"], timeout=15, check=False)
        if done.returncode != 0:  # zfs-fuse's zpool has no -P
            done = runner.run(["zpool", "status"], timeout=15, check=False)
    except CommandError:
        return set()  # no zpool command: no pools
    members: set[str] = set()
    for token in parse_pool_members(done.stdout):
        members |= resolve_vdev(token)
    return members


def device_problems(runner: Runner, dev: str) -> tuple[list[str], list[str]]:
    """(reasons that always refuse, signatures that --force may override) for a device
    and every one of its partitions."""
    path = Path(dev)
    try:
        mode = path.stat().st_mode
    except OSError:
        return [f"{dev} does not exist"], []
    if not stat.S_ISBLK(mode):
        return [f"{dev} is not a block device"], []
    name = Path(_real(dev)).name
    mounts: dict[str, str] = {}
    for m in mount_table():
        mounts.setdefault(m.dev, m.target)
    swaps = _swap_devices()
    pool_members = imported_pool_members(runner)
    hard: list[str] = []
    signatures: list[str] = []
    for member in [name, *partitions_of(name)]:
        what = dev if member == name else f"its partition /dev/{member}"
        numbers = _dev_numbers(member)
        if numbers and numbers in mounts:
            hard.append(f"{what} is mounted on {mounts[numbers]}")
        held_dir = Path(f"/sys/class/block/{member}/holders")
        held = sorted(h.name for h in held_dir.iterdir()) if held_dir.is_dir() else []
        if held:
            hard.append(f"{what} is in use by {', '.join(held)} (md/LVM/device-mapper)")
        if f"/dev/{member}" in swaps:
            hard.append(f"{what} is an active swap device")
        if f"/dev/{member}" in pool_members:
            hard.append(f"{what} belongs to an imported zpool")
        sigs = _signatures(runner, f"/dev/{member}")
        signatures += sigs if member == name else [f"{s} on /dev/{member}" for s in sigs]
    if any("zfs_member" in s for s in signatures) and not hard:
        signatures = [
            s + " (a zpool label: the pool may be exported)" if "zfs_member" in s else s
            for s in signatures
        ]
    return hard, signatures


def _signatures(runner: Runner, dev: str) -> list[str]:
    """Every filesystem, RAID, LVM, zpool or partition-table signature wipefs can see."""
    try:
        done = runner.run(
            ["wipefs", "--no-act", "--noheadings", "--output", "TYPE,OFFSET", dev],
            timeout=30,
            check=False,
        )
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
    if not Path(dev).exists():
        raise GuardError(f"{dev} does not exist")
    real = os.path.realpath(dev)
    confirmed = {os.path.realpath(d) for d in policy.confirmed}
    if real not in confirmed:
        raise GuardError(
            f"{dev} is a real block device: its data would be destroyed; "
            f"confirm with --destroy-data-on {dev}"
        )
    hard, signatures = device_problems(runner, dev)
    if hard:
        raise GuardError(f"refusing {dev}: " + "; ".join(hard))
    if signatures and not policy.force:
        raise GuardError(
            f"refusing {dev}: it carries {', '.join(signatures)}; add --force as well to erase it"
        )
