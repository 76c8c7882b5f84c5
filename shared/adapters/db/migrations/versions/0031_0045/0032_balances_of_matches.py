"""Balances of a remittance's rows: ``deducted`` and ``written_off``

A closed period's ``period_balances`` gain the sums of ``delta`` of the two
outcomes a remittance books (docs/api.md#balances-and-statements) beside
posted, disputed, repriced and resolved, and the rows of each: the journal
books each as an entry of its own on its own accounts
(docs/operations.md#configuration), and a closed period's journal is made
from its stored balances. A period closed before has none of those rows:
zero, the default.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-07 08:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0032"
down_revision = "0031"
branch_labels = None
depends_on = None

TOTAL = sa.Numeric(38, 4).with_variant(sa.String(40), "sqlite")
_SUMS = ("deducted", "written_off")
_ROWS = ("deducted_rows", "written_off_rows")


def upgrade() -> None:
    with op.batch_alter_table("period_balances") as batch:
        for name in _SUMS:
            batch.add_column(sa.Column(name, TOTAL, nullable=False, server_default="0"))
        for name in _ROWS:
            batch.add_column(sa.Column(name, sa.BigInteger(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("period_balances") as batch:
        for name in (*_ROWS, *_SUMS):
            batch.drop_column(name)
