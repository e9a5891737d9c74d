"""What every storage driver provides: a journaled provision of data (and WAL) volumes."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pgfsbench.spec.models import StorageCommon
from pgfsbench.storage.aging import Entry
from pgfsbench.storage.devices import DeviceFactory
from pgfsbench.storage.snapshots import Snapshotter
from pgfsbench.system.errors import CommandError
from pgfsbench.system.held import Held, Owner, make_dirs
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner

C = TypeVar("C", bound=StorageCommon)


@dataclass(frozen=True)
class Volume:
    """A mounted filesystem (or dataset) prepared for PostgreSQL."""

    role: str  # "data" or "wal"
    fs: str
    mountpoint: Path
    source: str
    devices: tuple[str, ...] = ()
    mount_options: str = ""
    mkfs_argv: tuple[str, ...] = ()
    mkfs_output: str = ""
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ProvisionedStorage:
    """Where PostgreSQL puts its data directory and WAL, and what lies beneath."""

    name: str
    fs: str
    data: Volume
    pgdata: Path
    wal: Volume | None = None
    waldir: Path | None = None
    details: dict[str, Any] = field(default_factory=dict)
    # the block devices under test by role: data, wal (filesystems); pool, log, cache (ZFS)
    device_roles: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def volumes(self) -> tuple[Volume, ...]:
        return (self.data,) if self.wal is None else (self.data, self.wal)

    @property
    def block_devices(self) -> tuple[str, ...]:
        """Every device under test (pool members, log and cache devices for ZFS)."""
        found = [d for v in self.volumes for d in v.devices]
        found += [d for devs in self.device_roles.values() for d in devs]
        return tuple(dict.fromkeys(found))


@dataclass
class ProvisionContext:
    journal: Journal
    runner: Runner
    directory: Path  # the cell's own directory in the work directory
    devices: DeviceFactory
    postgres_user: str | None  # owner of the data directory (None: the current user)
    # by volume role ("data"): the aged image its device is a copy of (storage/aging.py)
    aged: dict[str, Entry] = field(default_factory=dict)


class StorageDriver(Generic[C]):
    """What every kind of storage does, generic on its spec model; the defaults are what
    a kind without snapshots, cache of its own or checks does (spec/kinds.py names each
    kind's driver)."""

    def check(self, config: C, runner: Runner, workdir: Path) -> None:
        """Raise CapabilityError before anything is created if the config cannot be done here
        (``workdir`` holds anything a check needs to write)."""
        return

    def provision(self, name: str, config: C, ctx: ProvisionContext) -> ProvisionedStorage:
        """Create and mount; every step journaled before it is done."""
        raise NotImplementedError

    def space(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, object]:
        """The data directory's and the filesystems' space figures (ZFS: used,
        logicalused, compressratio)."""
        return dict(space_figures(storage))

    def settle(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, object]:
        """Wait, bounded, for the filesystem's own background work that its tools can wait
        for (btrfs: deleted subvolumes' cleaning; ZFS: frees, initialisation, trims), before
        the warm-up; what was waited for and how long (empty: nothing to wait for)."""
        return {}

    def info(self, volume: Volume, runner: Runner) -> str:
        """What the filesystem says about itself (tune2fs -l, xfs_info...), for the record."""
        return ""

    def snapshotter(
        self, config: C, storage: ProvisionedStorage, journal: Journal, runner: Runner
    ) -> Snapshotter | None:
        """What takes the spec's `snapshots` during the measured phase (None: none asked)."""
        return None

    def evict_cache(
        self, journal: Journal, runner: Runner, storage: ProvisionedStorage, celldir: Path
    ) -> dict[str, object]:
        """Empty a cache of its own that dropping the page cache does not reach (ZFS's ARC),
        and say what was done; called with PostgreSQL stopped."""
        return {}

    @property
    def cache_eviction(self) -> str:
        """The words for what evict_cache does ("" when it does nothing)."""
        return ""


def allocated_bytes(path: Path) -> int:
    """Bytes allocated on disk under ``path`` (like du), not following symlinks."""
    total = 0
    seen: set[tuple[int, int]] = set()
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue  # a file removed while we walk (WAL recycling)
            key = (st.st_dev, st.st_ino)
            if key in seen:
                continue
            seen.add(key)
            total += st.st_blocks * 512
    with contextlib.suppress(OSError):
        total += os.lstat(path).st_blocks * 512
    return total


def filesystem_used_bytes(path: Path) -> int:
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def space_figures(storage: ProvisionedStorage) -> dict[str, int]:
    """The data directory's size (incl. WAL wherever it lives), split into the data and
    pg_wal (a 1 GB segment must not pass for data), and the filesystems' use."""
    data = allocated_bytes(storage.pgdata)
    if storage.waldir:
        wal = allocated_bytes(storage.waldir)
        total = data + wal
    else:
        wal = allocated_bytes(storage.pgdata / "pg_wal")
        total = data
    figures = {
        "space_bytes": total,
        "data_dir_bytes": data,
        "pg_wal_bytes": wal,
        "data_bytes": total - wal,
        "fs_used_bytes": filesystem_used_bytes(storage.data.mountpoint),
    }
    if storage.waldir and storage.wal:
        figures["wal_dir_bytes"] = wal
        figures["wal_fs_used_bytes"] = filesystem_used_bytes(storage.wal.mountpoint)
    return figures


def prepare_dir(path: Path, owner: str | None) -> Path:
    """A directory for PostgreSQL inside a volume we mounted (so it goes with the umount),
    made beneath its held parent and handed to ``owner`` on its descriptor."""
    make_dirs(path.parent)
    with Held.open(path.parent) as parent, parent.ensure_dir(path.name, 0o700, Owner.of(owner)):
        return path


def prepare_volume_root(path: Path) -> Path:
    """The root of a volume we mounted, root's and traversable: the server's user gets the
    directories made in it (pgdata, pg_wal), never the root itself, where it could plant
    the names root makes next."""
    with Held.open(path) as root:
        root.hand_to(None, 0o755)
    return path


SETTLE_TIMEOUT_S = 60.0  # a filesystem's own wait, at most


def settle_commands(runner: Runner, commands: list[tuple[str, list[str]]]) -> dict[str, object]:
    """Run each waiting command, bounded (SETTLE_TIMEOUT_S); what each took, or why it
    did not finish (a timeout, an error: said, the run goes on)."""
    out: dict[str, object] = {}
    for name, argv in commands:
        started = time.monotonic()
        try:
            done = runner.run(argv, timeout=SETTLE_TIMEOUT_S, check=False)
        except CommandError as exc:  # the timeout
            out[name] = f"not finished after {SETTLE_TIMEOUT_S:.0f} s: {exc}"[:300]
            continue
        took = round(time.monotonic() - started, 2)
        out[name] = (
            {"seconds": took}
            if done.returncode == 0
            else f"failed ({(done.stderr or done.stdout).strip()[-200:]})"
        )
    return out
