"""outbox: one row per committed unit of work, listing its ledger rows

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-29 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("ledger_entry_ids", sa.Text(), nullable=True))
        batch.alter_column("event_id", existing_type=sa.String(64), nullable=True)
        batch.alter_column("routing_key", existing_type=sa.String(128), nullable=True)
        batch.alter_column("partition_key", existing_type=sa.String(128), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM outbox WHERE ledger_entry_ids IS NOT NULL")
    with op.batch_alter_table("outbox") as batch:
        batch.alter_column("partition_key", existing_type=sa.String(128), nullable=False)
        batch.alter_column("routing_key", existing_type=sa.String(128), nullable=False)
        batch.alter_column("event_id", existing_type=sa.String(64), nullable=False)
        batch.drop_column("ledger_entry_ids")
