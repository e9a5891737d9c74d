"""The ZFS storage driver: check what the installed ZFS can do, provision a pool and its
datasets (every step journaled), space figures, snapshots and cache eviction.
"""

from __future__ import annotations

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgfsbench.spec import ZfsDataset, ZfsStorage
from pgfsbench.storage.base import (
    ProvisionContext,
    ProvisionedStorage,
    StorageDriver,
    Volume,
    prepare_dir,
    prepare_volume_root,
    settle_commands,
    space_figures,
)
from pgfsbench.storage.mounts import mount_at
from pgfsbench.storage.snapshots import Snapshotter
from pgfsbench.storage.zfs import txg
from pgfsbench.storage.zfs.capabilities import (
    MODULE_DIR,
    ZfsImplementation,
    check_properties,
    detect,
    kernel_zfs_present,
    resolve_value,
    resolved_properties,
)
from pgfsbench.storage.zfs.commands import (
    apply_module_parameters,
    dataset_properties,
    evict_pool_cache,
    existing_pools,
    import_as,
    pool_guid,
    sync_txg,
)
from pgfsbench.storage.zfs.fuse import (
    FUSE_PARAMETERS,
    FuseDaemon,
    fuse_daemon_options,
    fuse_daemon_running,
    started_by_us,
    zfsrc,
)
from pgfsbench.storage.zfs.layout import (
    POOL_PREFIX,
    SPACE_PROPS,
    zfs_create_argv,
    zpool_create_argv,
)
from pgfsbench.system.errors import CapabilityError, CommandError, ProvisionError
from pgfsbench.system.journal import Journal, Undo
from pgfsbench.system.runner import Runner

_PROBED_FUSE: ZfsImplementation | None = None


