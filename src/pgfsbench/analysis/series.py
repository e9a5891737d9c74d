"""Every series of a run on one time axis (pure): second k is the interval (k-1, k] of the
measured phase, k = 1..duration. pgbench's progress, the transaction log's percentiles, the
PostgreSQL and OS samplers and the wait events are all stored that way (with their own
first second, t0), checkpoints as seconds from the measured start. One view, used by stall
detection, the report and `results show`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pgfsbench.collect.container import SERIES as CONTAINER_SERIES
from pgfsbench.results.records import StoredRun

# the per-second series the analysis reads (when the run has them)
NUMERIC = (
    "tps",
    "tps_log",
    "progress_gap",
    "lat_p50_ms",
    "lat_p99_ms",
    "lat_max_ms",
    "latency_avg_ms",
    "disk_write_mbps",
    "disk_read_mbps",
    "disk_util_pct",
    "disk_await_ms",
    "disk_write_iops",
    "disk_read_iops",
    "dirty_kb",
    "writeback_kb",
    "cpu_iowait_pct",
    "cpu_idle_pct",
    "cpu_user_pct",
    "cpu_system_pct",
    "cpu_steal_pct",
    "vm_allocstall_normal",
    "vm_allocstall_movable",
    "vm_pgscan_direct",
    "vm_pgscan_kswapd",
    "vm_pgmajfault",
    "checkpoint_buffers_per_s",
    "wal_mbps",
    "wal_fpi_per_s",
    "wal_records_per_s",
    "commits_per_s",
    "lag_avg_ms",
    "backend_buffers_per_s",
    "wal_syncs_per_s",
    "own_cpu_pct",
    "outside_cpu_pct",
    "unseen_cpu_pct",
    "outside_read_mbps",
    "outside_write_mbps",
    "psi_cpu_some_pct",
    "psi_io_some_pct",
    "psi_io_full_pct",
    "psi_memory_some_pct",
    "psi_memory_full_pct",
    "memcg_limit_hits_per_s",
    "memcg_usage_mb",
    "memcg_refaults_per_s",
    "memcg_majfaults_per_s",
    "pooler_clients_waiting",
    "pooler_wait_ms",
    "pooler_servers_active",
    "pooler_clients_active",
    "cap_write_mbps",
    "cap_write_iops",
    "cap_read_mbps",
    "cap_read_iops",
    *CONTAINER_SERIES,
)
# per device (disk.<name>.<figure>): each device under test and each disk beneath
DEVICE_FIGURES = (
    "write_mbps",
    "read_mbps",
    "write_iops",
    "read_iops",
    "await_ms",
    "util_pct",
    "in_flight",
)
# series with a value per second that is a list or a mapping (kept as they are)
STRUCTURED = ("blockers", "blocked", "outside_top", "outside_sessions", "own_top")


@dataclass(frozen=True)
class CheckpointSpan:
    started_s: float | None
    ended_s: float
    write_s: float
    sync_s: float
    reason: str
    buffers: int
    wal_added: int = 0
    running: bool = False  # still running when the run ended (ended_s is the run's end)

    @property
    def start(self) -> float:
        return (
            self.started_s
            if self.started_s is not None
            else self.ended_s - (self.write_s + self.sync_s)
        )

    @property
    def sync_start(self) -> float:
        return self.ended_s - self.sync_s


@dataclass(frozen=True)
class Event:
    """Something that happened at a moment of the run (a snapshot, for example)."""

    kind: str
    start_s: float
    end_s: float
    label: str


@dataclass(frozen=True)
class StartUp:
    """How the measured phase began: the tool opened its clients' connections (pgbench's
    "initial connection time"), then every client sent its first transaction at once."""

    clients: int
    connect_ms: float


@dataclass
class Aligned:
    """One run, second by second (index 0 is second 1)."""

    seconds: int
    values: dict[str, np.ndarray] = field(default_factory=dict)  # NaN where missing
    waits: list[dict[str, float]] = field(default_factory=list)
    checkpoints: list[CheckpointSpan] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    # emulated device caps, summed over the devices under test (write_mbps, write_iops...)
    limits: dict[str, float] = field(default_factory=dict)
    # the devices under test and the disks beneath them (a loop device's backing file)
    under_test: list[str] = field(default_factory=list)
    beneath: list[str] = field(default_factory=list)
    # per second: who blocks lock waiters, processes in uninterruptible sleep, the top
    # processes outside the benchmark (None where not sampled)
    structured: dict[str, list[Any]] = field(default_factory=dict)
    # what the run's spec said an episode is (stall_fraction, slowdown_fraction...)
    thresholds: dict[str, float] = field(default_factory=dict)
    start: StartUp | None = None  # when the tool said how long its connections took

    def has(self, name: str) -> bool:
        arr = self.values.get(name)
        return arr is not None and bool(np.isfinite(arr).any())

    def get(self, name: str) -> np.ndarray:
        return self.values.get(name, np.full(self.seconds, np.nan))

    def device(self, name: str, figure: str) -> np.ndarray:
        """One device's figure per second (disk.<name>.<figure>)."""
        return self.get(f"disk.{name}.{figure}")

    def sampled(self, name: str) -> bool:
        """Whether a structured series (blockers, blocked...) was recorded at all."""
        return any(v is not None for v in self.structured.get(name, []))

    def throughput(self) -> np.ndarray:
        """Throughput per second: the tool's own progress, else the transaction log's. In
        the seconds the tool reported together (it was stopped or starved), the
        transaction log's count of each, where there is one."""
        if not self.has("tps"):
            return self.get("tps_log")
        tps = self.get("tps")
        gap, log = self.get("progress_gap"), self.get("tps_log")
        use = np.isfinite(gap) & (gap > 0) & np.isfinite(log)
        return np.where(use, log, tps) if use.any() else tps


