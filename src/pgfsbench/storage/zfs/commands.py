"""ZFS commands on pools pgfsbench created: list, destroy (journaled undo), properties,
transaction-group sync, module parameters, and the ARC evicted by export and import.
"""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

from pgfsbench.spec import ZfsValue
from pgfsbench.storage.base import (
    ProvisionedStorage,
)
from pgfsbench.storage.mounts import mount_at
from pgfsbench.storage.zfs import txg
from pgfsbench.storage.zfs.capabilities import MODULE_DIR, ZfsImplementation, resolve_value
from pgfsbench.storage.zfs.layout import POOL_PREFIX
from pgfsbench.system.actions import write_value
from pgfsbench.system.bounds import pool_name
from pgfsbench.system.errors import ProvisionError
from pgfsbench.system.held import Held, make_dirs
from pgfsbench.system.journal import Journal, Undo, undo_action
from pgfsbench.system.runner import Runner
from pgfsbench.system.wait import wait_until


def existing_pools(runner: Runner) -> set[str]:
    done = runner.run(["zpool", "list", "-H", "-o", "name"], timeout=30, check=False)
    return {line.strip() for line in done.stdout.splitlines() if line.strip()}


def pool_guid(runner: Runner, name: str) -> str | None:
    """A pool's guid: what tells this pool from another of the same name."""
    done = runner.run(["zpool", "get", "-H", "-o", "value", "guid", name], timeout=30, check=False)
    value = done.stdout.strip()
    return value if done.returncode == 0 and value.isdigit() else None


@undo_action("zpool_destroy", bound=pool_name(POOL_PREFIX))
def _zpool_destroy(runner: Runner, args: dict[str, object]) -> None:
    name = str(args["name"])
    if not name.startswith(POOL_PREFIX):
        raise ProvisionError(f"refusing to destroy {name}: not a pgfsbench pool")
    txg.stop(name)  # no more commits of it from this process
    if shutil.which("zpool") is None or name not in existing_pools(runner):
        return  # never created, already gone, or its zfs-fuse daemon died with it
    guid = args.get("guid")
    if guid is not None and pool_guid(runner, name) not in (None, str(guid)):
        raise ProvisionError(f"refusing to destroy {name}: its guid is not the one created")

    def destroyed() -> bool:
        # "pool is busy" while a process is still leaving one of its mounts
        runner.run(["zpool", "destroy", "-f", name], timeout=300, check=False)
        return name not in existing_pools(runner)

    wait_until(destroyed, timeout=60, interval=1.0, what=f"zpool destroy {name}")


def dataset_properties(
    runner: Runner, dataset: str, impl: ZfsImplementation, names: tuple[str, ...] = ()
) -> dict[str, str]:
    """`zfs get -Hp` of the given (or all) properties, keeping only what the ZFS knows.
    Ratios are numbers on both implementations: OpenZFS's parsable output says '1.00',
    zfs-fuse's '1.00x' (seen in the test VM: the same figure stored two ways)."""
    wanted = [n for n in names if n in impl.properties] if names else ["all"]
    if not wanted:
        return {}
    done = runner.run(
        ["zfs", "get", "-Hp", "-o", "property,value,source", ",".join(wanted), dataset], timeout=60
    )
    result = {}
    for line in done.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 2:
            value = parts[1]
            if parts[0].endswith("ratio") and value.endswith("x"):
                value = value[:-1]
            result[parts[0]] = value
    return result


def sync_txg(runner: Runner, impl: ZfsImplementation, pool: str, datasets: list[str]) -> None:
    """Commit the open transaction group, so that space figures are not those of minutes ago.

    sync(2) does not do it (zfs-fuse keeps data in its ARC and ZIL, up to the txg timeout):
    `zpool sync` does on OpenZFS, and taking a snapshot does on any ZFS."""
    if not impl.fuse:
        done = runner.run(["zpool", "sync", pool], timeout=300, check=False)
        if done.returncode == 0:
            return
    for dataset in datasets:
        snap = f"{dataset}@pgfsb_sync_{secrets.token_hex(3)}"
        if runner.run(["zfs", "snapshot", snap], timeout=300, check=False).returncode == 0:
            runner.run(["zfs", "destroy", snap], timeout=300, check=False)


def apply_module_parameters(
    journal: Journal, params: dict[str, ZfsValue], impl: ZfsImplementation
) -> None:
    for name, value in params.items():
        v = resolve_value(value, impl, name)
        if v is None:
            continue
        path = MODULE_DIR / "parameters" / name
        try:
            write_value(journal, path, v, what=f"zfs module parameter {name}")
        except OSError as exc:
            raise ProvisionError(f"zfs module parameter {name}={v}: {exc.strerror}") from None


ARCSTATS = Path("/proc/spl/kstat/zfs/arcstats")


def arc_bytes() -> int | None:
    """The ARC's size now (kernel OpenZFS; zfs-fuse publishes no arcstats)."""
    try:
        for line in ARCSTATS.read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[0] == "size":
                return int(parts[2])
    except (OSError, ValueError):
        return None
    return None


