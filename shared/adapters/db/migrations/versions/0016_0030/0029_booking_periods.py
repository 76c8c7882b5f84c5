"""Booking periods: every ledger row is booked in the period open when it committed

``periods`` holds exactly one open period; the first is made here, named by
SETTLEQ_FIRST_PERIOD (``settleq migrate`` hands it over) or else the current
UTC month, and every existing ledger row is booked into it. ``period_balances``
keeps a closed period's balances, summed at its close.

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-05 23:00:00
"""

from __future__ import annotations

import datetime as dt

import sqlalchemy as sa
from alembic import context, op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
TOTAL = sa.Numeric(38, 4)
_OPEN = "status = 'open'"


def _first_period() -> str:
    named = context.config.attributes.get("first_period")
    return str(named) if named else dt.datetime.now(dt.UTC).strftime("%Y-%m")


def upgrade() -> None:
    periods = op.create_table(
        "periods",
        sa.Column("name", sa.String(32), primary_key=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(8), nullable=False),
        sa.Column("opened_at", TS, nullable=False),
        sa.Column("after_id", sa.BigInteger(), nullable=False),
        sa.Column("closed_at", TS, nullable=True),
        sa.Column("closed_by", sa.String(64), nullable=True),
        sa.Column("note", sa.Text(), nullable=True),
        sa.Column("next", sa.String(32), nullable=True),
        sa.Column("last_id", sa.BigInteger(), nullable=True),
        sa.Column("rows", sa.BigInteger(), nullable=True),
        sa.Column("totals", sa.JSON(), nullable=True),
        sa.Column("carried", sa.JSON(), nullable=True),
        sa.Column("accounts", sa.JSON(), nullable=True),
        sa.Column("journal_sha256", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_periods"),
        sa.UniqueConstraint("seq", name="uq_periods_seq"),
    )
    op.create_index(
        "uq_periods_open",
        "periods",
        ["status"],
        unique=True,
        postgresql_where=sa.text(_OPEN),
        sqlite_where=sa.text(_OPEN),
    )
    total = TOTAL.with_variant(sa.String(40), "sqlite")
    op.create_table(
        "period_balances",
        sa.Column("period", sa.String(32), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("partition_key", sa.String(128), nullable=False),
        sa.Column("rows", sa.BigInteger(), nullable=False),
        sa.Column("opening", total, nullable=False),
        sa.Column("posted", total, nullable=False),
        sa.Column("disputed", total, nullable=False),
        sa.Column("repriced", total, nullable=False),
        sa.Column("resolved", total, nullable=False),
        sa.Column("closing", total, nullable=False),
        sa.Column("in_dispute_count", sa.Integer(), nullable=False),
        sa.Column("in_dispute_variance", total, nullable=False),
        sa.PrimaryKeyConstraint("period", "kind", "partition_key", name="pk_period_balances"),
        sa.ForeignKeyConstraint(
            ["period"], ["periods.name"], name="fk_period_balances_period_periods"
        ),
    )
    name = _first_period()
    op.bulk_insert(
        periods,
        [
            {
                "name": name,
                "seq": 1,
                "status": "open",
                "opened_at": dt.datetime.now(dt.UTC),
                "after_id": 0,
            }
        ],
    )
    # Every row so far is booked in the first period: on PostgreSQL a constant
    # default rewrites no row (it is kept once, in the catalog), and dropped
    # again, as every writer names the period it books in.
    with op.batch_alter_table("ledger_entries") as batch:
        batch.add_column(sa.Column("period", sa.String(32), nullable=False, server_default=name))
    with op.batch_alter_table("ledger_entries") as batch:
        batch.alter_column("period", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("ledger_entries") as batch:
        batch.drop_column("period")
    op.drop_table("period_balances")
    op.drop_index("uq_periods_open", table_name="periods")
    op.drop_table("periods")
