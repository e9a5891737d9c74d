"""Aging a cell's filesystem before its run (storage/aging.py keeps the images).

An aged image is made once: a sparse file of the device's size in the cache (under a name
of its own, journaled), attached to a loop device (its rotational flag as the device's
model says: filesystems choose by it), made with the storage's mkfs options, mounted with
its mount options, aged by the recipe, its state measured, unmounted and detached, then
checksummed and renamed into the cache. Each run then gets a block-level copy of it
(storage/devices.py). A SIGKILL during the aging leaves the journal: `cleanup` unmounts,
detaches and removes the half-made image; nothing half-made is ever found in the cache.

The recipes: "files" (storage/aging.files_recipe), and "postgres": the database itself
churned on the filesystem (a cluster of the cell's server, on a private socket: tables
made, filled, updated so no update is HOT (an indexed column changes), deleted from,
vacuumed, dropped and made again) until the device has been written ``overwritten`` times
its size, the database kept near ``fullness`` of the filesystem. The churned cluster stays
on the filesystem, stopped (another database on the same disk, as a server's disk holds
one): the filesystem's fullness and its fragmentation are its.
"""

from __future__ import annotations

import datetime
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench.spec.models import Aging, FilesystemStorage, InitdbOptions, ZfsStorage
from pgfsbench.storage import driver_for
from pgfsbench.storage.aging import (
    CACHE_DIR,
    IMAGE,
    Churn,
    Entry,
    ImageCache,
    aged_key,
    device_written,
    files_recipe,
    require_tools,
    state_of,
)
from pgfsbench.storage.blockfs import MkfsDriver
from pgfsbench.storage.devices import losetup
from pgfsbench.storage.mounts import mount
from pgfsbench.system.actions import make_dir, write_value
from pgfsbench.system.errors import CapabilityError
from pgfsbench.system.held import Held

if TYPE_CHECKING:
    from pgfsbench.postgres.binaries import Binaries
    from pgfsbench.spec import Cell
    from pgfsbench.system.journal import Journal
    from pgfsbench.system.runner import Runner


@dataclass(frozen=True)
class AgingContext:
    """What aging a cell's filesystem uses of the campaign."""

    runner: Runner
    journal: Journal
    workdir: Path
    binaries: Binaries  # the cell's server (the postgres recipe's, and the cache key's)
    os_user: str | None
    celldir: Path  # the cell's directory: the aging server's socket and log
    phase: Callable[[str], None]
    startup_timeout: float


# what the postgres recipe's tables are made of: a row of about 300 bytes, an index on a
# column every update changes (so no update is HOT: each writes a new index entry too)
_TABLE = "CREATE TABLE {t} (id bigint PRIMARY KEY, k integer NOT NULL, pad text NOT NULL)"
_INDEX = "CREATE INDEX ON {t} (k)"
ROWS_PER_BATCH = 20_000


def aged_images(ctx: AgingContext, cell: Cell) -> dict[str, Entry]:
    """The aged image a cell's data device is a copy of, made now if the cache has none
    (by role: "data"); {} for a fresh filesystem."""
    storage = cell.storage
    age = getattr(storage, "age", None)
    if age is None or not isinstance(storage, FilesystemStorage | ZfsStorage):
        return {}
    # a ZFS pool's image is its one device's (role "pool"), a filesystem's its data's
    role = "pool" if isinstance(storage, ZfsStorage) else "data"
    require_tools(cell.fs)
    key, size, rotational = aged_key(cell.fs, storage, age, ctx.binaries.version)
    cache = ImageCache(ctx.workdir / CACHE_DIR)
    found = cache.find(key)
    if found is not None:
        return {role: found}
    ctx.phase(f"aging {cell.fs} ({age.text()}): made once, copied for each run")
    if isinstance(storage, ZfsStorage):
        return {role: make_pool_image(ctx, cache, key, size, rotational, storage, age)}
    driver = driver_for(cell.fs)
    if not isinstance(driver, MkfsDriver):
        raise CapabilityError(f"age: {cell.fs} is not made with mkfs on a device")
    return {role: make_image(ctx, cell.fs, cache, key, size, rotational, driver, storage, age)}


def _new_image(ctx: AgingContext, cache: ImageCache, key: str, size: int) -> Path:
    """The cache's partial entry of ``key`` (journaled), its image a sparse file of ``size``."""
    partial = cache.begin(ctx.journal, key)
    with Held.open(partial) as made:
        made.create_sized(IMAGE, size)
    return partial


def _attached(ctx: AgingContext, image: Path, rotational: bool) -> str:
    """``image`` on a loop device (journaled), rotational as the device's model says."""
    dev = losetup(ctx.journal, ctx.runner, image)
    if rotational:
        queue = Path("/sys/block") / Path(dev).name / "queue"
        write_value(ctx.journal, queue / "rotational", "1", what=f"{dev} rotational")
    return dev


