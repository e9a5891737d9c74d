"""Measuring one run of a prepared cell: a busy-host check, the samplers, the warm-up
(run but not counted), the measured phase under a stall watchdog, then the figures.

Whatever happens, the samplers are stopped and what they saw is stored: the series of a
run that stalled are the evidence of why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import resource
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgfsbench import kernel
from pgfsbench.collect.container import cgroup_files
from pgfsbench.collect.cpu_use import cpu_use, read_cpu
from pgfsbench.collect.environment import read_environment
from pgfsbench.collect.host import (
    HostLoad,
    busy_warning,
    meminfo,
    sample_load,
)
from pgfsbench.collect.idle import IdleWait, wait_idle
from pgfsbench.engine.cell import CellState, Engine
from pgfsbench.engine.events import Events
from pgfsbench.plan import PlannedRun
from pgfsbench.postgres import pgbouncer
from pgfsbench.postgres.instance import SUPERUSER, children_of
from pgfsbench.results.metrics import checked_metrics
from pgfsbench.results.records import RunOutcome, RunStatus
from pgfsbench.results.store import SeriesRow, Store
from pgfsbench.spec import WORKLOAD_TOOLS, Cell
from pgfsbench.spec.matrix import workload_config
from pgfsbench.spec.models import WorkloadBase
from pgfsbench.storage import driver_for, sync_volumes
from pgfsbench.storage.devices import disk_counters, disk_delta
from pgfsbench.storage.pvc import in_pod
from pgfsbench.storage.snapshots import Snapshotter
from pgfsbench.system.cpus import cpu_record
from pgfsbench.system.errors import PgfsbenchError, Stalled, WorkloadError
from pgfsbench.units import human_bytes
from pgfsbench.workloads import unobserved
from pgfsbench.workloads.base import Measurement, Phase, Progress, Workload, WorkloadContext

if TYPE_CHECKING:  # imported where used: the samplers (and psycopg) load while storage is made
    from pgfsbench.collect.observation import Observation, ObservationResult

# the samplers' series, and each tool's own (spec/kinds.py)
SERIES_UNITS = {
    "wal_mbps": "MB/s",
    "dirty_kb": "kB",
    "writeback_kb": "kB",
    "disk_write_mbps": "MB/s",
    "disk_read_mbps": "MB/s",
    "disk_await_ms": "ms",
    "disk_util_pct": "%",
    "waits": "backends",
    "cpu_iowait_pct": "%",
    "cpu_user_pct": "%",
    "cpu_system_pct": "%",
    "cpu_idle_pct": "%",
    **{name: unit for tool in WORKLOAD_TOOLS for name, unit in tool.series_units.items()},
}


class Watchdog:
    """Says a run is stalled when it completed nothing for ``timeout`` seconds."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.last = time.monotonic()

    def progress(self, throughput: float) -> None:
        if throughput > 0:
            self.last = time.monotonic()

    def unmeasured(self, seconds: float) -> Phase:
        """A phase that is not counted (a warm-up, finding the maximum), watched by this dog."""
        return Phase(seconds, False, lambda p: self.progress(p.throughput), self.check)

    def check(self) -> str | None:
        if self.timeout > 0 and time.monotonic() - self.last > self.timeout:
            return f"no transaction completed for {self.timeout:g} s"
        return None


def reference_max(eng: Engine, cell: Cell) -> tuple[float, str] | None:
    """The same cell's unthrottled throughput in this campaign (median of its ok runs), or
    the one the plan brought (a cluster's controller knows its campaign's runs, a pod's
    store only its own)."""
    return eng.plan.rate_max.get(cell.id) or campaign_max(eng.store, eng.campaign_id, cell)


def campaign_max(store: Store, campaign_id: int, cell: Cell) -> tuple[float, str] | None:
    """The same cell's unthrottled throughput in a campaign (median of its ok runs)."""
    base = cell.coordinates()
    found = []
    for r in store.list_runs(campaign_id, status="ok"):
        w = r.param("workload")
        if (
            w.get("rate") is None
            and w.get("rate_fraction") is None
            and r.storage == base["storage"]
            and r.postgres == base["postgres"]
            and r.kernel == base["kernel"]
            and r.workload == base["workload"]
            # the resolved figures: a scale given relative to memory ("fits_ram") is a
            # number once the plan resolved it, as the stored run's is
            and r.scale == cell.scale
            and r.clients == cell.workload.clients
            and r.throughput
        ):
            found.append((r.throughput, r.run_id))
    if not found:
        return None
    values = sorted(v for v, _ in found)
    return values[len(values) // 2], "the same cell unthrottled: run(s) " + ", ".join(
        str(i) for _, i in found
    )


