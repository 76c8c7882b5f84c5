"""line_outcomes.ledger_claimed_amount, chunk_results.claim_differs: a resent
line whose claim changed (docs/api.md#jobs)

A duplicate whose claim differs from its ledger row's is reason
``claimed_amount_differs``, with the ledger's claim beside the resent one; each
unit counts them, as it counts its duplicates. Existing rows: null and 0.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05 17:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "line_outcomes",
        sa.Column(
            "ledger_claimed_amount",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=True,
        ),
    )
    op.add_column(
        "chunk_results",
        sa.Column("claim_differs", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    with op.batch_alter_table("chunk_results") as batch:
        batch.drop_column("claim_differs")
    with op.batch_alter_table("line_outcomes") as batch:
        batch.drop_column("ledger_claimed_amount")