@dataclass(frozen=True)
class ZfsDriver(StorageDriver[ZfsStorage]):
    def implementation(self, runner: Runner) -> ZfsImplementation:
        impl = detect(runner)
        if impl is None:
            raise CapabilityError(
                "no ZFS here: neither the OpenZFS kernel module "
                "(/sys/module/zfs) nor zfs-fuse is installed"
            )
        return impl

    def check(self, config: ZfsStorage, runner: Runner, workdir: Path) -> None:
        """Refuse what the installed ZFS cannot do, before anything is created."""
        impl = self.implementation(runner)
        if config.implementation != "any" and config.implementation != impl.kind:
            raise CapabilityError(
                f"the spec asks for {config.implementation} ZFS; this machine has {impl.label()}"
            )
        if impl.fuse and not impl.properties:
            impl = self._probe_fuse(runner, workdir)
        if impl.fuse and fuse_daemon_running() and not started_by_us():
            options = fuse_daemon_options(config.module_parameters)
            if options:
                raise CapabilityError(
                    "zfs-fuse is already running and was not started by pgfsbench: its "
                    f"options cannot be changed for this storage ({' '.join(options)}); "
                    "stop that daemon, or remove module_parameters"
                )
        self.validate(config, impl)

    def _probe_fuse(self, runner: Runner, workdir: Path) -> ZfsImplementation:
        """Start zfs-fuse briefly to ask it what it supports, then stop it (once a process).
        Its pidfile and journal live in the work directory."""
        global _PROBED_FUSE
        if _PROBED_FUSE is None:
            _PROBED_FUSE = self._start_and_ask(runner, workdir / "zfs-probe")
        return _PROBED_FUSE

    def _start_and_ask(self, runner: Runner, directory: Path) -> ZfsImplementation:
        from pgfsbench.system.journal import Journal

        directory.mkdir(parents=True, exist_ok=True)
        try:
            journal = Journal(directory / "probe.jsonl", runner)
            with journal.scope():
                FuseDaemon.ensure(journal, runner, directory / "zfs-fuse.pid", [])
                impl = detect(runner)
            journal.close()
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        assert impl is not None
        return impl

    def validate(self, config: ZfsStorage, impl: ZfsImplementation) -> None:
        problems: list[str] = []
        problems += check_properties(
            resolved_properties(config.data.properties, impl, "data.properties"),
            impl,
            "data.properties",
        )
        if config.wal is not None:
            problems += check_properties(
                resolved_properties(config.wal.properties, impl, "wal.properties"),
                impl,
                "wal.properties",
            )
        for name, value in config.module_parameters.items():
            v = resolve_value(value, impl, name)
            if v is None:
                continue
            if impl.fuse and name not in FUSE_PARAMETERS:
                problems.append(
                    f"module_parameters.{name}: zfs-fuse has no such tunable "
                    f"(it has: {', '.join(sorted(FUSE_PARAMETERS))})"
                )
            elif not impl.fuse and name not in impl.module_parameters:
                problems.append(
                    f"module_parameters.{name}: no /sys/module/zfs/parameters/{name}"
                    f" in OpenZFS {impl.version}"
                )
        if problems:
            raise CapabilityError("; ".join(problems))

    def provision(self, name: str, config: ZfsStorage, ctx: ProvisionContext) -> ProvisionedStorage:
        runner, journal = ctx.runner, ctx.journal
        impl, daemon = self.ready(config, journal, runner, ctx.directory)
        pool = self.new_pool_name(ctx.directory.name, runner)
        # an aged pool: its one device a block-level copy of the image, imported under
        # this run's name (storage/aging.py, engine/aging.py)
        aged = ctx.aged.get("pool")
        members = [ctx.devices.get(d, "pool", initial=aged) for d in config.pool.devices]
        devices = [m.path for m in members]
        log = [ctx.devices.get(d, "log").path for d in config.pool.log]
        cache = [ctx.devices.get(d, "cache").path for d in config.pool.cache]
        if aged is not None:
            argv = import_as(
                journal, runner, str(aged.manifest["pool"]), pool, devices, ctx.directory
            )
        else:
            argv = self.create_pool(config, impl, journal, runner, pool, devices, log, cache)
        if impl.fuse:  # its own timer commits none here: storage/zfs/txg.py
            txg.start(pool, devices)
        status = runner.run(["zpool", "status", pool], timeout=60, check=False).stdout

        data = self._dataset(
            ctx,
            impl,
            f"{pool}/data",
            ctx.directory / "mnt" / "data",
            config.data,
            "data",
            daemon,
            existing=aged is not None,
        )
        if aged is not None:
            data.details["age"] = {
                "image": aged.key,
                "recipe": aged.manifest.get("recipe"),
                "made": aged.manifest.get("made"),
                "aging": aged.manifest.get("churn"),
                "state_after_aging": aged.manifest.get("state"),
                "copy_seconds": members[0].details.get("aged_copy_seconds"),
            }
        wal, waldir = None, None
        if config.wal is not None:
            wal = self._dataset(
                ctx, impl, f"{pool}/wal", ctx.directory / "mnt" / "wal", config.wal, "wal", daemon
            )
            waldir = prepare_dir(wal.mountpoint / "pg_wal", ctx.postgres_user)
        prepare_volume_root(data.mountpoint)
        details: dict[str, Any] = {
            "implementation": impl.label(),
            "fuse": impl.fuse,
            "zfs_kind": impl.kind,
            "zfs_version": impl.version,
            "pool_version": impl.pool_version,
            # the processes that serve this storage: its work is the benchmark's own
            "service_processes": ["zfs-fuse"] if impl.fuse else [],
            "transaction_groups": txg.WORDS if impl.fuse else "OpenZFS's own timer",
            "pool": {
                "name": pool,
                "layout": config.pool.layout,
                "devices": devices,
                "log": log,
                "cache": cache,
                "ashift": config.pool.ashift,
                ("import_argv" if aged is not None else "create_argv"): argv,
                "status": status,
            },
        }
        details.update(_service_details(config, daemon))
        roles = {"pool": tuple(devices), "log": tuple(log), "cache": tuple(cache)}
        return ProvisionedStorage(
            name,
            "zfs",
            data,
            data.mountpoint / "pgdata",
            wal,
            waldir,
            details,
            {k: v for k, v in roles.items() if v},
        )

    @staticmethod
    def new_pool_name(tag: str, runner: Runner) -> str:
        """A name of pgfsbench's own no pool has (only pools so named are ever destroyed)."""
        pool = f"{POOL_PREFIX}{tag.replace('-', '_')}_{secrets.token_hex(3)}"
        if pool in existing_pools(runner):
            raise ProvisionError(f"a pool named {pool} already exists; refusing to touch it")
        return pool

    def create_pool(
        self,
        config: ZfsStorage,
        impl: ZfsImplementation,
        journal: Journal,
        runner: Runner,
        pool: str,
        devices: list[str],
        log: list[str] = [],  # noqa: B006 (read only)
        cache: list[str] = [],  # noqa: B006 (read only)
    ) -> list[str]:
        """`zpool create` as the spec says, journaled first (its destroy bound to its guid)."""
        pool_props = resolved_properties(config.pool.properties, impl, "pool.properties")
        argv = zpool_create_argv(
            pool,
            config.pool.layout,
            devices,
            log,
            config.pool.log_layout,
            cache,
            config.pool.ashift,
            pool_props,
        )
        created = journal.record(f"zpool create {pool}", Undo("zpool_destroy", {"name": pool}))
        try:
            runner.run(argv, timeout=300)
        except CommandError as exc:
            raise ProvisionError(f"zpool create failed: {exc}") from None
        guid = pool_guid(runner, pool)
        if guid is not None:  # cleanup destroys this very pool, never another of that name
            journal.amend(created, guid=guid)
        return argv

    def ready(
        self, config: ZfsStorage, journal: Journal, runner: Runner, directory: Path
    ) -> tuple[ZfsImplementation, FuseDaemon | None]:
        """ZFS ready for this storage: zfs-fuse started with its options (its pid file in
        ``directory``), or the kernel module's parameters set; what it supports checked
        against the spec."""
        impl = detect(runner)
        if impl is None:
            raise CapabilityError("ZFS disappeared since the preflight check")
        if impl.fuse or (not kernel_zfs_present()):
            daemon: FuseDaemon | None = FuseDaemon.ensure(
                journal,
                runner,
                directory / "zfs-fuse.pid",
                fuse_daemon_options(config.module_parameters),
            )
            impl = detect(runner)
            assert impl is not None
        else:
            daemon = None
            apply_module_parameters(journal, config.module_parameters, impl)
        self.validate(config, impl)
        return impl, daemon

    def _dataset(
        self,
        ctx: ProvisionContext,
        impl: ZfsImplementation,
        dataset: str,
        mountpoint: Path,
        spec: ZfsDataset,
        role: str,
        daemon: FuseDaemon | None,
        existing: bool = False,
    ) -> Volume:
        """The dataset made with its properties and mounted; ``existing`` (an aged pool's,
        made with them when it was aged): only mounted here."""
        props = resolved_properties(spec.properties, impl, f"{role}.properties")
        make_dataset(ctx.journal, ctx.runner, dataset, mountpoint, props, daemon, existing)
        info = mount_at(mountpoint)
        effective = dataset_properties(ctx.runner, dataset, impl)
        return Volume(
            role,
            "zfs",
            mountpoint,
            dataset,
            (),
            info.options if info else "",
            details={"dataset": dataset, "requested_properties": props, "properties": effective},
        )

    def settle(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, object]:
        """OpenZFS: `zpool wait -t free,initialize,trim` (the pool's background frees,
        initialisation and trims done), then its open transaction group committed;
        zfs-fuse has no `zpool wait`: the commit only, and said."""
        impl = detect(runner)
        if impl is None:
            return {}
        pool = storage.details["pool"]["name"]
        out: dict[str, object] = (
            {"zpool wait": "not in this ZFS (zfs-fuse): the transaction group committed only"}
            if impl.fuse
            else settle_commands(
                runner, [("zpool wait", ["zpool", "wait", "-t", "free,initialize,trim", pool])]
            )
        )
        sync_txg(runner, impl, pool, [v.source for v in storage.volumes])
        return out

    def space(self, storage: ProvisionedStorage, runner: Runner) -> dict[str, object]:
        impl = detect(runner)
        if impl is None:
            return dict(space_figures(storage))
        sync_txg(runner, impl, storage.details["pool"]["name"], [v.source for v in storage.volumes])
        figures: dict[str, Any] = dict(space_figures(storage))
        zfs: dict[str, Any] = {}
        for vol in storage.volumes:
            props = dataset_properties(runner, vol.source, impl, SPACE_PROPS)
            zfs[vol.role] = props
        figures["zfs"] = zfs
        used = {role: int(v["used"]) for role, v in zfs.items() if v.get("used", "").isdigit()}
        if used:
            figures["zfs_used_bytes"] = sum(used.values())
            # ZFS's own accounting, not du's (which counts what compression saved, and
            # disagreed with `zfs get used` by a fifth on the dbi example)
            figures["du_bytes"] = figures["space_bytes"]
            figures["space_source"] = "zfs get used"
            figures["space_bytes"] = sum(used.values())
            if "wal" in used:
                figures["pg_wal_bytes"] = used["wal"]
                figures["data_bytes"] = used.get("data", 0)
            else:
                figures["data_bytes"] = max(0, used.get("data", 0) - figures["pg_wal_bytes"])
        data_ratio = zfs.get("data", {}).get("compressratio")
        if data_ratio:
            figures["compressratio"] = data_ratio
        return figures

    def snapshotter(
        self, config: ZfsStorage, storage: ProvisionedStorage, journal: Journal, runner: Runner
    ) -> Snapshotter | None:
        """The data and WAL datasets, snapshotted during the measured phase."""
        if config.snapshots is None:
            return None
        return Snapshotter(
            "zfs",
            [v.source for v in storage.volumes],
            None,
            config.snapshots.every,
            config.snapshots.keep,
            journal,
            runner,
        )

    def evict_cache(
        self, journal: Journal, runner: Runner, storage: ProvisionedStorage, celldir: Path
    ) -> dict[str, object]:
        if "pool" not in storage.details:
            return {}
        return evict_pool_cache(journal, runner, storage, celldir)

    @property
    def cache_eviction(self) -> str:
        return "exporting and importing the pool"