def _churn(ctx: AgingContext, mnt: Path, dev: str, age: Aging, capacity: int) -> Churn:
    """The recipe run on the filesystem mounted at ``mnt``."""
    if age.recipe == "files":
        with Held.open(mnt) as root:
            return files_recipe(root, dev, age, capacity)
    return postgres_recipe(ctx, mnt, dev, age, capacity)


def make_image(
    ctx: AgingContext,
    fs: str,
    cache: ImageCache,
    key: str,
    size: int,
    rotational: bool,
    driver: MkfsDriver,
    storage: FilesystemStorage,
    age: Aging,
) -> Entry:
    """The image of ``key`` aged and put in the cache (see the module's comment)."""
    partial = _new_image(ctx, cache, key, size)
    started = time.monotonic()
    mark = ctx.journal.mark()
    try:
        dev = _attached(ctx, partial / IMAGE, rotational)
        argv = driver.mkfs_argv(dev, list(storage.mkfs_options))
        ctx.journal.note(step=f"mkfs {dev} (aging {key})", argv=argv)
        ctx.runner.run(argv, timeout=600)
        # mounted in the cell's directory (the cache is root's alone: the postgres
        # recipe's server must reach its data directory by path)
        mnt = ctx.celldir / "aging-mnt"
        mount(
            ctx.journal,
            ctx.runner,
            dev,
            mnt,
            fs,
            driver.mount_options(list(storage.mount_options)),
        )
        stv = os.statvfs(mnt)
        capacity = stv.f_blocks * stv.f_frsize
        churn = _churn(ctx, mnt, dev, age, capacity)
        # the age is stated per byte of the filesystem (what mkfs left of the device)
        churn.extra["filesystem_bytes"] = capacity
        state = state_of(ctx.runner, fs, dev, mnt, None)
    finally:
        failed = ctx.journal.undo_since(mark)
    if failed:  # still mounted or attached: the image would change under its checksum
        raise CapabilityError(
            f"aging {key}: could not put back {failed[0].step.what} ({failed[0].error})"
        )
    # unmounted and detached: the image is the filesystem, whole
    manifest: dict[str, Any] = {
        "recipe": age.model_dump(mode="json"),
        "fs": fs,
        "mkfs_argv": [str(a) for a in argv],
        "mount_options": list(storage.mount_options),
        "rotational": rotational,
        "made": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 1),
        "churn": churn.as_dict(),
        "age_reached": round(churn.written_bytes / capacity, 2),
        "state": state,
    }
    return cache.commit(partial, key, manifest)


def make_pool_image(
    ctx: AgingContext,
    cache: ImageCache,
    key: str,
    size: int,
    rotational: bool,
    storage: ZfsStorage,
    age: Aging,
) -> Entry:
    """A ZFS pool's image of ``key``: a pool of one device made as the spec says, its data
    dataset with its properties, aged by the recipe, its state measured (`zpool list -o
    frag`), the dataset's mountpoint set to none and the pool exported, so that a copy is
    imported whole under each run's name (storage/zfs/commands.import_as)."""
    from pgfsbench.storage.zfs import txg
    from pgfsbench.storage.zfs.commands import export
    from pgfsbench.storage.zfs.driver import DRIVER as ZFS
    from pgfsbench.storage.zfs.driver import make_dataset

    partial = _new_image(ctx, cache, key, size)
    started = time.monotonic()
    mark = ctx.journal.mark()
    try:
        impl, daemon = ZFS.ready(storage, ctx.journal, ctx.runner, ctx.celldir)
        dev = _attached(ctx, partial / IMAGE, rotational)
        pool = ZFS.new_pool_name("aging", ctx.runner)
        argv = ZFS.create_pool(storage, impl, ctx.journal, ctx.runner, pool, [dev])
        if impl.fuse:  # its own timer commits none here: storage/zfs/txg.py
            txg.start(pool, [dev])
        from pgfsbench.storage.zfs.capabilities import resolved_properties

        props = resolved_properties(storage.data.properties, impl, "data.properties")
        mnt = ctx.celldir / "aging-mnt"
        make_dataset(ctx.journal, ctx.runner, f"{pool}/data", mnt, props, daemon)
        stv = os.statvfs(mnt)
        capacity = stv.f_blocks * stv.f_frsize  # what ZFS offers the dataset, empty
        churn = _churn(ctx, mnt, dev, age, capacity)
        churn.extra["filesystem_bytes"] = capacity
        state = state_of(ctx.runner, "zfs", dev, mnt, None, pool, [dev])
        # left unmounted in the image: each run's import mounts it where the run says
        ctx.runner.run(["zfs", "set", "mountpoint=none", f"{pool}/data"], timeout=120)
        export(ctx.runner, pool)
    finally:
        failed = ctx.journal.undo_since(mark)  # the pool is exported: its destroy finds none
    if failed:
        raise CapabilityError(
            f"aging {key}: could not put back {failed[0].step.what} ({failed[0].error})"
        )
    manifest: dict[str, Any] = {
        "recipe": age.model_dump(mode="json"),
        "fs": "zfs",
        "implementation": impl.label(),
        "pool": pool,
        "create_argv": [str(a) for a in argv],
        "data_properties": props,
        "rotational": rotational,
        "made": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "seconds": round(time.monotonic() - started, 1),
        "churn": churn.as_dict(),
        "age_reached": round(churn.written_bytes / capacity, 2),
        "state": state,
    }
    return cache.commit(partial, key, manifest)


