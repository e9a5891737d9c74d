"""A fresh filesystem before the warm-up: the devices under test idle.

A filesystem just made keeps working on its own for a while: ext4's lazy inode-table and
journal initialisation (pgfsbench makes ext4 without it, storage/ext4.py; a filesystem it
did not make, a Kubernetes volume, is formatted lazily), discards of freed blocks, the
load's write-out still draining, btrfs cleaning deleted subvolumes, ZFS freeing. A run that
starts then measures the kernel's housekeeping as the storage's speed. So before the
warm-up pgfsbench first waits for what the filesystem's own tools can wait for (its
driver's `settle`: `btrfs subvolume sync`, `zpool wait`), then, bounded, until the devices
under test write (and discard) less than IDLE_WRITE_MBPS over IDLE_WINDOW_S, and records
how long it waited and whether they went idle (an unfinished wait is said, never hidden).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pgfsbench.collect.procfs import DiskCounters, parse_diskstats

# ext4's journal commits every 5 s and a settled server writes a few KB a second: a device
# writing less than this is idle; lazy initialisation writes MB/s (up to 16 MB/s at first)
IDLE_WRITE_MBPS = 1.0
IDLE_WINDOW_S = 0.5  # the rate is taken over this long
IDLE_MAX_S = 30.0  # never wait longer: a run on a device that stays busy says so
DISKSTATS = Path("/proc/diskstats")


@dataclass(frozen=True)
class IdleWait:
    """How long the devices under test took to go idle before the warm-up."""

    waited_s: float
    idle: bool  # False: still busy when the wait ended
    write_mbps: float  # over the last window, the busiest device's writes and discards
    busiest: str | None

    def as_dict(self) -> dict[str, object]:
        return {
            "waited_s": round(self.waited_s, 2),
            "idle": self.idle,
            "write_mbps": round(self.write_mbps, 3),
            "busiest": self.busiest,
        }


def _written(c: DiskCounters) -> int:
    return c.sectors_written + c.sectors_discarded


def wait_idle(
    devices: Sequence[str],
    *,
    read: Callable[[], str] = DISKSTATS.read_text,
    threshold_mbps: float = IDLE_WRITE_MBPS,
    window_s: float = IDLE_WINDOW_S,
    max_s: float = IDLE_MAX_S,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> IdleWait:
    """Sample the devices' written and discarded sectors every ``window_s`` until each
    wrote less than ``threshold_mbps`` in the last window, or ``max_s`` has passed."""
    names = [Path(d).name for d in devices]
    started = clock()
    before = parse_diskstats(read())
    rate, busiest = 0.0, None
    while True:
        sleep(window_s)
        now = parse_diskstats(read())
        rates = {
            n: (_written(now[n]) - _written(before[n])) * 512 / 1e6 / window_s
            for n in names
            if n in now and n in before
        }
        busiest = max(rates, key=lambda n: rates[n]) if rates else None
        rate = rates[busiest] if busiest else 0.0
        waited = clock() - started
        if rate < threshold_mbps:
            return IdleWait(waited, True, rate, busiest)
        if waited >= max_s:
            return IdleWait(waited, False, rate, busiest)
        before = now
