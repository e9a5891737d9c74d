"""Preparing a cell: an ordered list of steps, each journaled by the code it calls.

directories -> kernel settings -> storage -> its description -> device limits -> its
ceiling (under the limits) -> initdb -> configuration -> huge pages (sized by the
configured server) -> start -> pooler -> load -> settle.

The order is data (`STEPS`): a step that must follow initdb (huge pages sized from the
server's own figure) or precede the start (a pooler after it) is one entry in the list.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgfsbench import kernel
from pgfsbench.collect import ceiling
from pgfsbench.engine.warm import WarmImports
from pgfsbench.kernel import CpuGroup
from pgfsbench.plan import Plan
from pgfsbench.postgres import pgbouncer, sessions
from pgfsbench.postgres.binaries import Binaries
from pgfsbench.postgres.instance import SUPERUSER, Instance, children_of, socket_dir
from pgfsbench.postgres.template import Templates
from pgfsbench.results.records import RunPreparation
from pgfsbench.results.store import Store
from pgfsbench.spec import Cell, LoadedSpec
from pgfsbench.storage import driver_for, limits, sync_volumes, volume_info
from pgfsbench.storage.base import ProvisionContext, ProvisionedStorage, Volume
from pgfsbench.storage.devices import DISK_DAEMON, DeviceFactory, DevicePolicy, block_size
from pgfsbench.system.actions import make_dir
from pgfsbench.system.cpus import CpuSplit, pin_process
from pgfsbench.system.errors import InstanceError
from pgfsbench.system.held import Held, make_dirs
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from pgfsbench.units import parse_size
from pgfsbench.workloads import workload_for
from pgfsbench.workloads.base import DataTemplated, Endpoint, LoadResult, Workload, WorkloadContext

TEMPLATES = "initdb-templates"  # in the work directory: see postgres/template.py


@dataclass
class Engine:
    """What every step may use; one per campaign."""

    loaded: LoadedSpec
    plan: Plan
    store: Store
    workdir: Path
    runner: Runner
    journal: Journal
    policy: DevicePolicy
    binaries: Binaries  # the default PostgreSQL
    os_user: str | None
    phase: Callable[[str], None]
    campaign_id: int = 0
    by_bindir: dict[str, Binaries] = field(default_factory=dict)  # configurations' own
    # the imports a run needs only after its measurement, going on meanwhile (engine/warm.py)
    imports: WarmImports | None = None
    # the cgroup holding pgfsbench and what it starts: the benchmark's own CPU (kernel.py)
    cpu_group: CpuGroup | None = None
    # defaults.server_cpus: the server side's CPUs and the clients' (system/cpus.py)
    cpu_split: CpuSplit | None = None

    def binaries_for(self, cell: Cell) -> Binaries:
        """The PostgreSQL a cell runs: its configuration's bindir, else the default."""
        bindir = cell.postgres.bindir
        return self.by_bindir[bindir] if bindir else self.binaries

    def artifacts_dir(self, run_id: int) -> Path:
        path = self.store.artifacts_root / f"run-{run_id}"
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class CellState:
    """A cell as preparation builds it up (and as teardown and diagnosis find it)."""

    cell: Cell
    run_id: int  # the run that prepared it (its artifacts hold the preparation's outputs)
    workload: Workload
    celldir: Path | None = None
    logdir: Path | None = None
    scratch: Path | None = None
    kernel_applied: list[kernel.AppliedSetting] = field(default_factory=list)
    storage: ProvisionedStorage | None = None
    storage_details: dict[str, Any] = field(default_factory=dict)
    ceiling: dict[str, Any] | None = None
    instance: Instance | None = None
    initdb_output: str = ""
    load: LoadResult | None = None
    space_after_load: dict[str, Any] = field(default_factory=dict)
    bouncer: pgbouncer.Bouncer | None = None
    huge_pages: dict[str, int] | None = None
    memory_limit: dict[str, Any] | None = None
    max_connections: sessions.Raised | None = None  # set by pgfsbench (the spec left it)

    def prepared(self) -> RunPreparation:
        assert self.storage is not None
        return RunPreparation(
            fs=self.storage.fs,
            load_seconds=self.load.seconds if self.load else None,
            load_phases=dict(self.load.phases) if self.load else {},
            space_bytes=self.space_after_load.get("space_bytes"),
            storage_details=self.storage_details,
            kernel_applied=[vars(a) for a in self.kernel_applied],
            implementation=self.storage.details.get("implementation"),
            fuse=bool(self.storage.details.get("fuse", False)),
        )

    def context(self, eng: Engine, artifacts: Path) -> WorkloadContext:
        """Clients connect through the pooler when there is one; loading does not."""
        assert self.instance is not None and self.scratch is not None
        server = self.endpoint(eng)
        clients, lost = server, None
        pooler = self.cell.postgres.pooler
        if self.bouncer is not None and pooler is not None:
            clients = Endpoint(
                str(self.bouncer.socket_dir), pgbouncer.PORT, SUPERUSER, server.dbname
            )
            lost = pgbouncer.prepared_statements_lost(pooler, self.bouncer.version)
        return WorkloadContext(
            eng.runner,
            eng.journal,
            eng.binaries_for(self.cell),
            clients,
            server,
            self.scratch,
            artifacts,
            eng.os_user,
            eng.loaded.base_dir,
            lost,
        )

    def endpoint(self, eng: Engine) -> Endpoint:
        assert self.instance is not None
        return Endpoint(
            str(self.instance.socket_dir),
            self.instance.port,
            SUPERUSER,
            eng.loaded.spec.defaults.database,
        )


