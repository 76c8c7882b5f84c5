"""Dated booking periods: a period's calendar range and its cut at the end

``periods.starts_at`` / ``ends_at``: a dated period's range, null for a
manual one; ``periods.ended_at``: when the cut at ``ends_at`` was made, after
which the period is ``ended`` until it is closed. Every existing period is
left undated, so an existing deployment stays manual until an operator closes
its open period into a dated one (docs/operations.md#the-month-end-close).
A ledger this very ``settleq migrate`` made (``upgrade`` says so, with the
calendar's first period) has its first period dated here.

Revision ID: 0036
Revises: 0035
Create Date: 2026-12-07 16:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import context, op

revision = "0036"
down_revision = "0035"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    with op.batch_alter_table("periods") as batch:
        batch.add_column(sa.Column("starts_at", TS, nullable=True))
        batch.add_column(sa.Column("ends_at", TS, nullable=True))
        batch.add_column(sa.Column("ended_at", TS, nullable=True))
    first = context.config.attributes.get("dated_first")
    if first is not None:
        periods = sa.table(
            "periods",
            sa.column("name", sa.String),
            sa.column("seq", sa.Integer),
            sa.column("status", sa.String),
            sa.column("starts_at", TS),
            sa.column("ends_at", TS),
        )
        op.execute(
            periods.update()
            .where(periods.c.seq == 1, periods.c.name == first.name, periods.c.status == "open")
            .values(starts_at=first.starts_at, ends_at=first.ends_at)
        )


def downgrade() -> None:
    with op.batch_alter_table("periods") as batch:
        batch.drop_column("ended_at")
        batch.drop_column("ends_at")
        batch.drop_column("starts_at")
