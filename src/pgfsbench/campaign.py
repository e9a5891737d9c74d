"""Executing a plan: for each run, provision -> configure -> initdb -> load -> measure -> store.

Everything a run creates is journaled and undone when the run ends, however it ends.
A failed run is recorded with its reason and the matrix goes on; an interrupt (Ctrl-C,
SIGTERM) undoes everything and stops.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pgfsbench import __version__, kernel
from pgfsbench.collect import ceiling
from pgfsbench.collect.observation import Observation, ObservationResult
from pgfsbench.collect.txlog import LatencyStats, compress_logs, parse_txlog
from pgfsbench.plan import Plan, PlannedRun, is_root
from pgfsbench.postgres.binaries import Binaries, find_binaries
from pgfsbench.postgres.instance import SUPERUSER, Instance
from pgfsbench.results.store import Store
from pgfsbench.spec import Cell, LoadedSpec
from pgfsbench.storage import driver_for
from pgfsbench.storage.base import ProvisionContext, ProvisionedStorage, Volume
from pgfsbench.storage.blockfs import fs_info
from pgfsbench.storage.devices import DeviceFactory, DevicePolicy, check_real_device
from pgfsbench.system.actions import make_dir, watch_process_group
from pgfsbench.system.errors import (
    CommandError,
    Interrupted,
    NeedsRootError,
    PgfsbenchError,
    UsageError,
    WorkloadError,
)
from pgfsbench.system.journal import Journal
from pgfsbench.system.runner import Runner
from pgfsbench.units import parse_duration
from pgfsbench.workloads import pgbench

DEFAULT_WORKDIR = Path("/var/tmp/pgfsbench")


class Events(Protocol):
    """What the campaign tells its front end (progress bar, log lines)."""

    def run_started(self, run: PlannedRun, run_id: int) -> None: ...
    def phase(self, text: str) -> None: ...
    def live_tps(self, second: float, tps: float) -> None: ...
    def run_finished(self, run: PlannedRun, record: dict[str, Any]) -> None: ...
    def warning(self, text: str) -> None: ...


class QuietEvents:
    def run_started(self, run: PlannedRun, run_id: int) -> None:
        pass

    def phase(self, text: str) -> None:
        pass

    def live_tps(self, second: float, tps: float) -> None:
        pass

    def run_finished(self, run: PlannedRun, record: dict[str, Any]) -> None:
        pass

    def warning(self, text: str) -> None:
        pass


@dataclass
class Loaded:
    """A provisioned, initialised, loaded and running cell."""

    storage: ProvisionedStorage
    instance: Instance
    load_seconds: float | None
    load_phases: dict[str, float]
    space_after_load: dict[str, Any]
    storage_details: dict[str, Any]
    kernel_applied: list[dict[str, str]]
    celldir: Path
    initdb_output: str = ""
    ceiling: dict[str, Any] | None = None


@dataclass
class CampaignResult:
    campaign_id: int
    run_ids: list[int] = field(default_factory=list)
    status: str = "done"


def postgres_os_user() -> str | None:
    """As root, PostgreSQL runs as the 'postgres' OS user; otherwise as ourselves."""
    if not is_root():
        return None
    try:
        pwd.getpwnam(SUPERUSER)
    except KeyError:
        raise UsageError("running as root needs a 'postgres' OS user to run PostgreSQL as "
                         "(Debian's postgresql package creates it)") from None
    return SUPERUSER


def require_root(plan: Plan) -> None:
    if plan.needs_root and not is_root():
        raise NeedsRootError("provisioning storage (losetup, mkfs, mount, sysctl) needs root; "
                             "run as root, or use storage with fs = \"existing\"")


def check_reachable(path: Path, user: str | None) -> None:
    """Every ancestor of the work directory must be searchable by the PostgreSQL OS user."""
    if user is None:
        return
    for parent in [path, *path.parents]:
        if not parent.exists():
            continue
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            raise UsageError(f"--workdir {path}: the {user} OS user cannot enter {parent} "
                             f"(mode {stat.filemode(mode)}); choose a directory under /var/tmp")


class Campaign:
    def __init__(self, loaded: LoadedSpec, plan: Plan, store: Store, *,
                 workdir: Path = DEFAULT_WORKDIR, policy: DevicePolicy | None = None,
                 events: Events | None = None, runner: Runner | None = None):
        self.loaded = loaded
        self.spec = loaded.spec
        self.plan = plan
        self.store = store
        self.workdir = workdir.resolve()
        self.policy = policy or DevicePolicy()
        self.events: Events = events or QuietEvents()
        self.runner = runner or Runner()
        self.binaries: Binaries | None = None
        self.os_user: str | None = None
        self._instance: Instance | None = None

    # ------------------------------------------------------------ checks before anything

    def preflight(self) -> None:
        """Everything that can be refused is refused here, before anything is created."""
        require_root(self.plan)
        self.os_user = postgres_os_user()
        try:
            self.workdir.mkdir(parents=True, exist_ok=True)
            if self.workdir.stat().st_uid == os.geteuid():
                self.workdir.chmod(0o755)
        except OSError as exc:
            raise UsageError(f"--workdir {self.workdir}: {exc.strerror}") from None
        if not os.access(self.workdir, os.W_OK | os.X_OK):
            raise UsageError(f"--workdir {self.workdir} is not writable by this user; "
                             "choose another with --workdir")
        check_reachable(self.workdir, self.os_user)
        self.binaries = find_binaries(self.spec.defaults.pg_bindir)
        for cell in self.plan.cells:
            driver_for(cell.fs).check(cell.storage, self.runner)
            problems = kernel.check(cell.kernel)
            if problems:
                raise UsageError(f"kernel {cell.kernel_name}: {'; '.join(problems)}")
        for dev in self.plan.real_devices:
            check_real_device(self.runner, dev, self.policy)

    # ------------------------------------------------------------ the whole matrix

    def execute(self) -> CampaignResult:
        self.preflight()
        journal = Journal.create(self.workdir, self.runner, meta={"results": self.store.target})
        campaign_id = self.store.start_campaign(
            name=self.spec.name or self.loaded.path.stem, spec_path=str(self.loaded.path),
            spec_text=self.loaded.text, overrides=list(self.loaded.overrides),
            host=socket.gethostname(), pgfsbench_version=__version__,
            workdir=str(self.workdir), environment=host_environment(self.binaries))
        result = CampaignResult(campaign_id)
        try:
            for group in self._provisioning_groups():
                self._execute_group(journal, group, result)
        except (Interrupted, KeyboardInterrupt):
            result.status = "interrupted"
            raise
        except BaseException:
            result.status = "failed"
            raise
        finally:
            journal.undo_since(0)
            for failure in journal.failures:
                self.events.warning(f"could not undo '{failure.step.what}': {failure.error} "
                                    f"(run `pgfsbench cleanup --workdir {self.workdir}`)")
            journal.close()
            self.store.finish_campaign(campaign_id, result.status)
        return result

    def _provisioning_groups(self) -> list[list[PlannedRun]]:
        """Runs that share one provisioning and load: each run alone (load_per=repetition),
        or all repetitions of a cell (load_per=cell)."""
        if self.spec.defaults.load_per != "cell":
            return [[planned] for planned in self.plan.runs]
        by_cell: dict[str, list[PlannedRun]] = {}
        for planned in self.plan.runs:
            by_cell.setdefault(planned.cell.id, []).append(planned)
        return list(by_cell.values())

    def _execute_group(self, journal: Journal, group: list[PlannedRun],
                       result: CampaignResult) -> None:
        """Provision once, measure each run; a failed set-up fails the group's other runs."""
        with journal.scope():
            loaded_cell: Loaded | None = None
            setup_error: str | None = None
            last_run_id: int | None = None
            try:
                for planned in group:
                    run_id = last_run_id = self._start_run(journal, planned,
                                                           result.campaign_id, result)
                    if setup_error is not None:
                        self._fail(planned, run_id, setup_error)
                        continue
                    try:
                        if loaded_cell is None:
                            loaded_cell = self._prepare(journal, planned.cell, run_id)
                        self._measure(journal, planned, run_id, loaded_cell)
                    except (Interrupted, KeyboardInterrupt):
                        self._fail(planned, run_id, "interrupted", "aborted")
                        raise
                    except PgfsbenchError as exc:
                        if loaded_cell is None:
                            setup_error = str(exc)
                        self._fail(planned, run_id, str(exc))
            finally:
                if last_run_id is not None:
                    self._collect_logs(last_run_id)

    def _start_run(self, journal: Journal, planned: PlannedRun, campaign_id: int,
                   result: CampaignResult) -> int:
        cell = planned.cell
        w = cell.workload
        run_id = self.store.start_run(
            campaign_id=campaign_id, cell=cell.id, storage=cell.storage_name, fs=cell.fs,
            postgres=cell.postgres_name, kernel=cell.kernel_name, workload=w.name,
            repetition=planned.repetition, scale=self.spec.defaults.scale, clients=w.clients,
            threads=w.threads, duration_s=w.duration_s, warmup_s=w.warmup_s,
            params=cell_params(cell), pg_version=self.binaries.version if self.binaries else None)
        journal.note(run_id=run_id)
        result.run_ids.append(run_id)
        self.events.run_started(planned, run_id)
        return run_id

    def _fail(self, planned: PlannedRun, run_id: int, error: str, status: str = "failed") -> None:
        self.store.finish_run(run_id, status, error=error)
        self.events.run_finished(planned, {"run_id": run_id, "status": status, "error": error})

    # ------------------------------------------------------------ one cell

    def artifacts_dir(self, run_id: int) -> Path:
        path = self.store.artifacts_root / f"run-{run_id}"
        path.mkdir(parents=True, exist_ok=True)
        return path

    def _prepare(self, journal: Journal, cell: Cell, run_id: int) -> Loaded:
        assert self.binaries is not None
        d = self.spec.defaults
        cells_dir = self.workdir / "cells"
        cells_dir.mkdir(exist_ok=True)
        if cells_dir.stat().st_uid == os.geteuid():
            cells_dir.chmod(0o755)  # PostgreSQL's OS user must traverse it whatever our umask
        celldir = make_dir(journal, cells_dir / f"run-{run_id}")
        logdir = make_dir(journal, celldir / "log", owner=self.os_user, mode=0o755)

        self.events.phase("kernel settings")
        applied = kernel.apply(journal, cell.kernel)

        self.events.phase(f"provisioning {cell.fs}")
        ctx = ProvisionContext(journal, self.runner, celldir,
                               DeviceFactory(journal, self.runner, celldir / "devices",
                                             self.policy), self.os_user)
        driver = driver_for(cell.fs)
        storage = driver.provision(cell.storage_name, cell.storage, ctx)
        details = storage_details(self.runner, storage)
        ceiling_figures = self._ceiling(cell, storage) if cell.storage.ceiling else None

        sock = socket_dir(journal, celldir, self.os_user)
        instance = Instance(self.binaries, storage.pgdata, storage.waldir, sock,
                            logdir / "postgresql.log", self.os_user)
        self._instance = instance  # so its log is kept even if it never starts
        self.events.phase("initdb")
        initdb_out = instance.init(self.runner, cell.postgres.initdb)
        instance.configure(cell.postgres.settings)
        self.events.phase("starting PostgreSQL")
        instance.start(journal, self.runner, parse_duration(d.startup_timeout))
        instance.create_database(d.database)

        self.events.phase(f"loading scale {d.scale}")
        conn = pgbench.Connection(str(sock), instance.port, SUPERUSER, d.database)
        argv = pgbench.init_argv(self.binaries.tool("pgbench"), conn, d.scale, d.generation,
                                 d.foreign_keys)
        started = time.monotonic()
        try:
            done = self.runner.run(argv, timeout=max(600.0, d.scale * 120.0))
        except CommandError as exc:
            raise WorkloadError(f"pgbench -i failed: {exc}") from None
        wall = time.monotonic() - started
        (self.artifacts_dir(run_id) / "pgbench-init.txt").write_text(done.stdout + done.stderr)
        parsed = pgbench.parse_init(done.stdout + done.stderr)
        phases = dict(parsed.phases) if parsed else {}
        phases["wall_clock"] = round(wall, 3)
        # Make the space figures and the first measured second independent of the load's
        # dirty pages: checkpoint, then flush the filesystems.
        instance.checkpoint()
        os.sync()
        space = driver.space(storage, self.runner)
        return Loaded(storage, instance, parsed.seconds if parsed else wall, phases, space,
                      details, [vars(a) for a in applied], celldir, initdb_out,
                      ceiling_figures)

    def _ceiling(self, cell: Cell, storage: ProvisionedStorage) -> dict[str, Any]:
        """pg_test_fsync and fio on the empty filesystem, once per storage identity."""
        assert self.binaries is not None
        ident = ceiling.identity(cell.storage.model_dump())
        cached = self.store.get_ceiling(ident)
        if cached is not None:
            return {"identity": ident, "cached": True, **cached["figures"]}
        self.events.phase("measuring the storage's ceiling (pg_test_fsync, fio)")
        figures = ceiling.measure(self.runner, self.binaries.tool("pg_test_fsync"),
                                  storage.data.mountpoint)
        self.store.put_ceiling(ident, cell.storage_name, figures)
        return {"identity": ident, "cached": False, **figures}

    def _measure(self, journal: Journal, planned: PlannedRun, run_id: int, c: Loaded) -> None:
        assert self.binaries is not None
        w = planned.cell.workload
        d = self.spec.defaults
        conn = pgbench.Connection(str(c.instance.socket_dir), c.instance.port, SUPERUSER,
                                  d.database)
        art = self.artifacts_dir(run_id)
        self.store.update_run(run_id, fs=c.storage.fs, load_seconds=c.load_seconds,
                              load_phases=c.load_phases,
                              space_bytes=c.space_after_load.get("space_bytes"),
                              storage_details=c.storage_details, kernel_applied=c.kernel_applied,
                              implementation=c.storage.details.get("implementation"),
                              fuse=bool(c.storage.details.get("fuse", False)))
        observation = Observation(c.instance.conninfo(d.database), self.binaries.major,
                                  c.storage.block_devices, c.instance.log_path,
                                  enabled=d.samplers, wait_hz=d.wait_event_hz)
        observation.start()
        try:
            warmup_tps = None
            if w.warmup_s > 0:
                self.events.phase(f"warm-up {w.warmup_s:.0f} s")
                warm = self._pgbench(journal, conn, planned, w.warmup_s, art / "warmup",
                                     vacuum=True, live=False)
                warmup_tps = warm[0].tps
            self.events.phase(f"measuring {w.duration_s:.0f} s")
            summary, progress, rc = self._pgbench(
                journal, conn, planned, w.duration_s, art / "pgbench", vacuum=w.warmup_s <= 0,
                live=True, log_prefix=art / "txlog" if d.samplers else None,
                observation=observation)
            observed = observation.finish()
        except BaseException:
            with contextlib.suppress(Exception):
                observation.finish()
            raise
        self.events.phase("latency percentiles")
        logs = sorted(art.glob("txlog.*"))
        latency = parse_txlog(logs, sampling_rate=w.sampling_rate, duration_s=w.duration_s)
        if logs:
            self.store.put_artifact(run_id, "txlog", compress_logs(logs, art / "txlog.gz"))
        c.instance.checkpoint()
        os.sync()
        space_after = driver_for(planned.cell.fs).space(c.storage, self.runner)
        self._store_series(run_id, progress)
        self._store_observation(run_id, observed, latency, w.warmup_s, w.duration_s)
        status, error = "ok", None
        if rc != 0 or summary.tps is None:
            status = "failed"
            error = (summary.errors[-1] if summary.errors else f"pgbench exited {rc}")
        elif summary.aborted:
            status, error = "failed", "pgbench run was aborted; results are incomplete"
        record = {
            "tps": summary.tps, "warmup_tps": warmup_tps, "latency_avg_ms": summary.latency_avg_ms,
            "latency_stddev_ms": summary.latency_stddev_ms, "transactions": summary.transactions,
            "failed_transactions": summary.failed_transactions,
            "initial_connection_ms": summary.initial_connection_ms,
            "space_after_run_bytes": space_after.get("space_bytes"),
            "space": {"after_load": c.space_after_load, "after_run": space_after},
            "environment": run_environment(self.binaries, c, observed), "error": error,
            "artifacts_dir": str(art),
            "latency_ms": latency.percentiles_ms if latency else None,
            "wal_bytes": observed.wal_bytes, "wal_fpi": observed.wal_fpi,
            "metrics": {**observed.metrics, "wal_records": observed.wal_records,
                        "latency_log": latency.as_dict() if latency else None,
                        "ceiling": {k: v for k, v in (c.ceiling or {}).items()
                                    if not k.endswith("_raw")} or None}}
        self.store.finish_run(run_id, status, **record)
        for kind, name in (("pgbench_stdout", "pgbench.stdout"),
                           ("pgbench_stderr", "pgbench.stderr"),
                           ("pgbench_init", "pgbench-init.txt")):
            if (art / name).exists():
                self.store.put_artifact(run_id, kind, art / name)
        self.events.run_finished(planned, {"run_id": run_id, "status": status, "error": error,
                                           "tps": summary.tps,
                                           "latency_avg_ms": summary.latency_avg_ms})

    def _pgbench(self, journal: Journal, conn: pgbench.Connection, planned: PlannedRun,
                 seconds: float, out: Path, *, vacuum: bool, live: bool,
                 log_prefix: Path | None = None, observation: Observation | None = None
                 ) -> tuple[pgbench.RunSummary, list[pgbench.ProgressPoint], int]:
        assert self.binaries is not None
        w = planned.cell.workload
        argv = pgbench.run_argv(self.binaries.tool("pgbench"), conn, w, seconds,
                                base_dir=self.loaded.base_dir, vacuum=vacuum,
                                log_prefix=log_prefix, sampling_rate=w.sampling_rate)
        if observation is not None:
            observation.mark_measured_start()
        child = self.runner.spawn(argv, stdout_path=out.with_suffix(".stdout"),
                                  cwd=out.parent)
        # the pid is only known once started; if we are killed in between, pgbench ends
        # by itself when cleanup stops the server it is connected to
        watch_process_group(journal, child.pid, child.start_time, f"pgbench pid {child.pid}")
        progress: list[pgbench.ProgressPoint] = []

        def on_line(line: str) -> None:
            point = pgbench.parse_progress(line)
            if point is not None:
                progress.append(point)
                if live:
                    self.events.live_tps(point.t, point.tps)

        child.on_stderr_line(on_line)
        try:
            rc = child.wait(timeout=seconds + 300)
        except BaseException:
            child.kill_tree()
            raise
        out.with_suffix(".stderr").write_text(child.stderr)
        stdout = out.with_suffix(".stdout").read_text()
        return pgbench.parse_run(stdout, child.stderr), progress, rc

    def _store_series(self, run_id: int, progress: list[pgbench.ProgressPoint]) -> None:
        if not progress:
            return
        self.store.put_series(run_id, "tps", [p.tps for p in progress], unit="tps",
                              t0=progress[0].t)
        self.store.put_series(run_id, "latency_avg_ms", [p.latency_ms for p in progress],
                              unit="ms", t0=progress[0].t)
        self.store.put_series(run_id, "latency_stddev_ms", [p.stddev_ms for p in progress],
                              unit="ms", t0=progress[0].t)
        if any(p.failed for p in progress):
            self.store.put_series(run_id, "failed", [p.failed for p in progress], unit="tx",
                                  t0=progress[0].t)

    def _store_observation(self, run_id: int, observed: ObservationResult,
                           latency: LatencyStats | None, warmup_s: float,
                           duration_s: float) -> None:
        for name, (t0, values) in observed.series.items():
            self.store.put_series(run_id, name, values, unit=SERIES_UNITS.get(name, ""), t0=t0)
        if latency is not None:
            offset = round(latency.start_epoch - (observed.measured_start or
                                                  latency.start_epoch))
            for name, values in latency.series.items():
                self.store.put_series(run_id, name, values,
                                      unit="ms" if name.endswith("_ms") else "tps",
                                      t0=1.0 + offset)
            self.store.put_series(run_id, "latency_histogram",
                                  [[b, n] for b, n in sorted(latency.histogram.items())],
                                  unit="[bucket = ln(latency us) * 100, count]", step=0.0)
        window = [c for c in observed.checkpoints
                  if c["ended_s"] >= -warmup_s - 1
                  and (c["started_s"] if c["started_s"] is not None else c["ended_s"])
                  < duration_s + 0.5]
        self.store.put_checkpoints(run_id, window)

    def _collect_logs(self, run_id: int) -> None:
        """Stop the server cleanly and keep its log with the run (also for failed runs)."""
        instance, self._instance = self._instance, None
        art = self.artifacts_dir(run_id)
        if instance is not None:
            with contextlib.suppress(PgfsbenchError):
                instance.stop(self.runner)
            if instance.log_path.exists():
                dest = art / "postgresql.log"
                shutil.copyfile(instance.log_path, dest)
                self.store.put_artifact(run_id, "server_log", dest)
        transcript = art / "commands.sh"
        transcript.write_text("# commands pgfsbench ran for this run, in order\n"
                              + "\n".join(self.runner.transcript) + "\n")
        self.store.put_artifact(run_id, "commands", transcript)
        self.runner.transcript.clear()