Step = Callable[[Engine, CellState], None]


def _directories(eng: Engine, st: CellState) -> None:
    cells_dir = eng.workdir / "cells"
    make_dirs(cells_dir)
    with Held.open(cells_dir) as held:
        if held.stat().st_uid == os.geteuid():
            held.hand_to(None, 0o755)  # PostgreSQL's OS user must traverse it whatever our umask
    st.celldir = make_dir(eng.journal, cells_dir / f"run-{st.run_id}")
    st.logdir = make_dir(eng.journal, st.celldir / "log", owner=eng.os_user, mode=0o755)
    # the benchmark's own scratch directory (transaction logs): it runs as the OS user
    st.scratch = make_dir(eng.journal, st.celldir / "work", owner=eng.os_user, mode=0o755)


def _kernel(eng: Engine, st: CellState) -> None:
    eng.phase("kernel settings")
    st.kernel_applied = kernel.apply(eng.journal, st.cell.kernel)


def _storage(eng: Engine, st: CellState) -> None:
    assert st.celldir is not None
    from pgfsbench.engine.aging import AgingContext, aged_images

    assert st.celldir is not None
    aged = aged_images(  # an aged filesystem: its image, made once (cached)
        AgingContext(
            eng.runner,
            eng.journal,
            eng.workdir,
            eng.binaries_for(st.cell),
            eng.os_user,
            st.celldir,
            eng.phase,
            eng.loaded.spec.defaults.startup_timeout,
        ),
        st.cell,
    )
    eng.phase(f"provisioning {st.cell.fs}" + (" (a copy of its aged image)" if aged else ""))
    devices = DeviceFactory(eng.journal, eng.runner, st.celldir / "devices", eng.policy)
    ctx = ProvisionContext(eng.journal, eng.runner, st.celldir, devices, eng.os_user, aged)
    st.storage = driver_for(st.cell.fs).provision(st.cell.storage_name, st.cell.storage, ctx)
    if devices.emulated:
        # the emulated disks' daemon serves this storage: its work is the benchmark's own
        details = st.storage.details
        details["emulated_devices"] = devices.emulated
        details["service_processes"] = [*details.get("service_processes", []), DISK_DAEMON]


def _describe_storage(eng: Engine, st: CellState) -> None:
    assert st.storage is not None
    st.storage_details = storage_details(eng.runner, st.storage)


def _limits(eng: Engine, st: CellState) -> None:
    """Cap the devices under test as the spec's profiles say (journaled, undone after)."""
    assert st.storage is not None
    wanted = limits.configured(st.cell.storage)
    if not wanted:
        return
    eng.phase("device limits")
    mech = limits.require()
    applied = []
    for role, cfg in wanted.items():
        for device in st.storage.device_roles.get(role, ()):
            resolved = limits.resolve_for(cfg, block_size(device))
            entry: dict[str, Any] = {
                "role": role,
                "device": device,
                "profile": cfg.profile,
                "capacity_gib": resolved.capacity_gib,
                "text": resolved.text,
                "source": limits.source_of(cfg.profile),
            }
            if not resolved.figures.is_unlimited():
                entry.update(limits.apply(eng.journal, mech, device, resolved.figures))
            applied.append(entry)
    st.storage_details["device_limits"] = applied


