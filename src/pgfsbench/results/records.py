"""Typed records of the store: one frozen dataclass per row kind (a run with its series,
checkpoints and artifacts; a campaign). Analysis and reports read attributes that mypy
checks, not keys.

A run's row is defined once, by `StoredRun`. What the engine writes into it on the way
(`RunPreparation` when a cell is ready, `RunOutcome` when a run ends) are parts of that row:
each field is one of `StoredRun`'s, with the same kind of value, checked when this module
is imported (`row_part`), and the store takes them as they are (`Store.prepare_run`,
`Store.finish_run`), never as loose keywords.

The JSON columns (a run's params, storage details, environment, metrics, space) stay JSON
objects: they are the self-describing part of a result, written by many versions of
pgfsbench, and their readers treat every key as optional.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeAlias, TypeVar

from pgfsbench.jsonish import obj
from pgfsbench.results.metrics import RunMetrics, read_metrics

JsonObject: TypeAlias = dict[str, Any]
"""A JSON column as stored: keys are optional, values are JSON."""


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


# A run's latency histogram (series "latency_histogram": [bucket, count] pairs): bucket k
# holds latencies in [e^(k/100), e^((k+1)/100)) us, 1% wide, as HdrHistogram's log buckets;
# histograms of runs merge by adding counts.
BUCKETS_PER_E = 100


def bucket_value_ms(bucket: float) -> float:
    """The middle of a latency bucket, in ms."""
    return math.exp((bucket + 0.5) / BUCKETS_PER_E) / 1000.0


def iso(value: object) -> str | None:
    """A stored timestamp as ISO 8601 text, in UTC (SQLite gives naive datetimes back)."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return value.isoformat()
    return str(value)


def _opt_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def _opt_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _opt_str(value: object) -> str | None:
    return None if value is None else str(value)


@dataclass(frozen=True)
class StoredSeries:
    """One per-second (or per-interval) series of a run: value i is at t0 + i * step
    seconds from the measured start. Values are numbers, None for a second with no
    reading, or objects (wait events by name; [bucket, count] pairs of a histogram)."""

    name: str
    values: list[Any]
    unit: str = ""
    t0: float = 0.0
    step: float = 1.0

    def at(self, k: int) -> Any:
        """The value at measured second k (None outside the series)."""
        idx = round((k - self.t0) / (self.step or 1.0))
        return self.values[idx] if 0 <= idx < len(self.values) else None

    def as_dict(self) -> JsonObject:
        return {"unit": self.unit, "t0": self.t0, "step": self.step, "values": self.values}

    @classmethod
    def from_row(cls, name: str, row: Mapping[str, object]) -> StoredSeries:
        values = row.get("values", row.get("data"))
        return cls(
            name=name,
            values=list(values) if isinstance(values, list | tuple) else [],
            unit=str(row.get("unit") or ""),
            t0=float(row.get("t0") or 0.0),  # type: ignore[arg-type]
            step=float(row.get("step") or 1.0),  # type: ignore[arg-type]
        )


@dataclass(frozen=True)
class StoredCheckpoint:
    """One checkpoint seen in the server log, in seconds from the measured start."""

    ended_s: float | None = None
    started_s: float | None = None
    reason: str | None = None
    buffers: int | None = None
    write_s: float | None = None
    sync_s: float | None = None
    total_s: float | None = None
    wal_added: int | None = None
    wal_removed: int | None = None
    wal_recycled: int | None = None
    distance_kb: int | None = None

    def as_dict(self) -> JsonObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> StoredCheckpoint:
        return cls(
            ended_s=_opt_float(row.get("ended_s")),
            started_s=_opt_float(row.get("started_s")),
            reason=_opt_str(row.get("reason")),
            buffers=_opt_int(row.get("buffers")),
            write_s=_opt_float(row.get("write_s")),
            sync_s=_opt_float(row.get("sync_s")),
            total_s=_opt_float(row.get("total_s")),
            wal_added=_opt_int(row.get("wal_added")),
            wal_removed=_opt_int(row.get("wal_removed")),
            wal_recycled=_opt_int(row.get("wal_recycled")),
            distance_kb=_opt_int(row.get("distance_kb")),
        )


@dataclass(frozen=True)
class StoredArtifact:
    path: str
    bytes: int | None = None

    def as_dict(self) -> JsonObject:
        return {"path": self.path, "bytes": self.bytes}


_RUN_DETAIL = ("series", "checkpoints", "artifacts")