def _service_details(config: ZfsStorage, daemon: FuseDaemon | None) -> dict[str, object]:
    """What serves the pool: the zfs-fuse daemon as started, or the kernel module's
    parameters as they are now."""
    if daemon is not None:
        return {
            "zfs_fuse_daemon": {
                "argv": list(daemon.argv),
                "started_by_pgfsbench": daemon.started_by_us,
                "zfsrc": zfsrc(),
            }
        }
    return {
        "module_parameters": {
            p: (MODULE_DIR / "parameters" / p).read_text().strip()
            for p in config.module_parameters
            if (MODULE_DIR / "parameters" / p).exists()
        }
    }


def make_dataset(
    journal: Journal,
    runner: Runner,
    dataset: str,
    mountpoint: Path,
    props: dict[str, str],
    daemon: FuseDaemon | None,
    existing: bool = False,
) -> None:
    """``dataset`` made with ``props`` and mounted at ``mountpoint``; ``existing``: only
    mounted there (an imported pool's, left unmounted: mountpoint=none)."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    if daemon is not None:
        # should the daemon die with us, its mount would be left dangling
        journal.record(
            f"zfs-fuse mount {mountpoint}",
            Undo("umount_dangling_fuse", {"target": str(mountpoint)}),
        )
    if not existing:
        runner.run(zfs_create_argv(dataset, mountpoint, props), timeout=120)
        return
    runner.run(["zfs", "set", f"mountpoint={mountpoint}", dataset], timeout=120)
    if mount_at(mountpoint) is None:
        runner.run(["zfs", "mount", dataset], timeout=120)
    if mount_at(mountpoint) is None:
        raise ProvisionError(f"{dataset} of the aged pool did not mount at {mountpoint}")


DRIVER = ZfsDriver()
