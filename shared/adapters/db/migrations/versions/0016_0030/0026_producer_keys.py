"""producer_keys: producer keys managed at runtime, beside SETTLEQ_PRODUCER_KEYS

Read by every API process every second or so (whole table, small); written by
operators (docs/api.md#producer-keys). Secrets are sealed, never plain.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-05 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "producer_keys",
        sa.Column("key_id", sa.String(128), nullable=False),
        sa.Column("partitions", sa.Text(), nullable=False),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("previous_secret", sa.Text(), nullable=True),
        sa.Column("previous_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key_id", name="pk_producer_keys"),
    )


def downgrade() -> None:
    op.drop_table("producer_keys")
