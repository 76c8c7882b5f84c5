"""edi_partners: an operator's profile of each X12 trading partner

A small table of its own, read by sender; nothing else refers to it.

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-04 08:20:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "edi_partners",
        sa.Column("sender_qualifier", sa.String(8), nullable=False),
        sa.Column("sender_id", sa.String(128), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("contract_version", sa.Integer(), nullable=False),
        sa.Column("partition_key", sa.String(128), nullable=True),
        sa.Column("period", sa.String(128), nullable=True),
        sa.Column("acknowledge", sa.String(16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("sender_qualifier", "sender_id", name="pk_edi_partners"),
    )


def downgrade() -> None:
    op.drop_table("edi_partners")