def paced(
    eng: Engine, cell: Cell, st: CellState, ctx: WorkloadContext, dog: Watchdog
) -> tuple[Cell, dict[str, object] | None]:
    """A rate given as a share of the cell's maximum, made absolute: the maximum is the same
    cell's unthrottled result in this campaign, else measured now (not counted)."""
    w = cell.workload
    if not w.rate_fraction:
        return cell, None
    ref = reference_max(eng, cell)
    if ref is None:
        seconds = min(w.duration_s, 30.0)
        eng.phase(f"finding the maximum ({seconds:g} s unthrottled)")
        free = dataclasses.replace(
            cell, workload=dataclasses.replace(w, rate=None, rate_fraction=None)
        )
        m = st.workload.run(ctx, free, dog.unmeasured(seconds))
        if not m.ok or not m.throughput:
            raise WorkloadError(
                "could not measure the maximum throughput for rate = "
                f"{w.rate_fraction * 100:g}%: " + (m.errors[-1] if m.errors else "no throughput")
            )
        ref = (m.throughput, f"measured now: {seconds:g} s unthrottled")
    target = ref[0] * w.rate_fraction
    return (
        dataclasses.replace(cell, workload=dataclasses.replace(w, rate=target)),
        {
            "share": w.rate_fraction,
            "max_tps": ref[0],
            "target_tps": round(target, 2),
            "max_from": ref[1],
        },
    )


def capped_log(cell: Cell, expected_tps: float | None, most: int) -> Cell:
    """Sample the transaction log when the rate would write more than ``most`` lines a
    second (pgbench --sampling-rate: the rate used is kept with the percentiles)."""
    w = cell.workload
    if not most or not expected_tps or expected_tps * w.sampling_rate <= most:
        return cell
    rate = max(0.0001, round(most / expected_tps, 4))
    return dataclasses.replace(cell, workload=dataclasses.replace(w, sampling_rate=rate))


def log_left_out(expected_tps: float | None, cpus: int, most_per_cpu: int) -> str | None:
    """Why pgbench's transaction log is left out of a run under txlog = "auto", or None to
    keep it. -l costs pgbench CPU on every transaction whatever it writes, so a run
    expected above ``most_per_cpu`` transactions a second per CPU goes without it."""
    if not expected_tps or cpus < 1 or expected_tps / cpus <= most_per_cpu:
        return None
    return (
        f'txlog = "auto": {expected_tps:,.0f} TPS expected on {cpus} CPU(s), '
        f"{expected_tps / cpus:,.0f} a CPU, above txlog_max_tps_per_cpu = "
        f"{most_per_cpu:,}: pgbench's -l would cost every transaction CPU "
        "(txlog = true keeps it)"
    )


def auto_txlog(
    workload: Workload, expected_tps: float | None, cpus: int, most_per_cpu: int
) -> tuple[Workload, str | None]:
    """txlog = "auto": the workload without its transaction log and why, when it has one
    (pgbench's -l; sysbench's own percentiles cost nothing extra) and the run is expected
    above ``most_per_cpu``; else the workload as it is and None."""
    without = unobserved(workload)
    if without is workload:
        return workload, None
    why = log_left_out(expected_tps, cpus, most_per_cpu)
    return (without, why) if why else (workload, None)


@dataclasses.dataclass
class _Phases:
    """What the warm-up and the measured phase of one run produced, as they went."""

    cell: Cell
    workload: Workload
    observed_run: bool
    warmup_s: float
    warnings: list[str] = dataclasses.field(default_factory=list)
    load: HostLoad | None = None
    warm: Measurement | None = None
    m: Measurement | None = None
    snapper: Snapshotter | None = None
    timeline: list[dict[str, object]] = dataclasses.field(default_factory=list)
    pacing: dict[str, object] | None = None
    left_out: str | None = None  # why pgbench's log is not in this run (txlog = auto)
    children_cpu: float = 0.0
    cache: dict[str, object] | None = None
    # the emulated disks' counters when the measured phase began, by loop device
    disks_before: dict[str, dict[str, float]] = dataclasses.field(default_factory=dict)
    disks: dict[str, dict[str, object]] = dataclasses.field(default_factory=dict)
    # the host's CPU and the storage's daemons' during the measured phase (collect/cpu_use)
    cpu: dict[str, object] = dataclasses.field(default_factory=dict)
    idle: IdleWait | None = None  # the devices under test before the warm-up
    # the filesystem's own waits before it (btrfs subvolume sync, zpool wait)
    settled: dict[str, object] = dataclasses.field(default_factory=dict)
    # whole cycles: when the CHECKPOINT that starts them started (epoch seconds)
    cycle_start: float | None = None


