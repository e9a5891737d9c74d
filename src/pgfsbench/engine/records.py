"""Typed records of the engine: what a run stores (the run table's columns), and the
statuses a run and a campaign go through."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import StrEnum


class RunStatus(StrEnum):
    RUNNING = "running"
    OK = "ok"
    FAILED = "failed"
    ABORTED = "aborted"  # interrupted, or found dead by `pgfsbench cleanup`


class CampaignStatus(StrEnum):
    RUNNING = "running"
    DONE = "done"  # every planned run has a result (some may have failed)
    INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM: stopped, everything undone
    ABORTED = "aborted"  # the process died; `pgfsbench cleanup` undid what it left


@dataclass
class Prepared:
    """What preparing a cell established (stored before measuring)."""

    fs: str
    load_seconds: float | None
    load_phases: dict[str, float]
    space_bytes: int | None
    storage_details: dict[str, object]
    kernel_applied: list[dict[str, str]]
    implementation: str | None
    fuse: bool

    def columns(self) -> dict[str, object]:
        return dataclasses.asdict(self)


@dataclass
class RunRecord:
    """The outcome of one run, as stored. Failed runs keep what was known when they failed."""

    status: RunStatus
    error: str | None = None
    throughput: float | None = None
    throughput_unit: str | None = None
    tps: float | None = None
    warmup_tps: float | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    transactions: int | None = None
    failed_transactions: int | None = None
    initial_connection_ms: float | None = None
    latency_ms: dict[str, float] | None = None
    wal_bytes: int | None = None
    wal_fpi: int | None = None
    space_after_run_bytes: int | None = None
    space: dict[str, object] | None = None
    environment: dict[str, object] | None = None
    metrics: dict[str, object] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    artifacts_dir: str | None = None

    def columns(self) -> dict[str, object]:
        """The columns to write; unknown (None) values are left as they are."""
        out = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        out["status"] = str(self.status)
        if not self.warnings:
            out.pop("warnings", None)
        return out
