"""edi_partners, edi_refusals: X12 trading partners' profiles, and the files refused

Two small tables of their own, read by sender; nothing else refers to them.

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

    op.create_table(
        "edi_refusals",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            primary_key=True,
            autoincrement=True,
        ),
        sa.Column("sender_qualifier", sa.String(8), nullable=False),
        sa.Column("sender_id", sa.String(128), nullable=False),
        sa.Column("key_id", sa.String(128), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("code", sa.String(64), nullable=False),
        sa.Column("codes", sa.Text(), nullable=False),
        sa.Column("sets", sa.Integer(), nullable=False),
        sa.Column("sets_at_fault", sa.Integer(), nullable=False),
        sa.Column("file_sha256", sa.String(64), nullable=False),
    )
    op.create_index(
        "ix_edi_refusals_sender_qualifier_sender_id_received_at",
        "edi_refusals",
        ["sender_qualifier", "sender_id", "received_at"],
    )


def downgrade() -> None:
    op.drop_table("edi_refusals")
    op.drop_table("edi_partners")
