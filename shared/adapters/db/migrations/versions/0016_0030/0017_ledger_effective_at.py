"""effective_at: a recipe row records when its cost applies from

A recipe request effective earlier than its (recipe, location)'s newest row
changes nothing (its lines are duplicates, ``newer_version_settled``): to
judge it, the newest row must say when it is effective from. Promo and
freight rows stand by ``contract_version`` and leave it null. A nullable
column without a default: no row is rewritten (rows are never updated: those
written before keep null, and a recipe row without one stands before every
request, as every row did).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-04 12:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column(
        "ledger_entries", sa.Column("effective_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("effective_at")