def devices_under_test(st: CellState) -> list[str]:
    """The block devices a run's storage sits on: the ones pgfsbench made or was given,
    else the device a mounted filesystem it did not make is on (existing, a pod's claim)."""
    assert st.storage is not None
    found = list(st.storage.block_devices)
    if not found:
        found = [v.source for v in st.storage.volumes if v.source.startswith("/dev/")]
    return found


def measure_run(
    eng: Engine, planned: PlannedRun, run_id: int, st: CellState, events: Events
) -> RunOutcome:
    assert st.instance is not None and st.storage is not None
    d = eng.loaded.spec.defaults
    art = eng.artifacts_dir(run_id)
    eng.store.prepare_run(run_id, st.prepared())
    ctx = st.context(eng, art)
    cold = workload_config(planned.cell.workload, WorkloadBase).cache == "cold"
    cache = cold_cache(eng, st) if cold else None
    observed_run = d.observed(planned.repetition)
    ph = _Phases(
        planned.cell,
        st.workload if observed_run else unobserved(st.workload),
        observed_run,
        0.0 if cold else planned.cell.workload.warmup_s,
        cache=cache,
    )
    devices = devices_under_test(st)
    if st.storage is not None:
        # the filesystem's own background work its tools can wait for (btrfs subvolume
        # sync, zpool wait), bounded
        ph.settled = driver_for(ph.cell.fs).settle(st.storage, eng.runner)
    if devices:
        # a fresh filesystem's own work (lazy initialisation, discards, the load's last
        # write-out) is not the storage's speed: wait, bounded, until the devices are idle
        eng.phase("waiting for the devices under test to go idle")
        ph.idle = wait_idle(devices)
        if not ph.idle.idle:
            ph.warnings.append(
                f"the devices under test still wrote {ph.idle.write_mbps:.1f} MB/s on their "
                f"own ({ph.idle.busiest}) after {ph.idle.waited_s:.0f} s: the run may "
                "measure the filesystem's housekeeping too"
            )
    observation = _observation(eng, st, observed_run)
    observation.start()
    events.observing(observation)
    # is the host busy? A watched run learns it from its samplers (the CPU of the processes
    # outside the benchmark): over the warm-up when it has one, else over the measured
    # phase itself; a run without samplers from a second's sample of the host, now
    if not observed_run:
        ph.load = sample_load(1.0)
        _busy(ph.load, "before the run", d, ph.warnings, events, ph.cell.id, planned.repetition)
    observed: ObservationResult | None = None
    try:
        watch = _Watch(ctx, observation, events, planned.repetition)
        _warm_up(eng, st, ph, watch)
        _measured(eng, st, ph, watch)
    finally:
        events.observing(None)
        if ph.snapper is not None:
            ph.timeline = ph.snapper.stop()
        observed = observation.finish()
        # what the samplers saw is kept even when the run failed: it is the evidence; a
        # failure to keep it is said with the run, never hidden
        try:
            store_observation(
                eng, run_id, observed, ph.m, ph.warmup_s, planned.cell.workload.duration_s
            )
        except Exception as exc:
            ph.warnings.append(
                f"the samplers' evidence could not be stored: {type(exc).__name__}: {exc}"[:500]
            )
    assert ph.m is not None
    record = _record(ph, ph.m, observed, _metrics(eng, st, ph, ph.m, observed, art), art)
    if not ph.m.ok:
        # keep what the tool measured, then fail with the cause (the engine names the root)
        record.status = RunStatus.FAILED
        eng.store.keep_outcome(run_id, record)
        if ph.m.stalled:
            raise Stalled(ph.m.stalled)
        raise WorkloadError(ph.m.failure(st.workload.tool))
    st.instance.checkpoint()
    sync_volumes(eng.runner, st.storage)
    space_after = driver_for(ph.cell.fs).space(st.storage, eng.runner)
    used = space_after.get("space_bytes")
    record.space_after_run_bytes = used if isinstance(used, int) else None
    record.space = {"after_load": st.space_after_load, "after_run": space_after}
    record.environment = run_environment(eng, st, observed)
    return record


