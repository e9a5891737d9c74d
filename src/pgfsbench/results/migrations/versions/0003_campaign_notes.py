"""Campaign notes: what the engine decided while running (adaptive repetitions: how many
runs each cell got and why it stopped).

Revision ID: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("campaign") as batch:
        batch.add_column(sa.Column("notes", sa.JSON))


def downgrade() -> None:
    with op.batch_alter_table("campaign") as batch:
        batch.drop_column("notes")