def _ceiling(eng: Engine, st: CellState) -> None:
    """pg_test_fsync and fio on the empty filesystem, once per storage identity."""
    assert st.storage is not None
    if not st.cell.storage.ceiling:
        return
    ident = ceiling.identity(st.cell.storage.model_dump())
    cached = eng.store.get_ceiling(ident)
    if cached is not None:
        st.ceiling = {"identity": ident, "cached": True, **cached}
        return
    eng.phase("measuring the storage's ceiling (pg_test_fsync, fio)")
    figures = ceiling.measure(
        eng.runner,
        eng.binaries_for(st.cell).tool("pg_test_fsync"),
        st.storage.data.mountpoint,
        seconds=eng.loaded.spec.defaults.ceiling_seconds,
        os_user=eng.os_user,
    )
    eng.store.put_ceiling(ident, st.cell.storage_name, figures)
    st.ceiling = {"identity": ident, "cached": False, **figures}


def _initdb(eng: Engine, st: CellState) -> None:
    assert st.storage is not None and st.celldir is not None and st.logdir is not None
    sock = socket_dir(eng.journal, st.celldir, eng.os_user)
    st.instance = Instance(
        eng.binaries_for(st.cell),
        st.storage.pgdata,
        st.storage.waldir,
        sock,
        st.logdir / "postgresql.log",
        eng.os_user,
        cpus=eng.cpu_split.server if eng.cpu_split else None,
    )
    templates = Templates(eng.workdir / TEMPLATES)
    source = None
    if isinstance(st.workload, DataTemplated):
        # a capture's data stays with the capture: its templates are kept there
        templates = Templates(st.workload.templates_root(st.cell, eng.loaded.base_dir))
        # the workload brings its own data (a capture's copy): restored once, then copied
        eng.phase("data template")
        source = st.workload.data_template(
            st.cell,
            runner=eng.runner,
            journal=eng.journal,
            binaries=eng.binaries_for(st.cell),
            templates=templates,
            os_user=eng.os_user,
            scratch=st.celldir,
            socket_dir=sock,
            log_path=st.logdir / "restore.log",
            base_dir=eng.loaded.base_dir,
        )
    eng.phase("initdb")
    st.initdb_output = st.instance.init(
        eng.journal, eng.runner, st.cell.postgres.initdb, templates, source=source
    )


def _configure(eng: Engine, st: CellState) -> None:
    assert st.instance is not None
    settings = dict(st.cell.postgres.settings)
    st.max_connections = sessions.raised(
        st.cell, sessions.initdb_max_connections(st.instance.pgdata)
    )
    if st.max_connections is not None:
        settings["max_connections"] = st.max_connections.after
    st.instance.configure(settings)


def _huge_pages(eng: Engine, st: CellState) -> None:
    """huge_pages = on/try: reserve as many huge pages as the server says it needs
    (postgres -C shared_memory_size_in_huge_pages), on top of those already reserved;
    journaled, the old count restored after the cell. A kernel configuration that sets
    vm.nr_hugepages itself is taken as given: the user chose the count, and a shortfall
    is then the server's to report."""
    assert st.instance is not None
    setting = str(st.cell.postgres.settings.get("huge_pages", "off")).lower()
    if setting not in ("on", "try", "true", "1") or "vm.nr_hugepages" in st.cell.kernel.sysctl:
        return
    eng.phase("huge pages")
    need = st.instance.shared_memory_huge_pages(eng.runner)
    st.huge_pages = kernel.reserve_huge_pages(eng.journal, need)
    got, asked = st.huge_pages["obtained"], st.huge_pages["asked"]
    if got < asked and setting in ("on", "true", "1"):
        raise InstanceError(
            f"huge_pages = on: the kernel gave {got} of the {asked} huge pages "
            f"asked for ({st.huge_pages['page_kb']} kB each; vm.nr_hugepages "
            f"{st.huge_pages['before']} -> {st.huge_pages['after']})"
        )


def _start(eng: Engine, st: CellState) -> None:
    assert st.instance is not None
    eng.phase("starting PostgreSQL")
    st.instance.start(eng.journal, eng.runner, eng.loaded.spec.defaults.startup_timeout)
    st.instance.create_database(eng.loaded.spec.defaults.database)


def _memory_limit(eng: Engine, st: CellState) -> None:
    """defaults.memory_limit: PostgreSQL (postmaster and server processes, and every backend
    it forks) in a memory cgroup, before the load, so the page cache the load and the run
    fill is charged to it. shared_buffers, mapped at start, is not."""
    limit = eng.loaded.spec.defaults.memory_limit
    if not limit:
        return
    assert st.instance is not None and st.instance.pid is not None
    eng.phase(f"memory limit {limit}")
    pids = [st.instance.pid] + [p for p, _ in children_of(st.instance.pid)]
    st.memory_limit = kernel.limit_memory(
        eng.journal, f"pgfsbench-run-{st.run_id}", parse_size(limit), pids
    )