def socket_dir(journal: Journal, celldir: Path, owner: str | None) -> Path:
    """A private (0700) directory for the server's unix socket; short enough for sun_path."""
    candidate = celldir / "sock"
    if len(str(candidate / ".s.PGSQL.5432.lock")) > 100:
        candidate = Path("/tmp") / f"pgfsb-{secrets.token_hex(4)}"
    return make_dir(journal, candidate, owner=owner, mode=0o700)


def cell_params(cell: Cell) -> dict[str, Any]:
    return {
        "storage": cell.storage.model_dump(),
        "postgres": cell.postgres.model_dump(),
        "kernel": cell.kernel.model_dump(),
        "workload": vars(cell.workload),
    }


def storage_details(runner: Runner, storage: ProvisionedStorage) -> dict[str, Any]:
    def volume(v: Volume) -> dict[str, Any]:
        return {"fs": v.fs, "source": v.source, "devices": list(v.devices),
                "mountpoint": str(v.mountpoint), "mount_options": v.mount_options,
                "mkfs_argv": list(v.mkfs_argv), "mkfs_output": v.mkfs_output,
                "fs_info": fs_info(runner, v), **v.details}

    result: dict[str, Any] = {"data": volume(storage.data), **storage.details}
    if storage.wal is not None:
        result["wal"] = volume(storage.wal)
    return result


