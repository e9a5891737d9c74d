"""A run's metrics (the `run.metrics` JSON column), typed: one definition that the engine
writes through and every reader reads by attribute, never by string key.

The stored JSON keeps its shape; it carries ``format`` (METRICS_FORMAT) from this version
on, as pyperf versions its files. Files from before have no ``format`` (read as 0) and are
read the same way: every field is optional, and keys this version does not know (from a
newer pgfsbench, or kept for the record only: stat_io, counters, pooler...) are kept as
they are (``extra``) and written back untouched.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

# 1: the first versioned shape (2026-11-27)
METRICS_FORMAT = 1


class Figures(BaseModel):
    """A part of the metrics: typed where pgfsbench reads it, open to what it only keeps."""

    model_config = ConfigDict(extra="allow", frozen=True)


class ObserverFigures(Figures):
    """How the run was watched and what watching cost."""

    on: bool | None = None  # the samplers watched this run
    alternating: bool = False  # samplers = "alternate": watched and unwatched in pairs
    benchmark_cpu_s: float | None = None  # CPU of the load generator's processes
    sampler_cpu_s: float | None = None
    sampler_cpu_pct_of_a_core: float | None = None
    sampler_backend_cpu_s: float | None = None
    sampler_backend_cpu_pct_of_a_core: float | None = None
    observer_cpu_pct_of_a_core: float | None = None
    txlog: bool | None = None  # pgbench's transaction log kept
    txlog_bytes: int | None = None
    txlog_sampling_rate: float | None = None
    txlog_left_out: str | None = None  # why the log was left out (txlog = "auto")


class BlockStack(Figures):
    """The block devices under test and the disks beneath them (a loop file's disk)."""

    under_test: list[str] = []
    beneath: list[str] = []


class EpisodeThresholds(Figures):
    """The thresholds the run's episodes were found with ([defaults])."""

    stall_fraction: float | None = None
    slowdown_fraction: float | None = None
    slowdown_min_seconds: float | None = None

    def given(self) -> dict[str, float]:
        """The thresholds that were recorded, by name."""
        return {k: float(v) for k, v in self.model_dump().items() if isinstance(v, int | float)}


class TimelineEvent(Figures):
    """Something that happened during the measured phase (a snapshot taken)."""

    kind: str = ""
    start_s: float
    end_s: float | None = None
    label: str = ""


class EmulatedDeviceFigures(Figures):
    """What an emulated disk's daemon did during the run (storage/devices.py)."""

    late_s: float | None = None
    model_wait_s: float | None = None
    io_s: float | None = None
    model_s: float | None = None
    oversleep_s: float | None = None
    cpu_s: float | None = None  # the daemon's own CPU during the run
    loop_held_s: float | None = None  # the most its shared wake-ups held arrivals


class LatencyLog(Figures):
    """pgbench's transaction log, read: counts, the sampling rate, percentiles (extra)."""

    transactions: int | None = None
    failed: int | None = None
    sampling_rate: float | None = None
    schedule_lag_ms: dict[str, float] | None = None  # p50, p99, max (rate-limited runs)


class ToolFigures(Figures):
    """The load generator's own figures."""

    name: str | None = None
    prepared_statements: bool | None = None  # sysbench prepared its statements
    # why pgfsbench turned them off (a pooler that does not keep them), or None
    prepared_statements_disabled: str | None = None
    # a replay's work against its capture's (workloads/replay.fidelity); "differs" lists
    # what is beyond the stated limits
    fidelity: dict[str, Any] | None = None


class FailureEvidence(Figures):
    """What a failed run kept for its diagnosis (engine/diagnosis.py)."""

    server_log_tail: list[str] = []


class IdleFigures(Figures):
    """How long the devices under test took to go idle before the warm-up (collect/idle)."""

    waited_s: float
    idle: bool
    write_mbps: float
    busiest: str | None = None


class RunMetrics(Figures):
    """Everything a run recorded beyond its row's columns."""

    format: int = 0  # METRICS_FORMAT when written by this version; 0: before formats
    observer: ObserverFigures = ObserverFigures()
    block_stack: BlockStack = BlockStack()
    episodes: EpisodeThresholds = EpisodeThresholds()
    events: list[TimelineEvent] = []
    emulated_devices: dict[str, EmulatedDeviceFigures] = {}
    latency_log: LatencyLog | None = None
    tool: ToolFigures = ToolFigures()
    devices: dict[str, dict[str, Any]] = {}  # each block device's facts
    # read by their own parsers (analysis/disturbance.CpuFigures, Disturbance)
    cpu: dict[str, Any] | None = None
    disturbance: dict[str, Any] | None = None
    ceiling: dict[str, Any] | None = None  # the storage's measured ceiling, if asked
    idle_before_warmup: IdleFigures | None = None
    evidence: FailureEvidence | None = None  # a failed run's


def read_metrics(raw: object) -> RunMetrics:
    """The metrics of a stored run; a part that does not have the shape this version
    knows is left out (and kept in the JSON), never an error."""
    data = dict(raw) if isinstance(raw, dict) else {}
    try:
        return RunMetrics.model_validate(data)
    except ValidationError as exc:
        bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
        return RunMetrics.model_validate({k: v for k, v in data.items() if k not in bad})


def checked_metrics(metrics: dict[str, object]) -> dict[str, object]:
    """What the engine stores, stamped with the format and checked against the shape the
    readers expect. A part of another shape is a bug of the writer: it is named in
    ``format_problems`` (the tests look for it) and left out by the readers, and the run
    keeps its figures: a typing mistake never fails a measurement."""
    stamped = {**metrics, "format": METRICS_FORMAT}
    try:
        RunMetrics.model_validate(stamped)
    except ValidationError as exc:
        stamped["format_problems"] = [
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        ]
    return stamped