def _observation(eng: Engine, st: CellState, observed_run: bool) -> Observation:
    """The samplers of a run (off when the run is not watched: samplers = alternate)."""
    from pgfsbench.collect.observation import Observation
    from pgfsbench.collect.pooler import PoolerSampler

    assert st.instance is not None and st.storage is not None
    d = eng.loaded.spec.defaults
    pooler = None
    if st.bouncer is not None:
        bouncer = st.bouncer
        pooler = PoolerSampler(
            lambda command: pgbouncer.console(bouncer, SUPERUSER, command),
            d.database,
            batch=d.observer_sched == "batch",
        )
    return Observation(
        st.instance.conninfo(d.database),
        st.instance.binaries.major,
        st.storage.block_devices,
        st.instance.log_path,
        enabled=observed_run,
        wait_hz=d.wait_event_hz,
        pooler=pooler,
        batch=d.observer_sched == "batch",
        own=(st.instance.pid,) if st.instance.pid else (),
        own_comms=tuple(st.storage.details.get("service_processes") or ()),
        mounts={str(v.mountpoint): v.role for v in st.storage.volumes},
        memory_cgroup=Path(st.memory_limit["cgroup"]) if st.memory_limit else None,
        own_cgroup=cgroup_files() if in_pod() else None,
        own_group=eng.cpu_group.cpu_seconds if eng.cpu_group else None,
    )


@dataclasses.dataclass(frozen=True)
class _Watch:
    """What a run's phases report to: the workload's context, the samplers, the events."""

    ctx: WorkloadContext
    observation: Observation
    events: Events
    repetition: int


def _warm_up(eng: Engine, st: CellState, ph: _Phases, watch: _Watch) -> None:
    """Run the workload for the warm-up (not counted); judge the host's load from it. With
    whole cycles, its last cycle starts with a CHECKPOINT: the timed checkpoint that
    follows, one checkpoint_timeout after that one's start, starts the measured window."""
    d = eng.loaded.spec.defaults
    warm_from = time.time()
    w = ph.cell.workload
    if w.cycles and w.cycle_s and ph.warmup_s > 0:
        assert st.instance is not None
        dog = Watchdog(d.stall_timeout)
        before = ph.warmup_s - w.cycle_s
        if before >= 1:
            eng.phase(f"warm-up {before:g} s")
            ph.warm = st.workload.run(watch.ctx, ph.cell, dog.unmeasured(before))
            if ph.warm.stalled:
                raise Stalled(f"during the warm-up: {ph.warm.stalled}")
        eng.phase("a CHECKPOINT to start the checkpoint cycles")
        started = time.time()
        st.instance.checkpoint()
        ph.cycle_start = started
        left = started + w.cycle_s - time.time()
        if left >= 1:
            eng.phase(f"warm-up: the rest of the first cycle, {left:.0f} s")
            ph.warm = st.workload.run(watch.ctx, ph.cell, dog.unmeasured(left))
            if ph.warm.stalled:
                raise Stalled(f"during the warm-up: {ph.warm.stalled}")
        else:
            ph.warnings.append(
                f"the CHECKPOINT that starts the cycles took {time.time() - started:.0f} s, "
                f"more than a cycle ({w.cycle_s:g} s): the window is not phase-locked"
            )
    elif ph.warmup_s > 0:
        eng.phase(f"warm-up {ph.warmup_s:g} s")
        dog = Watchdog(d.stall_timeout)
        ph.warm = st.workload.run(watch.ctx, ph.cell, dog.unmeasured(ph.warmup_s))
        if ph.warm.stalled:
            raise Stalled(f"during the warm-up: {ph.warm.stalled}")
    if ph.load is None and ph.warmup_s >= 2:
        ph.load = watch.observation.outside_load(warm_from) or sample_load(1.0)
        _busy(
            ph.load,
            "during the warm-up",
            d,
            ph.warnings,
            watch.events,
            ph.cell.id,
            watch.repetition,
        )


