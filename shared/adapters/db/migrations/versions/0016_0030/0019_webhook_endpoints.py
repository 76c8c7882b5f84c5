"""webhook_endpoints: a producer key's webhook receivers and their secrets

A table of its own, read by id or by key; no row of settlement refers to it.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-04 07:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "webhook_endpoints",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("key_id", sa.String(128), nullable=False),
        sa.Column("url", sa.Text(), nullable=False),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("disabled_reason", sa.String(64), nullable=True),
        sa.Column("secret", sa.Text(), nullable=False),
        sa.Column("previous_secret", sa.Text(), nullable=True),
        sa.Column("previous_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("failing_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_webhook_endpoints_key_id", "webhook_endpoints", ["key_id"])


def downgrade() -> None:
    op.drop_index("ix_webhook_endpoints_key_id", table_name="webhook_endpoints")
    op.drop_table("webhook_endpoints")