def evict_pool_cache(
    journal: Journal, runner: Runner, storage: ProvisionedStorage, workdir: Path
) -> dict[str, object]:
    """Empty what the ARC holds of a pool's data the one way ZFS offers for a single pool:
    export it (every dataset unmounted, its buffers evicted) and import it again from the
    very devices it was created on (a private directory of links to them, so no other
    device is scanned). Journaled first: a run killed in between gets its pool imported
    back by cleanup, then destroyed. PostgreSQL must be stopped."""
    pool = str(storage.details["pool"]["name"])
    members = [
        *storage.device_roles.get("pool", ()),
        *storage.device_roles.get("log", ()),
        *storage.device_roles.get("cache", ()),
    ]
    links = member_links(workdir, members)
    before = arc_bytes()
    journal.record(
        f"zpool export {pool} (cold cache)", Undo("zpool_import", {"name": pool, "dir": str(links)})
    )

    def exported() -> bool:
        # "pool is busy" while the stopped server's last files are being released
        runner.run(["zpool", "export", pool], timeout=300, check=False)
        return pool not in existing_pools(runner)

    wait_until(exported, timeout=60, interval=1.0, what=f"zpool export {pool}")
    _import(runner, pool, links)
    missing = [str(v.mountpoint) for v in storage.volumes if mount_at(v.mountpoint) is None]
    if missing:
        raise ProvisionError(f"zpool import {pool} did not mount {', '.join(missing)}")
    after = arc_bytes()
    done: dict[str, object] = {
        "zfs_arc": f"pool {pool} exported and imported (its ARC buffers evicted)"
    }
    if before is not None and after is not None:
        done["arc_bytes_before"], done["arc_bytes_after"] = before, after
    return done


def member_links(directory: Path, members: list[str]) -> Path:
    """A private directory of links to a pool's very devices: `zpool import -d` scans it
    and no other device (never another copy of the same pool, an aged image's)."""
    links = directory / "zpool-import"
    make_dirs(links, 0o700)
    with Held.open(links) as held:
        for i, dev in enumerate(members):
            name = f"{i}-{Path(dev).name}"
            if not held.exists(name):
                held.symlink(name, Path(dev))
    return links


def import_as(
    journal: Journal, runner: Runner, old: str, new: str, members: list[str], directory: Path
) -> list[str]:
    """The pool named ``old`` on ``members`` (a copy of an aged pool's image) imported as
    ``new``, journaled first (destroyed at the end: it is the run's copy)."""
    if not old.startswith(POOL_PREFIX) or not new.startswith(POOL_PREFIX):
        raise ProvisionError(f"refusing to import {old} as {new}: not pgfsbench pools")
    links = member_links(directory, members)
    # cachefile=none as at its creation: a pool imported into zfs-fuse's cache file would
    # come back at the daemon's next start, on whatever device then has its loop's name
    argv = ["zpool", "import", "-o", "cachefile=none", "-d", str(links), old, new]
    created = journal.record(
        f"zpool import {old} as {new} (an aged image's copy)",
        Undo("zpool_destroy", {"name": new}),
    )
    done = runner.run(argv, timeout=300, check=False)
    if new not in existing_pools(runner):
        raise ProvisionError(
            f"zpool import {old} as {new} failed: {(done.stderr or done.stdout).strip()[-300:]}"
        )
    guid = pool_guid(runner, new)
    if guid is not None:
        journal.amend(created, guid=guid)
    return argv


def export(runner: Runner, pool: str) -> None:
    """The pool exported (its datasets unmounted, everything on its devices)."""
    txg.stop(pool)

    def exported() -> bool:
        # "pool is busy" while the last files of a stopped server are being released
        runner.run(["zpool", "export", pool], timeout=300, check=False)
        return pool not in existing_pools(runner)

    wait_until(exported, timeout=60, interval=1.0, what=f"zpool export {pool}")


def _import(runner: Runner, pool: str, links: Path) -> None:
    argv = ["zpool", "import", "-o", "cachefile=none", "-d", str(links), pool]  # as created
    done = runner.run(argv, timeout=300, check=False)
    if pool not in existing_pools(runner):
        raise ProvisionError(
            f"zpool import {pool} failed: {(done.stderr or done.stdout).strip()[-300:]}"
        )


@undo_action("zpool_import", bound=pool_name(POOL_PREFIX))
def _zpool_import(runner: Runner, args: dict[str, object]) -> None:
    """Bring an exported pool back, so that the older step can destroy it."""
    name = str(args["name"])
    if not name.startswith(POOL_PREFIX):
        raise ProvisionError(f"refusing to import {name}: not a pgfsbench pool")
    links = Path(str(args["dir"]))
    if shutil.which("zpool") is None or name in existing_pools(runner) or not links.is_dir():
        return
    _import(runner, name, links)