@dataclass(frozen=True)
class StoredRun:
    """One run (a cell x a repetition) as stored. `series`, `checkpoints` and `artifacts`
    are filled by `Store.get_run`/`full_runs`, empty from `list_runs`."""

    run_id: int = 0
    campaign_id: int | None = None
    cell: str = ""
    storage: str = ""
    fs: str = ""
    postgres: str = ""
    kernel: str = ""
    workload: str = ""
    repetition: int = 0
    status: str = "ok"
    error: str | None = None
    host: str | None = None
    uuid: str | None = None
    superseded_by: int | None = None
    throughput: float | None = None
    throughput_unit: str | None = None
    warnings: list[str] = field(default_factory=list)
    started_at: str | None = None
    ended_at: str | None = None
    scale: int | None = None
    clients: int | None = None
    threads: int | None = None
    duration_s: float | None = None
    warmup_s: float | None = None
    tps: float | None = None
    warmup_tps: float | None = None
    latency_avg_ms: float | None = None
    latency_stddev_ms: float | None = None
    transactions: int | None = None
    failed_transactions: int | None = None
    initial_connection_ms: float | None = None
    load_seconds: float | None = None
    load_phases: JsonObject = field(default_factory=dict)
    space_bytes: int | None = None
    space_after_run_bytes: int | None = None
    space: JsonObject = field(default_factory=dict)
    pg_version: str | None = None
    implementation: str | None = None
    fuse: bool = False
    params: JsonObject = field(default_factory=dict)
    storage_details: JsonObject = field(default_factory=dict)
    kernel_applied: list[JsonObject] = field(default_factory=list)
    environment: JsonObject = field(default_factory=dict)
    latency_ms: dict[str, float] = field(default_factory=dict)
    wal_bytes: int | None = None
    wal_fpi: int | None = None
    metrics: JsonObject = field(default_factory=dict)
    artifacts_dir: str | None = None
    series: dict[str, StoredSeries] = field(default_factory=dict)
    checkpoints: tuple[StoredCheckpoint, ...] = ()
    artifacts: dict[str, StoredArtifact] = field(default_factory=dict)

    @property
    def figure(self) -> float | None:
        """The run's throughput in its unit (tps for runs from before the unit existed)."""
        return self.throughput if self.throughput is not None else self.tps

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @functools.cached_property
    def recorded(self) -> RunMetrics:
        """The run's metrics, typed (results/metrics.py): read by attribute."""
        return read_metrics(self.metrics)

    def param(self, dimension: str) -> JsonObject:
        """The configuration of one dimension of the run's cell (storage, postgres,
        kernel, workload) as the spec resolved it."""
        return obj(self.params.get(dimension))

    def as_dict(self) -> JsonObject:
        """The JSON shape of `results show --json` and of exports."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["series"] = {k: s.as_dict() for k, s in self.series.items()}
        out["checkpoints"] = [c.as_dict() for c in self.checkpoints]
        out["artifacts"] = {k: a.as_dict() for k, a in self.artifacts.items()}
        return out

    def columns(self) -> JsonObject:
        """The run table's columns only (no series, checkpoints or artifacts)."""
        return {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name not in _RUN_DETAIL
        }

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> StoredRun:
        """A run from a row of the run table (`id` or `run_id`), or from the JSON shape
        of `as_dict`. An unknown key is refused: a typo must not read as a missing figure."""
        names = {f.name for f in dataclasses.fields(cls)}
        values: dict[str, Any] = {}
        for key, value in row.items():
            name = "run_id" if key == "id" else key
            if name not in names:
                raise TypeError(f"a stored run has no field {key!r}")
            values[name] = value
        for name in ("started_at", "ended_at"):
            values[name] = iso(values.get(name))
        for name in ("load_phases", "space", "params", "storage_details", "environment"):
            values[name] = obj(values.get(name))
        for name in ("metrics", "latency_ms"):
            values[name] = obj(values.get(name))
        values["warnings"] = [str(w) for w in values.get("warnings") or []]
        values["kernel_applied"] = [obj(k) for k in values.get("kernel_applied") or []]
        values["fuse"] = bool(values.get("fuse"))
        for name in ("cell", "storage", "fs", "postgres", "kernel", "workload", "status"):
            if values.get(name) is None:
                values.pop(name, None)
        series = values.pop("series", None) or {}
        values["series"] = {
            str(k): v if isinstance(v, StoredSeries) else StoredSeries.from_row(str(k), v)
            for k, v in dict(series).items()
        }
        values["checkpoints"] = tuple(
            c if isinstance(c, StoredCheckpoint) else StoredCheckpoint.from_row(c)
            for c in values.pop("checkpoints", None) or ()
        )
        artifacts = values.pop("artifacts", None) or {}
        values["artifacts"] = {
            str(k): v
            if isinstance(v, StoredArtifact)
            else StoredArtifact(str(v["path"]), _opt_int(v.get("bytes")))
            for k, v in dict(artifacts).items()
        }
        return cls(**values)


