"""zfs-fuse, the FUSE ZFS: its daemon (started by pgfsbench, journaled; one already
running is left alone), its options (the tunables it has instead of module parameters)
and its mounts.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.spec import ZfsValue
from pgfsbench.storage.mounts import mount_at
from pgfsbench.system.bounds import in_workdir
from pgfsbench.system.errors import CapabilityError, CommandError
from pgfsbench.system.journal import Journal, Undo, undo_action
from pgfsbench.system.runner import Runner, process_alive, process_start_time
from pgfsbench.system.wait import wait_until
from pgfsbench.units import parse_size

FUSE_SOCKET = Path("/var/run/zfs/zfs_socket")


# zfs-fuse has no /sys/module/zfs/parameters: the tunables it has are daemon options.
FUSE_PARAMETERS = {
    "zfs_arc_max": "--max-arc-size",  # MB
    "zfs_prefetch_disable": "--zfs-prefetch-disable",  # flag
    "zfs_vdev_cache_size": "--vdev-cache-size",  # MB
}


def fuse_daemon_running() -> bool:
    return FUSE_SOCKET.exists() and any(_fuse_pids())


def _fuse_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if Path(os.readlink(entry / "exe")).name == "zfs-fuse":
                    pids.append(int(entry.name))
    return pids


_STARTED_PIDFILES: set[Path] = set()  # zfs-fuse daemons this process started


def started_by_us() -> bool:
    for pidfile in _STARTED_PIDFILES:
        with contextlib.suppress(OSError, ValueError, IndexError):
            pid = int(pidfile.read_text().split()[0])
            if pid in _fuse_pids():
                return True
    return False


def fuse_package_version(runner: Runner) -> str:
    with contextlib.suppress(CommandError):
        done = runner.run(
            ["dpkg-query", "-W", "-f", "${Version}", "zfs-fuse"], timeout=30, check=False
        )
        if done.returncode == 0 and done.stdout.strip():
            return done.stdout.strip()
    return "unknown"


@dataclass
class FuseDaemon:
    """zfs-fuse started by pgfsbench (journaled); a daemon already running is left alone."""

    pidfile: Path
    started_by_us: bool = False
    argv: tuple[str, ...] = ()

    @classmethod
    def ensure(
        cls, journal: Journal, runner: Runner, pidfile: Path, options: list[str]
    ) -> FuseDaemon:
        if fuse_daemon_running():
            if options:
                raise CapabilityError(
                    "zfs-fuse is already running (not started by pgfsbench): "
                    "its options (zfs_arc_max, zfs_prefetch_disable) cannot "
                    "be set per configuration; stop it first"
                )
            return cls(pidfile, False)
        argv = ["zfs-fuse", "--pidfile", str(pidfile), "--no-kstat-mount", *options]
        journal.record("start zfs-fuse", Undo("stop_zfs_fuse", {"pidfile": str(pidfile)}))
        _STARTED_PIDFILES.add(pidfile)
        runner.run(argv, timeout=60)
        wait_until(
            lambda: FUSE_SOCKET.exists() and pidfile.exists(), timeout=30, what="zfs-fuse to listen"
        )
        wait_until(
            lambda: runner.run(["zpool", "list"], timeout=30, check=False).returncode == 0,
            timeout=30,
            what="zfs-fuse to answer",
        )
        return cls(pidfile, True, tuple(argv))


@undo_action("stop_zfs_fuse", bound=in_workdir("pidfile"))
def _stop_zfs_fuse(runner: Runner, args: dict[str, object]) -> None:
    pidfile = Path(str(args["pidfile"]))
    try:
        pid = int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return
    try:
        if Path(os.readlink(f"/proc/{pid}/exe")).name != "zfs-fuse":
            return  # not (or no longer) the daemon we started
    except OSError:
        return
    start = process_start_time(pid)
    # zfs-fuse's own shutdown sleeps 4-5 s whatever it holds (its listener's and threads'
    # 1-2 s timeouts, then a second before it exits). Holding no pool it has nothing to
    # write back: it is ended at once. Holding one (its destroy failed), it is asked to stop.
    empty = _holds_no_pool(runner)
    os.kill(pid, signal.SIGKILL if empty else signal.SIGTERM)
    try:
        wait_until(
            lambda: not process_alive(pid, start),
            timeout=60,
            interval=0.05 if empty else 0.5,
            what="zfs-fuse to exit",
        )
    except Exception:
        if process_alive(pid, start):
            os.kill(pid, signal.SIGKILL)
    if empty and not _fuse_pids() and FUSE_SOCKET.is_socket():
        FUSE_SOCKET.unlink(missing_ok=True)  # what its own exit removes
    pidfile.unlink(missing_ok=True)


def _holds_no_pool(runner: Runner) -> bool:
    """Does the running zfs-fuse answer that it has no pool (imported or being created)?"""
    try:
        done = runner.run(["zpool", "list", "-H", "-o", "name"], timeout=30, check=False)
    except CommandError:
        return False
    return done.returncode == 0 and not done.stdout.strip()


@undo_action("umount_dangling_fuse", bound=in_workdir("target"))
def _umount_dangling_fuse(runner: Runner, args: dict[str, object]) -> None:
    """A FUSE mount whose daemon died answers ENOTCONN; only then is it unmounted here
    (a live one goes away with `zpool destroy`)."""
    target = Path(str(args["target"]))
    if mount_at(target) is None:
        return
    try:
        os.statvfs(target)
    except OSError as exc:
        if exc.errno == errno.ENOTCONN:
            runner.run(["umount", "--lazy", str(target)], timeout=60, check=False)


def fuse_daemon_options(params: dict[str, ZfsValue]) -> list[str]:
    """Module parameters that zfs-fuse takes as daemon options."""
    options: list[str] = []
    for name, value in params.items():
        if isinstance(value, dict):
            chosen = value.get("fuse")
            if chosen is None:
                continue
            value = chosen
        if name == "zfs_arc_max":
            mb = max(16, min(16384, parse_size(str(value)) // (1 << 20)))
            options += ["--max-arc-size", str(mb)]
        elif name == "zfs_vdev_cache_size":
            options += ["--vdev-cache-size", str(parse_size(str(value)) // (1 << 20))]
        elif name == "zfs_prefetch_disable" and str(value) not in ("0", "False", "false", "off"):
            options.append("--zfs-prefetch-disable")
    return options


def zfsrc() -> str:
    try:
        return "\n".join(
            line
            for line in Path("/etc/zfs/zfsrc").read_text().splitlines()
            if line.strip() and not line.startswith("#")
        )
    except OSError:
        return ""
