"""outbox events reference their ledger row instead of copying it

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-29 14:50:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(
            sa.Column(
                "ledger_entry_id",
                sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
                nullable=True,
            )
        )
        batch.alter_column("body", existing_type=sa.Text(), nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.alter_column("body", existing_type=sa.Text(), nullable=False)
        batch.drop_column("ledger_entry_id")
