"""chunk_results amounts: NUMERIC(38,4), wide enough for any chunk's sum

A chunk's summed amounts were NUMERIC(20,4), like one ledger line: two recipe
locations of 9000 x 999999999999 each fit the ledger but not their sum, and
the whole chunk was dead-lettered internal_error (issue 12). A total now holds
34 integer digits (see shared/adapters/db/types.py for the bound). Widening a NUMERIC's
precision at the same scale rewrites no rows on PostgreSQL. SQLite keeps money
as text and needs nothing.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-01 09:00:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

_COLUMNS = ("amount_posted", "amount_disputed")


def _alter(old: sa.Numeric[Any], new: sa.Numeric[Any]) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for column in _COLUMNS:
        op.alter_column(
            "chunk_results", column, type_=new, existing_type=old, existing_nullable=False
        )


def upgrade() -> None:
    _alter(sa.Numeric(20, 4), sa.Numeric(38, 4))


def downgrade() -> None:
    # Fails if a stored total no longer fits: that total is why the column is wide.
    _alter(sa.Numeric(38, 4), sa.Numeric(20, 4))
