"""What a closed period's journal was made with, and its balances per outcome

``periods.made_with``: the entity, currency, counterparties and accounting
date a closed period's journal carries, fixed at its close so its bytes never
change (docs/operations.md#the-month-end-close); null for a period closed
before them, whose journal keeps the columns it was closed with.
``period_balances.outcomes``: a closed period's rows and sum of delta per
ledger outcome, for the outcomes booked on accounts of their own. Nothing
existing changes.

Revision ID: 0034
Revises: 0033
Create Date: 2026-12-07 15:40:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0034"
down_revision = "0033"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("periods") as batch:
        batch.add_column(sa.Column("made_with", sa.JSON(), nullable=True))
    with op.batch_alter_table("period_balances") as batch:
        batch.add_column(sa.Column("outcomes", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("period_balances") as batch:
        batch.drop_column("outcomes")
    with op.batch_alter_table("periods") as batch:
        batch.drop_column("made_with")