def value_kinds(hint: object) -> frozenset[object]:
    """The kinds of value a type admits, None left out and a status enum read as its
    text: `float | None` -> {float}, `dict[str, Any]` -> {dict}, `RunStatus` -> {str}."""
    args = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, types.UnionType)
        else (hint,)
    )
    kinds: set[object] = set()
    for arg in args:
        if arg is type(None):
            continue
        base = typing.get_origin(arg) or arg
        kinds.add(str if isinstance(base, type) and issubclass(base, StrEnum) else base)
    return frozenset(kinds)


_Part = TypeVar("_Part")


def row_part(cls: type[_Part]) -> type[_Part]:
    """Declares a dataclass a part of the run row: each of its fields must be a field of
    `StoredRun` holding the same kinds of value. Checked at import, so a column renamed
    or retyped in one place and not the other stops every use, not a later write."""
    row = typing.get_type_hints(StoredRun)
    for name, hint in typing.get_type_hints(cls).items():
        if name not in row or name in _RUN_DETAIL:
            raise TypeError(f"{cls.__name__}.{name} is not a column of the run row")
        if value_kinds(hint) != value_kinds(row[name]):
            raise TypeError(f"{cls.__name__}.{name} holds {hint}, the run row's column {row[name]}")
    return cls


def _written(part: object) -> JsonObject:
    """A part's columns to write: unknown (None) values are left as they are, a status
    is written as its text."""
    assert dataclasses.is_dataclass(part) and not isinstance(part, type)
    out: JsonObject = {}
    for f in dataclasses.fields(part):
        value = getattr(part, f.name)
        if value is None:
            continue
        out[f.name] = str(value) if isinstance(value, StrEnum) else value
    return out


@row_part
@dataclass
class RunPreparation:
    """What preparing a cell established, written to each of its runs before measuring."""

    fs: str | None = None
    load_seconds: float | None = None
    load_phases: JsonObject | None = None
    space_bytes: int | None = None
    storage_details: JsonObject | None = None
    kernel_applied: list[JsonObject] | None = None
    implementation: str | None = None
    fuse: bool | None = None

    def columns(self) -> JsonObject:
        return _written(self)


@row_part
@dataclass
class RunOutcome:
    """The outcome of one run, as written when it ends. A failed run keeps what was known
    when it failed; what is None is left as the row had it."""

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
    space: JsonObject | None = None
    environment: JsonObject | None = None
    metrics: JsonObject = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    artifacts_dir: str | None = None

    def columns(self) -> JsonObject:
        """The columns to write (its status included): None is left as it was, and so
        is an empty list of warnings (a run's warnings may have been written before)."""
        out = _written(self)
        if not self.warnings:
            out.pop("warnings", None)
        return out


@dataclass(frozen=True)
class StoredCampaign:
    """One campaign as stored (`spec_text` is left out of `Store.campaigns`)."""

    id: int = 0
    name: str = ""
    spec_path: str | None = None
    spec_text: str | None = None
    overrides: list[str] = field(default_factory=list)
    host: str | None = None
    pgfsbench_version: str | None = None
    workdir: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    status: str | None = None
    environment: JsonObject = field(default_factory=dict)
    uuid: str | None = None
    notes: JsonObject = field(default_factory=dict)

    def as_dict(self) -> JsonObject:
        return dataclasses.asdict(self)

    @classmethod
    def from_row(cls, row: Mapping[str, object]) -> StoredCampaign:
        overrides = row.get("overrides")
        return cls(
            id=int(row["id"]),  # type: ignore[call-overload]
            name=str(row.get("name") or ""),
            spec_path=_opt_str(row.get("spec_path")),
            spec_text=_opt_str(row.get("spec_text")),
            overrides=[str(o) for o in overrides] if isinstance(overrides, list) else [],
            host=_opt_str(row.get("host")),
            pgfsbench_version=_opt_str(row.get("pgfsbench_version")),
            workdir=_opt_str(row.get("workdir")),
            started_at=iso(row.get("started_at")),
            ended_at=iso(row.get("ended_at")),
            status=_opt_str(row.get("status")),
            environment=obj(row.get("environment")),
            uuid=_opt_str(row.get("uuid")),
            notes=obj(row.get("notes")),
        )