def _measured(eng: Engine, st: CellState, ph: _Phases, watch: _Watch) -> None:
    """The measured phase: paced if asked, pgbench's log kept or left out by its expected
    rate, snapshots taken if asked, under the stall watchdog."""
    d = eng.loaded.spec.defaults
    ctx, observation, events = watch.ctx, watch.observation, watch.events
    w = ph.cell.workload
    ph.cell, ph.pacing = paced(eng, ph.cell, st, ctx, Watchdog(d.stall_timeout))
    # the rate the log will see: the pacing, else the warm-up's, else (no warm-up) the
    # same cell's earlier runs in this campaign; the first run of a cell without a
    # warm-up logs every transaction
    expected = ph.cell.workload.rate or (ph.warm.throughput if ph.warm else None)
    if expected is None and ph.observed_run:
        earlier = reference_max(eng, ph.cell)
        expected = earlier[0] if earlier else None
    if ph.observed_run and d.txlog == "auto" and not ph.cell.workload.rate:
        ph.workload, ph.left_out = auto_txlog(
            ph.workload, expected, len(os.sched_getaffinity(0)), d.txlog_max_tps_per_cpu
        )
    ph.cell = capped_log(ph.cell, expected, d.txlog_max_lines_per_s)
    eng.phase(
        f"measuring {w.duration_s:g} s ({w.estimand()})"
        + (" without pgbench's transaction log (txlog = auto)" if ph.left_out else "")
    )
    measured_from = observation.mark_measured_start()
    ph.snapper = snapshotter_for(eng, st)
    if ph.snapper is not None:
        ph.snapper.start()
    dog = Watchdog(d.stall_timeout)

    def live(p: Progress) -> None:
        dog.progress(p.throughput)
        events.live(p.t, p.throughput, "tps", p.latency_ms)

    emulated = st.storage.details.get("emulated_devices", {}) if st.storage else {}
    ph.disks_before = {dev: disk_counters(d["device_model_stats"]) for dev, d in emulated.items()}
    daemons = tuple(st.storage.details.get("service_processes") or ()) if st.storage else ()
    group = eng.cpu_group.cpu_seconds if eng.cpu_group else None
    cpu_before = read_cpu(daemons, group=group)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    ph.m = ph.workload.run(ctx, ph.cell, Phase(w.duration_s, True, live, dog.check))
    # the benchmark's own: pgfsbench and what it started, the postmaster and its children
    postmaster = st.instance.pid if st.instance is not None else None
    roots = (os.getpid(), *((postmaster,) if postmaster else ()))
    ph.cpu = cpu_use(cpu_before, read_cpu(daemons, group=group), os.cpu_count() or 1, roots)
    ph.disks = {
        dev: {
            "device_model": d["device_model"],
            "role": d["role"],
            **disk_delta(ph.disks_before[dev], disk_counters(d["device_model_stats"])),
        }
        for dev, d in emulated.items()
    }
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    ph.children_cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    if ph.load is None:  # watched, without a warm-up to judge from: the measured phase
        outside = observation.outside_load(measured_from)
        ph.load = outside or sample_load(1.0)
        _busy(
            ph.load,
            "during the run" if outside else "after the run",
            d,
            ph.warnings,
            events,
            ph.cell.id,
            watch.repetition,
        )