def host_environment(binaries: Binaries | None) -> dict[str, Any]:
    uname = os.uname()
    env: dict[str, Any] = {"kernel": uname.release, "machine": uname.machine,
                           "cpus": os.cpu_count(), "pgfsbench": __version__}
    with contextlib.suppress(OSError):
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                env["distribution"] = line.split("=", 1)[1].strip('"')
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                env["cpu_model"] = line.split(":", 1)[1].strip()
                break
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                env["memory_bytes"] = int(line.split()[1]) * 1024
    if binaries is not None:
        env["postgresql"] = binaries.version_line
        env["pg_bindir"] = str(binaries.bindir)
    return env


SERIES_UNITS = {"wal_mbps": "MB/s", "dirty_kb": "kB", "writeback_kb": "kB",
                "disk_write_mbps": "MB/s", "disk_read_mbps": "MB/s", "disk_await_ms": "ms",
                "disk_util_pct": "%", "waits": "backends", "cpu_iowait_pct": "%",
                "cpu_user_pct": "%", "cpu_system_pct": "%", "cpu_idle_pct": "%"}


def run_environment(binaries: Binaries, c: Loaded, observed: ObservationResult
                    ) -> dict[str, Any]:
    env: dict[str, Any] = {**host_environment(binaries), "vm": kernel.snapshot_vm(),
                           "initdb_output": c.initdb_output,
                           "devices": observed.metrics.get("devices", {}),
                           "mounts": {v.role: {"source": v.source, "fs": v.fs,
                                               "options": v.mount_options}
                                      for v in c.storage.volumes}}
    with contextlib.suppress(Exception):
        env["pgbench"] = subprocess.run([binaries.tool("pgbench"), "--version"],
                                        capture_output=True, text=True, timeout=30,
                                        check=False).stdout.strip()
    with contextlib.suppress(PgfsbenchError, Exception):
        env["pg_settings_changed"] = c.instance.changed_settings()
    return env


@contextlib.contextmanager
def signals_raise_interrupted() -> Iterator[None]:
    """SIGTERM (and SIGHUP) become Interrupted, so every undo runs on the way out."""
    import signal

    def handler(signum: int, frame: object) -> None:
        raise Interrupted(f"stopped by signal {signal.Signals(signum).name}; everything undone")

    old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