def _pooler(eng: Engine, st: CellState) -> None:
    assert st.instance is not None and st.celldir is not None
    pooler = st.cell.postgres.pooler
    if pooler is None:
        return
    eng.phase("starting pgbouncer")
    st.bouncer = pgbouncer.start(
        eng.journal,
        eng.runner,
        pooler,
        st.celldir,
        st.instance.socket_dir,
        st.instance.port,
        SUPERUSER,
        eng.os_user,
    )
    if eng.cpu_split is not None:  # the pooler is the server side's (system/cpus.py)
        pin_process(st.bouncer.child.pid, eng.cpu_split.server)
    st.storage_details["pooler"] = {
        "kind": pooler.kind,
        "version": st.bouncer.version,
        "config": (st.bouncer.directory / "pgbouncer.ini").read_text(),
    }


def _load(eng: Engine, st: CellState) -> None:
    if eng.imports is not None:
        eng.imports.wait()  # nothing of ours takes CPU from a timed phase
    eng.phase(f"loading ({st.workload.tool}, scale {st.cell.scale})")
    st.load = st.workload.load(st.context(eng, eng.artifacts_dir(st.run_id)), st.cell)


def _settle(eng: Engine, st: CellState) -> None:
    """Make the space figures and the first measured second independent of the load's
    dirty pages: checkpoint, then flush the filesystems under test. Timed, as the load's
    last phase ("write_out"): a load is on the disk only then, and with RAM to spare
    pgbench -i's own time is mostly the page cache's. Nothing with `write_out = false`."""
    assert st.instance is not None and st.storage is not None
    if not eng.loaded.spec.defaults.write_out:
        st.space_after_load = {}  # not allocated yet: the space is read after the run
        return
    started = time.monotonic()
    st.instance.checkpoint()
    checkpointed = time.monotonic()
    sync_volumes(eng.runner, st.storage)
    if st.load is not None:
        st.load.phases["write_out"] = round(time.monotonic() - started, 3)
        st.load.phases["write_out_checkpoint"] = round(checkpointed - started, 3)
    st.space_after_load = driver_for(st.cell.fs).space(st.storage, eng.runner)
    st.storage_details["state_after_load"] = filesystem_state(eng, st)


def filesystem_state(eng: Engine, st: CellState) -> dict[str, Any] | None:
    """The data filesystem's state once the data is loaded (storage/aging.state_of):
    free-space fragmentation, fullness, extents per GiB of the data files; fresh or aged,
    so the two read side by side. None for what has no device of its own (tmpfs)."""
    from pgfsbench.storage.aging import state_of

    assert st.storage is not None
    data = st.storage.data
    if not data.devices and st.cell.fs != "zfs":
        return None
    pool = st.storage.details.get("pool") if st.cell.fs == "zfs" else None
    name = pool.get("name") if isinstance(pool, dict) else None
    return state_of(
        eng.runner,
        st.cell.fs,
        data.source,
        data.mountpoint,
        st.storage.pgdata,
        str(name) if name else None,
        st.storage.device_roles.get("pool", ()),
    )


STEPS: tuple[tuple[str, Step], ...] = (
    ("directories", _directories),
    ("kernel", _kernel),
    ("storage", _storage),
    ("storage details", _describe_storage),
    ("device limits", _limits),
    ("ceiling", _ceiling),
    ("initdb", _initdb),
    ("configure", _configure),
    ("huge pages", _huge_pages),
    ("start", _start),
    ("memory limit", _memory_limit),
    ("pooler", _pooler),
    ("load", _load),
    ("settle", _settle),
)


def new_state(eng: Engine, cell: Cell, run_id: int) -> CellState:
    return CellState(cell, run_id, workload_for(cell, eng.loaded.spec.defaults))


def prepare(eng: Engine, state: CellState) -> None:
    """Run every step in order. The caller keeps ``state``: when a step fails, what was
    built so far is what teardown and diagnosis look at."""
    for _name, step in STEPS:
        step(eng, state)


def storage_details(runner: Runner, storage: ProvisionedStorage) -> dict[str, object]:
    def volume(v: Volume) -> dict[str, object]:
        return {
            "fs": v.fs,
            "source": v.source,
            "devices": list(v.devices),
            "mountpoint": str(v.mountpoint),
            "mount_options": v.mount_options,
            "mkfs_argv": list(v.mkfs_argv),
            "mkfs_output": v.mkfs_output,
            "fs_info": volume_info(runner, v),
            **v.details,
        }

    result: dict[str, Any] = {"data": volume(storage.data), **storage.details}
    if storage.wal is not None:
        result["wal"] = volume(storage.wal)
    return result