def _metrics(
    eng: Engine, st: CellState, ph: _Phases, m: Measurement, observed: ObservationResult, art: Path
) -> dict[str, object]:
    """A run's metrics: the samplers', the tool's, and how the run was watched."""
    d = eng.loaded.spec.defaults
    metrics: dict[str, object] = {
        **observed.metrics,
        "wal_records": observed.wal_records,
        "host_load": ph.load.as_dict() if ph.load is not None else None,
        "latency_log": m.latency.as_dict() if m.latency else None,
        "tool": {"name": st.workload.tool, **m.extra},
        "ceiling": {k: v for k, v in (st.ceiling or {}).items() if not k.endswith("_raw")} or None,
    }
    before = metrics.get("observer")
    metrics["observer"] = {
        **(before if isinstance(before, dict) else {}),
        "on": ph.observed_run,
        "alternating": d.samplers == "alternate",
        "benchmark_cpu_s": round(ph.children_cpu, 3),
        "txlog_bytes": _size(art / "txlog.gz"),
        "txlog": bool(m.artifacts.get("txlog")),
        "txlog_sampling_rate": ph.cell.workload.sampling_rate,
        "txlog_left_out": ph.left_out,
    }
    if ph.pacing:
        metrics["rate"] = ph.pacing
    if ph.disks:
        metrics["emulated_devices"] = ph.disks
    if ph.cpu:
        metrics["cpu"] = ph.cpu
    metrics["cache"] = ph.cache or {"state": "warm"}
    window = _window(ph, m, observed)
    metrics["window"] = window
    marked = window.get("marked")
    if marked:
        ph.warnings.append(f"whole cycles: {marked}")
    metrics["episodes"] = {
        "stall_fraction": d.stall_fraction,
        "slowdown_fraction": d.slowdown_fraction,
        "slowdown_min_seconds": d.slowdown_min_seconds,
    }
    if ph.snapper is not None:
        metrics["snapshots"] = {"taken": ph.snapper.taken, "errors": ph.snapper.errors}
        metrics["events"] = ph.timeline
    if st.max_connections is not None:
        metrics["settings_set_by_pgfsbench"] = [st.max_connections.as_dict()]
        ph.warnings.append(st.max_connections.text())
    if ph.idle is not None:
        metrics["idle_before_warmup"] = ph.idle.as_dict()
    if ph.settled:
        metrics["filesystem_waits"] = ph.settled
    if st.huge_pages is not None:
        metrics["huge_pages"] = {**st.huge_pages, "at_end": kernel.huge_page_facts()}
    if eng.cpu_split is not None:
        metrics["cpus"] = cpu_record(
            eng.cpu_split,
            {
                "postmaster": st.instance.pid if st.instance else None,
                **({"pooler": st.bouncer.child.pid} if st.bouncer else {}),
            },
        )
    if st.memory_limit is not None:
        metrics["memory_limit"] = {
            **st.memory_limit,
            **kernel.memory_cgroup_usage(Path(st.memory_limit["cgroup"])),
        }
        ph.warnings.append(
            f"memory limited to {human_bytes(st.memory_limit['bytes'])} "
            "(cgroup): RAM was emulated; shared_buffers is outside the limit"
        )
    return checked_metrics(metrics)


def _window(ph: _Phases, m: Measurement, observed: ObservationResult) -> dict[str, Any]:
    """What the measured window held (collect/window.py): its checkpoints, its stratum,
    its cycles' throughput; the counters' timed and requested checkpoints beside the
    log's."""
    from pgfsbench.collect.window import window_facts

    w = ph.cell.workload
    tps = m.series.get("tps")
    facts = window_facts(
        cycles=w.cycles,
        cycle_s=w.cycle_s,
        duration_s=w.duration_s,
        estimand=w.estimand(),
        checkpoints=observed.checkpoints,
        tps=list(tps[1]) if tps else [],
        read=observed.checkpoints_read,
    )
    counters = observed.metrics.get("counters")
    if isinstance(counters, dict):
        facts["counters"] = {
            k: counters.get(k) for k in ("checkpoints_timed", "checkpoints_req") if k in counters
        }
    if ph.cycle_start is not None and observed.measured_start is not None:
        facts["window_start_after_checkpoint_s"] = round(
            observed.measured_start - ph.cycle_start, 3
        )
    return facts


def _record(
    ph: _Phases, m: Measurement, observed: ObservationResult, metrics: dict[str, object], art: Path
) -> RunOutcome:
    return RunOutcome(
        status=RunStatus.OK,
        throughput=m.throughput,
        throughput_unit=m.unit,
        tps=m.throughput if m.unit == "tps" else None,
        warmup_tps=ph.warm.throughput if ph.warm else None,
        latency_avg_ms=m.latency_avg_ms,
        latency_stddev_ms=m.latency_stddev_ms,
        transactions=m.transactions,
        failed_transactions=m.failed_transactions,
        initial_connection_ms=m.initial_connection_ms,
        latency_ms=m.latency.percentiles_ms if m.latency else None,
        wal_bytes=observed.wal_bytes,
        wal_fpi=observed.wal_fpi,
        warnings=ph.warnings,
        artifacts_dir=str(art),
        metrics=metrics,
    )


def _busy(
    load: HostLoad,
    when: str,
    d: Any,
    warnings: list[str],
    events: Events,
    cell_id: str,
    repetition: int,
) -> None:
    """The busy-host warning, on the run and to the front end, when the host was busy."""
    busy = busy_warning(load, d.busy_cpu_pct, d.busy_steal_pct, when)
    if busy:
        warnings.append(busy)
        events.warning(f"{cell_id} #{repetition}: {busy}")


