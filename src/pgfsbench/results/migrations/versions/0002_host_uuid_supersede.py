"""Host and UUIDs on runs and campaigns, supersession by resumed runs, the throughput in
its own unit, per-run warnings, and 64-bit byte and transaction counters.

Revision ID: 0002
"""

from __future__ import annotations

import uuid

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

WIDE = (
    ("run", "transactions"),
    ("run", "failed_transactions"),
    ("run", "space_bytes"),
    ("run", "space_after_run_bytes"),
    ("run", "wal_bytes"),
    ("run", "wal_fpi"),
    ("artifact", "bytes"),
)


def upgrade() -> None:
    with op.batch_alter_table("campaign") as batch:
        batch.add_column(sa.Column("uuid", sa.String(36)))
        batch.create_index("ix_campaign_uuid", ["uuid"])
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("host", sa.String(200)))
        batch.add_column(sa.Column("uuid", sa.String(36)))
        batch.add_column(sa.Column("superseded_by", sa.Integer))
        batch.add_column(sa.Column("throughput", sa.Float))
        batch.add_column(sa.Column("throughput_unit", sa.String(20)))
        batch.add_column(sa.Column("warnings", sa.JSON))
        batch.create_index("ix_run_host", ["host"])
        batch.create_index("ix_run_uuid", ["uuid"])
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":  # SQLite's INTEGER is 64-bit already
        for table, column in WIDE:
            op.alter_column(table, column, type_=sa.BigInteger)
    # what older runs already knew: their host (the campaign's), their throughput in tps
    bind.execute(
        sa.text(
            "UPDATE run SET host = (SELECT host FROM campaign WHERE campaign.id = run.campaign_id)"
        )
    )
    bind.execute(
        sa.text("UPDATE run SET throughput = tps, throughput_unit = 'tps' WHERE tps IS NOT NULL")
    )
    for table in ("campaign", "run"):
        ids = [row[0] for row in bind.execute(sa.text(f"SELECT id FROM {table}"))]  # noqa: S608
        for ident in ids:
            bind.execute(
                sa.text(f"UPDATE {table} SET uuid = :u WHERE id = :i"),  # noqa: S608
                {"u": str(uuid.uuid4()), "i": ident},
            )


def downgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.drop_index("ix_run_uuid")
        batch.drop_index("ix_run_host")
        for column in (
            "warnings",
            "throughput_unit",
            "throughput",
            "superseded_by",
            "uuid",
            "host",
        ):
            batch.drop_column(column)
    with op.batch_alter_table("campaign") as batch:
        batch.drop_index("ix_campaign_uuid")
        batch.drop_column("uuid")
