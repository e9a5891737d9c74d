"""Transaction groups committed for zfs-fuse, as OpenZFS commits them.

ZFS writes what an fsync asks for to its intent log (ZIL) at once, and the data itself to
the pool when its open transaction group is committed: OpenZFS commits one at least every
``zfs_txg_timeout`` (5 s) and whenever its dirty data passes ``zfs_dirty_data_sync``. On
the test VM zfs-fuse (0.7, Debian 12's) does neither dependably under an fsync load, and
something its intent log holds is only given back by a commit (measured, 2026-12-01):

- one writer, 8 KiB writes each followed by fdatasync on a 384 MiB pool: every writer hung
  in fdatasync after 13 s (31,800 syncs); on a 4 GiB pool its allocated space grew to
  842 MiB for an 8 MiB file and stayed there; one snapshot (a commit) brought it to 9 MiB;
- PostgreSQL, pgbench simple-update, 8 clients, about 4,400 tps: every backend hung in
  fdatasync after 5 s on a 256 MiB pool, 9 s on 384 MiB, 22 s on 1 GiB (4 GiB ran its
  20 s): the hang comes sooner the smaller the pool, after a given amount written.

With a commit every 5 s, the one-writer loop ran its 30 s (101,372 syncs) at 10 MiB
allocated, and the 1 GiB pool its 45 s at 4,500 tps. So while a zfs-fuse pool is in use,
pgfsbench commits its transaction group every ``EVERY_S`` seconds and sooner, each time
its devices have been written an eighth of the pool's size (at most ``DIRTY_SYNC``) since
the last commit, read every ``POLL_S`` s: a snapshot of the pool's root dataset made and
destroyed, a commit on any ZFS. The storage's details say so. Without it a zfs-fuse cell
hangs ("no transaction completed for 60 s"), and until then measures a ZFS that writes its
log and not its data. Kernel OpenZFS needs nothing of the kind.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import threading
import time
from pathlib import Path

from pgfsbench.units import parse_human

EVERY_S = 5.0  # OpenZFS's zfs_txg_timeout
DIRTY_SYNC = 64 << 20  # OpenZFS 0.7's zfs_dirty_data_sync
POLL_S = 0.5
SNAPSHOT_PREFIX = "pgfsb_txg_"

_TICKERS: dict[str, _Ticker] = {}
_LOCK = threading.Lock()

WORDS = (
    f"committed by pgfsbench every {EVERY_S:g} s and each time an eighth of the pool (at "
    f"most {DIRTY_SYNC >> 20} MiB) was written, as OpenZFS's zfs_txg_timeout and "
    "zfs_dirty_data_sync would (zfs-fuse, left to itself here, hangs once its intent log "
    "has taken a pool's worth: storage/zfs/txg.py)"
)


class _Ticker:
    def __init__(self, pool: str, devices: list[str]) -> None:
        self.pool = pool
        self.devices = devices
        self.stop = threading.Event()
        self.commits = 0
        self.failed = 0
        self.thread = threading.Thread(target=self._run, name=f"txg {pool}", daemon=True)

    def _written(self) -> int:
        return sum(written(d) for d in self.devices)

    def _run(self) -> None:
        size = allocated(self.pool, "size")
        limit = min(DIRTY_SYNC, size // 8) if size else DIRTY_SYNC
        last, since = time.monotonic(), self._written()
        while not self.stop.wait(POLL_S):
            if self._written() - since < limit and time.monotonic() - last < EVERY_S:
                continue
            if commit(self.pool):
                self.commits += 1
            else:  # exported for a moment (a cold cache), or being destroyed
                self.failed += 1
            last, since = time.monotonic(), self._written()


def written(device: str) -> int:
    """Bytes written to a block device since it was attached (/sys/block/NAME/stat)."""
    name = Path(os.path.realpath(device)).name
    try:
        return int((Path("/sys/block") / name / "stat").read_text().split()[6]) * 512
    except (OSError, IndexError, ValueError):
        return 0


def allocated(pool: str, prop: str = "allocated") -> int | None:
    """The pool's allocated bytes (or another size property), None when it cannot say."""
    try:
        done = subprocess.run(
            ["zpool", "list", "-H", "-o", prop, pool],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_human(done.stdout) if done.returncode == 0 else None


def commit(pool: str) -> bool:
    """One transaction group of ``pool`` committed (a snapshot made, then destroyed)."""
    snap = f"{pool}@{SNAPSHOT_PREFIX}{secrets.token_hex(3)}"
    try:
        made = subprocess.run(
            ["zfs", "snapshot", snap], capture_output=True, timeout=60, check=False
        )
        if made.returncode != 0:
            return False
        subprocess.run(["zfs", "destroy", snap], capture_output=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return True


def start(pool: str, devices: list[str]) -> None:
    """Commit ``pool``'s transaction group (its ``devices`` watched) until `stop`."""
    with _LOCK:
        if pool in _TICKERS:
            return
        ticker = _TICKERS[pool] = _Ticker(pool, devices)
    ticker.thread.start()


def stop(pool: str) -> dict[str, int] | None:
    """No more commits of ``pool`` (before it is exported or destroyed); how many were made."""
    with _LOCK:
        ticker = _TICKERS.pop(pool, None)
    if ticker is None:
        return None
    ticker.stop.set()
    with contextlib.suppress(RuntimeError):
        ticker.thread.join(timeout=130)
    return {"commits": ticker.commits, "failed": ticker.failed}


def running() -> list[str]:
    with _LOCK:
        return sorted(_TICKERS)