def snapshotter_for(eng: Engine, st: CellState) -> Snapshotter | None:
    """The storage's `snapshots`, if any: btrfs snapshots the data directory's subvolume,
    ZFS the data (and WAL) datasets."""
    if st.storage is None:
        return None
    return driver_for(st.cell.fs).snapshotter(st.cell.storage, st.storage, eng.journal, eng.runner)


def cold_cache(eng: Engine, st: CellState) -> dict[str, object]:
    """Empty every cache between the data and the workload, and say what was done:
    PostgreSQL restarted (shared_buffers emptied), the OS page cache dropped (Cached in
    /proc/meminfo before and after), and on ZFS the pool exported and imported again (the
    ARC, which the page cache does not include, evicted)."""
    assert st.instance is not None and st.storage is not None and st.celldir is not None
    driver = driver_for(st.cell.fs)
    eng.phase(
        "cold cache: restarting PostgreSQL, dropping the page cache"
        + (f", {driver.cache_eviction}" if driver.cache_eviction else "")
    )
    before = meminfo().get("Cached")
    st.instance.checkpoint()
    st.instance.stop(eng.runner)
    sync_volumes(eng.runner, st.storage)
    done: dict[str, object] = {}
    done.update(driver.evict_cache(eng.journal, eng.runner, st.storage, st.celldir))
    kernel.drop_caches()
    after = meminfo().get("Cached")
    pid = st.instance.start(eng.journal, eng.runner, eng.loaded.spec.defaults.startup_timeout)
    if st.memory_limit is not None:  # the restarted server goes back under its limit
        kernel.join_memory_cgroup(
            Path(st.memory_limit["cgroup"]), [pid] + [p for p, _ in children_of(pid)]
        )
    return {
        "state": "cold",
        "postgres_restarted": True,
        "page_cache_dropped": True,
        "cached_kb_before": before,
        "cached_kb_after": after,
        **done,
    }


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def store_observation(
    eng: Engine,
    run_id: int,
    observed: ObservationResult,
    m: Measurement | None,
    warmup_s: float,
    duration_s: float,
) -> None:
    store = eng.store
    rows: list[SeriesRow] = []
    if m is not None:
        rows += [
            SeriesRow(name, values, SERIES_UNITS.get(name, ""), t0)
            for name, (t0, values) in m.series.items()
        ]
    rows += [
        SeriesRow(name, values, SERIES_UNITS.get(name, ""), t0)
        for name, (t0, values) in observed.series.items()
    ]
    latency = m.latency if m is not None else None
    if latency is not None and latency.series:
        offset = round(latency.start_epoch - (observed.measured_start or latency.start_epoch))
        rows += [
            SeriesRow(name, values, "ms" if name.endswith("_ms") else "tps", 1.0 + offset)
            for name, values in latency.series.items()
        ]
    if latency is not None and latency.histogram:
        rows.append(
            SeriesRow(
                "latency_histogram",
                [[b, n] for b, n in sorted(latency.histogram.items())],
                "[bucket = ln(latency us) * 100, count]",
                step=0.0,
            )
        )
    store.put_many_series(run_id, rows)
    window = [
        c
        for c in observed.checkpoints
        if (c["ended_s"] is None or c["ended_s"] >= -warmup_s - 1)  # None: still running
        and (c["started_s"] if c["started_s"] is not None else c["ended_s"]) < duration_s + 0.5
    ]
    store.put_checkpoints(run_id, window)


def run_environment(
    eng: Engine, st: CellState, observed: ObservationResult | None
) -> dict[str, object]:
    """The host, the kernel settings in effect now (read before anything is undone), the
    devices, mounts and PostgreSQL's changed settings."""
    binaries = eng.binaries_for(st.cell)
    env = read_environment(
        postgresql=binaries.version_line,
        volumes=st.storage.volumes if st.storage is not None else (),
    )
    env.update({"pg_bindir": str(binaries.bindir), "initdb_output": st.initdb_output})
    if observed is not None:
        env["devices"] = observed.metrics.get("devices", {})
    argv = st.workload.version_argv(eng.binaries_for(st.cell))
    if argv:
        with contextlib.suppress(PgfsbenchError, OSError):
            lines = eng.runner.run(argv, timeout=30, check=False).stdout.strip().splitlines()
            if lines:
                env[st.workload.tool] = lines[0]
    if st.instance is not None:
        with contextlib.suppress(PgfsbenchError, Exception):
            env["pg_settings_changed"] = st.instance.changed_settings()
    return env