def postgres_recipe(ctx: AgingContext, mnt: Path, device: str, age: Aging, capacity: int) -> Churn:
    """The database churned on the filesystem at ``mnt`` (see the module's comment)."""
    from pgfsbench.postgres.instance import Instance, socket_dir

    # the churned cluster stays on the filesystem: its directory is not journaled for
    # removal (the image's own directory is)
    with Held.open(mnt) as root:
        root.make_dir("aging", 0o755).close()
    # the aging server's socket and log, in a directory of the cell's (root's), each its
    # user's
    place = make_dir(ctx.journal, ctx.celldir / "aging")
    sock = socket_dir(ctx.journal, place, ctx.os_user)
    logs = make_dir(ctx.journal, place / "log", owner=ctx.os_user, mode=0o755)
    instance = Instance(
        ctx.binaries, mnt / "aging" / "pgdata", None, sock, logs / "server.log", ctx.os_user
    )
    instance.init(ctx.journal, ctx.runner, InitdbOptions())
    instance.configure(
        {
            "autovacuum": "off",  # the churn's own VACUUMs: the same sequence each time
            "max_wal_size": "64MB",  # the churned cluster's WAL stays small
            "min_wal_size": "32MB",
            "shared_buffers": "64MB",
            "synchronous_commit": "off",
        }
    )
    instance.start(ctx.journal, ctx.runner, ctx.startup_timeout)
    rng = random.Random(age.seed)  # noqa: S311 (a seeded sequence, not a secret)
    target = int(capacity * age.overwritten)
    budget = int(capacity * age.fullness)
    churn = Churn()
    started = time.monotonic()
    first = device_written(device)
    tables: list[tuple[str, int]] = []  # (name, next id)
    serial = 0
    try:
        with instance.connect(statement_timeout_s=3600) as conn:
            conn.execute("SELECT setseed(%s)", (age.seed % 1000 / 1000,))

            def db_bytes() -> int:
                row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                return int(row[0]) if row else 0

            def used() -> int:  # the filesystem's, the cluster's WAL and files included
                st = os.statvfs(mnt)
                return (st.f_blocks - st.f_bfree) * st.f_frsize

            def new_table() -> None:
                nonlocal serial
                serial += 1
                name = f"churn_{serial}"
                conn.execute(_TABLE.format(t=name))
                conn.execute(_INDEX.format(t=name))
                tables.append((name, 1))
                churn.files_made += 1

            def fill(i: int) -> None:
                name, nxt = tables[i]
                conn.execute(
                    f"INSERT INTO {name} SELECT g, (random() * 1e6)::int, "  # noqa: S608
                    "repeat(md5(random()::text), 8) FROM generate_series(%s::bigint, %s::bigint) g",
                    (nxt, nxt + ROWS_PER_BATCH - 1),
                )
                tables[i] = (name, nxt + ROWS_PER_BATCH)

            new_table()
            while device_written(device) - first < target:
                size = used()
                roll = rng.random()
                i = rng.randrange(len(tables))
                name, nxt = tables[i]
                if size > budget and len(tables) > 1 and roll < 0.3:
                    conn.execute(f"DROP TABLE {name}")
                    tables.pop(i)
                    churn.files_deleted += 1
                elif size > budget or roll < 0.25:
                    lo = rng.randrange(1, max(2, nxt))
                    conn.execute(
                        f"DELETE FROM {name} WHERE id BETWEEN %s::bigint AND %s::bigint",  # noqa: S608
                        (lo, lo + ROWS_PER_BATCH // 2),
                    )
                    conn.execute(f"VACUUM {name}")
                elif roll < 0.55:
                    lo = rng.randrange(1, max(2, nxt))
                    conn.execute(
                        f"UPDATE {name} SET k = k + 1, pad = md5(pad) || pad "  # noqa: S608
                        "WHERE id BETWEEN %s::bigint AND %s::bigint",
                        (lo, lo + ROWS_PER_BATCH // 2),
                    )
                    churn.overwrites += 1
                elif roll < 0.62 and len(tables) < 40:
                    new_table()
                else:
                    fill(i)
                if rng.random() < 0.05:
                    conn.execute("CHECKPOINT")
            conn.execute("CHECKPOINT")
            # no fuller than asked when it stops: the newest tables go first
            while used() > budget and len(tables) > 1:
                conn.execute(f"DROP TABLE {tables.pop()[0]}")
                conn.execute("CHECKPOINT")
            churn.extra = {"tables_kept": len(tables), "database_bytes": db_bytes()}
    finally:
        instance.stop(ctx.runner)
    churn.written_bytes = device_written(device) - first
    churn.seconds = time.monotonic() - started
    return churn
