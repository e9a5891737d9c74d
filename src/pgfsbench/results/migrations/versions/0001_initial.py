"""The schema of pgfsbench 0.1.0 (meta schema_version 1).

Revision ID: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    _meta_and_campaign()
    _run()
    _per_run()


def _meta_and_campaign() -> None:
    op.create_table(
        "meta",
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
    )
    op.create_table(
        "campaign",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("spec_path", sa.Text),
        sa.Column("spec_text", sa.Text),
        sa.Column("overrides", sa.JSON),
        sa.Column("host", sa.String(200)),
        sa.Column("pgfsbench_version", sa.String(40)),
        sa.Column("workdir", sa.Text),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
        sa.Column("status", sa.String(20)),
        sa.Column("environment", sa.JSON),
    )


def _run() -> None:
    op.create_table(
        "run",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("campaign_id", sa.Integer, sa.ForeignKey("campaign.id"), index=True),
        sa.Column("cell", sa.String(400), nullable=False, index=True),
        sa.Column("storage", sa.String(100), nullable=False),
        sa.Column("fs", sa.String(40), nullable=False),
        sa.Column("postgres", sa.String(100), nullable=False),
        sa.Column("kernel", sa.String(100), nullable=False),
        sa.Column("workload", sa.String(100), nullable=False),
        sa.Column("repetition", sa.Integer, nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("error", sa.Text),
        sa.Column("started_at", sa.DateTime(timezone=True)),
        sa.Column("ended_at", sa.DateTime(timezone=True)),
        sa.Column("scale", sa.Integer),
        sa.Column("clients", sa.Integer),
        sa.Column("threads", sa.Integer),
        sa.Column("duration_s", sa.Float),
        sa.Column("warmup_s", sa.Float),
        sa.Column("tps", sa.Float),
        sa.Column("warmup_tps", sa.Float),
        sa.Column("latency_avg_ms", sa.Float),
        sa.Column("latency_stddev_ms", sa.Float),
        sa.Column("transactions", sa.Integer),
        sa.Column("failed_transactions", sa.Integer),
        sa.Column("initial_connection_ms", sa.Float),
        sa.Column("load_seconds", sa.Float),
        sa.Column("load_phases", sa.JSON),
        sa.Column("space_bytes", sa.Integer),
        sa.Column("space_after_run_bytes", sa.Integer),
        sa.Column("space", sa.JSON),
        sa.Column("pg_version", sa.String(100)),
        sa.Column("implementation", sa.String(200)),
        sa.Column("fuse", sa.Boolean, default=False),
        sa.Column("params", sa.JSON),
        sa.Column("storage_details", sa.JSON),
        sa.Column("kernel_applied", sa.JSON),
        sa.Column("environment", sa.JSON),
        sa.Column("latency_ms", sa.JSON),
        sa.Column("wal_bytes", sa.Integer),
        sa.Column("wal_fpi", sa.Integer),
        sa.Column("metrics", sa.JSON),
        sa.Column("artifacts_dir", sa.Text),
    )


def _per_run() -> None:
    """What belongs to a run (series, checkpoints, artifacts) and the ceilings."""
    op.create_table(
        "series",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id"), primary_key=True),
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("unit", sa.String(40)),
        sa.Column("t0", sa.Float, default=0.0),
        sa.Column("step", sa.Float, default=1.0),
        sa.Column("data", sa.JSON, nullable=False),
    )
    op.create_table(
        "checkpoint",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id"), index=True),
        sa.Column("started_s", sa.Float),
        sa.Column("ended_s", sa.Float),
        sa.Column("reason", sa.String(200)),
        sa.Column("buffers", sa.Integer),
        sa.Column("write_s", sa.Float),
        sa.Column("sync_s", sa.Float),
        sa.Column("total_s", sa.Float),
        sa.Column("wal_added", sa.Integer),
        sa.Column("wal_removed", sa.Integer),
        sa.Column("wal_recycled", sa.Integer),
        sa.Column("distance_kb", sa.Integer),
    )
    op.create_table(
        "ceiling",
        sa.Column("identity", sa.String(64), primary_key=True),
        sa.Column("storage", sa.String(100)),
        sa.Column("measured_at", sa.DateTime(timezone=True)),
        sa.Column("figures", sa.JSON),
    )
    op.create_table(
        "artifact",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("run.id"), primary_key=True),
        sa.Column("kind", sa.String(60), primary_key=True),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("bytes", sa.Integer),
    )


def downgrade() -> None:
    for table in ("artifact", "ceiling", "checkpoint", "series", "run", "campaign", "meta"):
        op.drop_table(table)
