"""Measuring one run of a prepared cell: a busy-host check, the samplers, the warm-up
(run but not counted), the measured phase under a stall watchdog, then the figures.

Whatever happens, the samplers are stopped and what they saw is stored: the series of a
run that stalled are the evidence of why.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from typing import Any

from pgfsbench import kernel
from pgfsbench.collect.host import busy_warning, host_environment, sample_load
from pgfsbench.collect.observation import Observation, ObservationResult
from pgfsbench.engine.cell import CellState, Engine, sync_volumes
from pgfsbench.engine.events import Events
from pgfsbench.engine.records import RunRecord, RunStatus
from pgfsbench.plan import PlannedRun
from pgfsbench.storage import driver_for
from pgfsbench.system.errors import PgfsbenchError, Stalled, WorkloadError
from pgfsbench.workloads.base import Measurement, Progress

SERIES_UNITS = {"wal_mbps": "MB/s", "dirty_kb": "kB", "writeback_kb": "kB",
                "disk_write_mbps": "MB/s", "disk_read_mbps": "MB/s", "disk_await_ms": "ms",
                "disk_util_pct": "%", "waits": "backends", "cpu_iowait_pct": "%",
                "cpu_user_pct": "%", "cpu_system_pct": "%", "cpu_idle_pct": "%",
                "tps": "tps", "latency_avg_ms": "ms", "latency_stddev_ms": "ms",
                "lag_ms": "ms", "failed": "tx"}


class Watchdog:
    """Says a run is stalled when it completed nothing for ``timeout`` seconds."""

    def __init__(self, timeout: float):
        self.timeout = timeout
        self.last = time.monotonic()

    def progress(self, throughput: float) -> None:
        if throughput > 0:
            self.last = time.monotonic()

    def check(self) -> str | None:
        if self.timeout > 0 and time.monotonic() - self.last > self.timeout:
            return f"no transaction completed for {self.timeout:g} s"
        return None


def measure_run(eng: Engine, planned: PlannedRun, run_id: int, st: CellState,
                events: Events) -> RunRecord:
    assert st.instance is not None and st.storage is not None
    cell = planned.cell
    w = cell.workload
    d = eng.loaded.spec.defaults
    art = eng.artifacts_dir(run_id)
    eng.store.update_run(run_id, **st.prepared().columns())
    warnings: list[str] = []
    load = sample_load(1.0)
    busy = busy_warning(load, d.busy_cpu_pct, d.busy_steal_pct)
    if busy:
        warnings.append(busy)
        events.warning(f"{cell.id} #{planned.repetition}: {busy}")
    ctx = st.context(eng, art)
    observation = Observation(st.instance.conninfo(d.database), eng.binaries.major,
                              st.storage.block_devices, st.instance.log_path,
                              enabled=d.samplers, wait_hz=d.wait_event_hz)
    observation.start()
    warm: Measurement | None = None
    m: Measurement | None = None
    observed: ObservationResult | None = None
    try:
        if w.warmup_s > 0:
            eng.phase(f"warm-up {w.warmup_s:g} s")
            dog = Watchdog(d.stall_timeout)
            warm = st.workload.run(ctx, cell, w.warmup_s, measured=False,
                                   on_progress=lambda p: dog.progress(p.throughput),
                                   stalled=dog.check)
            if warm.stalled:
                raise Stalled(f"during the warm-up: {warm.stalled}")
        eng.phase(f"measuring {w.duration_s:g} s")
        observation.mark_measured_start()
        dog = Watchdog(d.stall_timeout)

        def live(p: Progress) -> None:
            dog.progress(p.throughput)
            events.live(p.t, p.throughput, "tps")

        m = st.workload.run(ctx, cell, w.duration_s, measured=True, on_progress=live,
                            stalled=dog.check)
    finally:
        observed = observation.finish()
        # what the samplers saw is kept even when the run failed: it is the evidence
        with contextlib.suppress(Exception):
            store_observation(eng, run_id, observed, m, w.warmup_s, w.duration_s)
    record = RunRecord(
        status=RunStatus.OK, throughput=m.throughput, throughput_unit=m.unit,
        tps=m.throughput if m.unit == "tps" else None,
        warmup_tps=warm.throughput if warm else None, latency_avg_ms=m.latency_avg_ms,
        latency_stddev_ms=m.latency_stddev_ms, transactions=m.transactions,
        failed_transactions=m.failed_transactions, initial_connection_ms=m.initial_connection_ms,
        latency_ms=m.latency.percentiles_ms if m.latency else None,
        wal_bytes=observed.wal_bytes, wal_fpi=observed.wal_fpi, warnings=warnings,
        artifacts_dir=str(art),
        metrics={**observed.metrics, "wal_records": observed.wal_records,
                 "host_load": load.as_dict(),
                 "latency_log": m.latency.as_dict() if m.latency else None,
                 "tool": {"name": st.workload.tool, **m.extra},
                 "ceiling": {k: v for k, v in (st.ceiling or {}).items()
                             if not k.endswith("_raw")} or None})
    if not m.ok:
        # keep what the tool measured, then fail with the cause (the engine names the root)
        record.status = RunStatus.FAILED
        eng.store.update_run(run_id, **{k: v for k, v in record.columns().items()
                                        if k not in ("status",)})
        if m.stalled:
            raise Stalled(m.stalled)
        raise WorkloadError(m.errors[-1] if m.errors else
                            f"{st.workload.tool} exited {m.returncode}")
    st.instance.checkpoint()
    sync_volumes(eng.runner, st.storage)
    space_after = driver_for(cell.fs).space(st.storage, eng.runner)
    record.space_after_run_bytes = space_after.get("space_bytes")
    record.space = {"after_load": st.space_after_load, "after_run": space_after}
    record.environment = run_environment(eng, st, observed)
    return record


def store_observation(eng: Engine, run_id: int, observed: ObservationResult,
                      m: Measurement | None, warmup_s: float, duration_s: float) -> None:
    store = eng.store
    if m is not None:
        for name, (t0, values) in m.series.items():
            store.put_series(run_id, name, values, unit=SERIES_UNITS.get(name, ""), t0=t0)
    for name, (t0, values) in observed.series.items():
        store.put_series(run_id, name, values, unit=SERIES_UNITS.get(name, ""), t0=t0)
    latency = m.latency if m is not None else None
    if latency is not None:
        offset = round(latency.start_epoch - (observed.measured_start or latency.start_epoch))
        for name, values in latency.series.items():
            store.put_series(run_id, name, values,
                             unit="ms" if name.endswith("_ms") else "tps", t0=1.0 + offset)
        store.put_series(run_id, "latency_histogram",
                         [[b, n] for b, n in sorted(latency.histogram.items())],
                         unit="[bucket = ln(latency us) * 100, count]", step=0.0)
    window = [c for c in observed.checkpoints
              if c["ended_s"] >= -warmup_s - 1
              and (c["started_s"] if c["started_s"] is not None else c["ended_s"])
              < duration_s + 0.5]
    store.put_checkpoints(run_id, window)


def run_environment(eng: Engine, st: CellState,
                    observed: ObservationResult | None) -> dict[str, Any]:
    """The host, the kernel settings in effect now (read before anything is undone), the
    devices, mounts and PostgreSQL's changed settings."""
    env: dict[str, Any] = {**host_environment(), "vm": kernel.snapshot_vm(),
                           "postgresql": eng.binaries.version_line,
                           "pg_bindir": str(eng.binaries.bindir),
                           "initdb_output": st.initdb_output}
    if observed is not None:
        env["devices"] = observed.metrics.get("devices", {})
    if st.storage is not None:
        env["mounts"] = {v.role: {"source": v.source, "fs": v.fs, "options": v.mount_options}
                         for v in st.storage.volumes}
    with contextlib.suppress(Exception):
        env[st.workload.tool] = subprocess.run(
            [eng.binaries.tool("pgbench") if st.workload.tool == "pgbench" else st.workload.tool,
             "--version"], capture_output=True, text=True, timeout=30,
            check=False).stdout.strip()
    if st.instance is not None:
        with contextlib.suppress(PgfsbenchError, Exception):
            env["pg_settings_changed"] = st.instance.changed_settings()
    return env
