"""The results schema (the head revision). One run = one cell x one repetition;
everything else hangs off it.

Changes go through alembic migrations (results/migrations/versions): a newer pgfsbench
adds columns and tables, it never reinterprets old ones, and a results file from any
earlier version opens and is upgraded in place.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

SCHEMA_VERSION = 3  # the alembic head's number, also kept in meta for older readers

metadata = MetaData()

meta = Table(
    "meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

campaign = Table(
    "campaign",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("name", String(200), nullable=False),
    Column("spec_path", Text),
    Column("spec_text", Text),
    Column("overrides", JSON),
    Column("host", String(200)),
    Column("pgfsbench_version", String(40)),
    Column("workdir", Text),
    Column("started_at", DateTime(timezone=True)),
    Column("ended_at", DateTime(timezone=True)),
    Column("status", String(20)),  # running, done, interrupted, aborted
    Column("environment", JSON),  # the host: kernel, CPU, memory, tool versions
    Column("uuid", String(36), index=True),  # stable across result files (imports)
    Column("notes", JSON),  # the engine's decisions (adaptive repetitions per cell)
)

run = Table(
    "run",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("campaign_id", Integer, ForeignKey("campaign.id"), index=True),
    Column("cell", String(400), nullable=False, index=True),
    Column("storage", String(100), nullable=False),
    Column("fs", String(40), nullable=False),
    Column("postgres", String(100), nullable=False),
    Column("kernel", String(100), nullable=False),
    Column("workload", String(100), nullable=False),
    Column("repetition", Integer, nullable=False),
    Column("status", String(20), nullable=False),  # running, ok, failed, aborted
    Column("error", Text),  # one line: the root cause of a failure
    Column("host", String(200), index=True),  # where it ran (inventory name in a fleet)
    Column("uuid", String(36), index=True),  # stable across result files (imports)
    Column("superseded_by", Integer),  # a later run of the same cell x repetition (resume)
    Column("throughput", Float),  # in throughput_unit (tps for OLTP workloads)
    Column("throughput_unit", String(20)),
    Column("warnings", JSON),  # what changes the reading of this run (busy host...)
    Column("started_at", DateTime(timezone=True)),
    Column("ended_at", DateTime(timezone=True)),
    Column("scale", Integer),
    Column("clients", Integer),
    Column("threads", Integer),
    Column("duration_s", Float),
    Column("warmup_s", Float),
    Column("tps", Float),  # excluding connection time, measured phase only
    Column("warmup_tps", Float),
    Column("latency_avg_ms", Float),
    Column("latency_stddev_ms", Float),
    Column("transactions", BigInteger),
    Column("failed_transactions", BigInteger),
    Column("initial_connection_ms", Float),
    Column("load_seconds", Float),
    Column("load_phases", JSON),
    Column("space_bytes", BigInteger),  # data directory incl. WAL, after load
    Column("space_after_run_bytes", BigInteger),
    Column("space", JSON),  # every space figure after load and after the run
    Column("pg_version", String(100)),
    Column("implementation", String(200)),  # e.g. "zfs-fuse (pool version 23)"
    Column("fuse", Boolean, default=False),
    Column("params", JSON),  # the cell's full configuration
    Column("storage_details", JSON),  # devices, mkfs, mount options, dataset properties
    Column("kernel_applied", JSON),
    Column("environment", JSON),
    Column("latency_ms", JSON),  # percentiles from the transaction log
    Column("wal_bytes", BigInteger),
    Column("wal_fpi", BigInteger),
    Column("metrics", JSON),  # further per-run figures from samplers
    Column("artifacts_dir", Text),
)

series = Table(
    "series",
    metadata,
    Column("run_id", Integer, ForeignKey("run.id"), primary_key=True),
    Column("name", String(100), primary_key=True),
    Column("unit", String(40)),
    Column("t0", Float, default=0.0),  # offset of the first value from the measured start, s
    Column("step", Float, default=1.0),
    Column("data", JSON, nullable=False),  # list of numbers (or objects, for wait events)
)

checkpoint = Table(
    "checkpoint",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", Integer, ForeignKey("run.id"), index=True),
    Column("started_s", Float),  # seconds since the measured start (negative: warm-up)
    Column("ended_s", Float),
    Column("reason", String(200)),
    Column("buffers", Integer),
    Column("write_s", Float),
    Column("sync_s", Float),
    Column("total_s", Float),
    Column("wal_added", Integer),
    Column("wal_removed", Integer),
    Column("wal_recycled", Integer),
    Column("distance_kb", Integer),
)

ceiling = Table(
    "ceiling",
    metadata,
    Column("identity", String(64), primary_key=True),  # configuration + host + kernel
    Column("storage", String(100)),
    Column("measured_at", DateTime(timezone=True)),
    Column("figures", JSON),  # pg_test_fsync ops/s by method, fio 8 KiB random r/w
)

artifact = Table(
    "artifact",
    metadata,
    Column("run_id", Integer, ForeignKey("run.id"), primary_key=True),
    Column("kind", String(60), primary_key=True),
    Column("path", Text, nullable=False),
    Column("bytes", BigInteger),
)