def align(run: StoredRun) -> Aligned:
    """The aligned view of a stored run (as `Store.get_run` returns it)."""
    duration = float(run.duration_s or 0)
    series = run.series
    if not duration and "tps" in series:
        duration = float(len(series["tps"].values))
    n = max(0, math.floor(duration + 1e-6))
    al = Aligned(n)
    devices = [
        name
        for name in series
        if name.startswith("disk.") and name.rsplit(".", 1)[-1] in DEVICE_FIGURES
    ]
    for name in (*NUMERIC, *devices):
        s = series.get(name)
        if s is None or not s.values:
            continue
        arr = np.full(n, np.nan)
        for k in range(1, n + 1):
            v = s.at(k)
            if isinstance(v, int | float) and not isinstance(v, bool):
                arr[k - 1] = float(v)
        al.values[name] = arr
    for name in STRUCTURED:
        s = series.get(name)
        if s is not None and s.values:
            al.structured[name] = [s.at(k) for k in range(1, n + 1)]
    recorded = run.recorded
    al.under_test = list(recorded.block_stack.under_test)
    al.beneath = list(recorded.block_stack.beneath)
    al.thresholds = recorded.episodes.given()
    w = series.get("waits")
    if w is not None and w.values:
        al.waits = [dict(w.at(k) or {}) for k in range(1, n + 1)]
    al.checkpoints = [
        CheckpointSpan(
            c.started_s,
            c.ended_s,
            c.write_s or 0.0,
            c.sync_s or 0.0,
            c.reason or "",
            c.buffers or 0,
            c.wal_added or 0,
        )
        for c in run.checkpoints
        if c.ended_s is not None
    ]
    # one still running when the run ended: in its write phase as far as anyone knows
    al.checkpoints += [
        CheckpointSpan(
            c.started_s, max(duration, c.started_s), 0.0, 0.0, c.reason or "", 0, 0, True
        )
        for c in run.checkpoints
        if c.ended_s is None and c.started_s is not None and c.started_s < duration
    ]
    for entry in run.storage_details.get("device_limits") or []:
        for key, scale, name in (
            ("write_bps", 1e-6, "write_mbps"),
            ("read_bps", 1e-6, "read_mbps"),
            ("write_iops", 1.0, "write_iops"),
            ("read_iops", 1.0, "read_iops"),
        ):
            if entry.get(key):
                al.limits[name] = al.limits.get(name, 0.0) + float(entry[key]) * scale
    if run.initial_connection_ms is not None and run.clients:
        al.start = StartUp(run.clients, float(run.initial_connection_ms))
    al.events = [
        Event(e.kind, e.start_s, e.end_s if e.end_s is not None else e.start_s, e.label)
        for e in recorded.events
    ]
    return al


def median_finite(arr: np.ndarray) -> float:
    finite = arr[np.isfinite(arr)]
    return float(np.median(finite)) if finite.size else math.nan
