"""A partition's ERP counterparty: ``partition_profiles``

An operator names the id a partition's counterparty has in the ERP the
journal is imported into (docs/api.md#a-partitions-erp-counterparty); a
partition without a row has none. Nothing existing changes.

Revision ID: 0033
Revises: 0032
Create Date: 2026-12-07 14:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0033"
down_revision = "0032"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "partition_profiles",
        sa.Column("partition_key", sa.String(128), primary_key=True),
        sa.Column("erp_counterparty", sa.String(64), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_by", sa.String(64), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("partition_profiles")
