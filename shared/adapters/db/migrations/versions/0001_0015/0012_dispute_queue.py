"""the dispute queue: partial unique indexes on the ledger, dispute_resolutions

A resolution appends a ``resolved`` ledger row carrying its disputed row's
reconciliation key and contract version, so the unique constraint on
(reconciliation_key, contract_version) becomes a unique index over posted and
disputed rows only; a second partial unique index allows one ``resolved`` row
per disputed row (supersedes_id). A partial index on the disputed rows lists
the queue oldest first, and ``dispute_resolutions`` records each decision.

On PostgreSQL the new unique index is built before the constraint is dropped,
so the identity is never without its guard. SQLite cannot drop a table
constraint: the table is copied (batch mode), its indexes recreated.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-01 12:00:00
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_LEDGER = "ledger_entries"
_OLD_UNIQUE = "uq_ledger_entries_reconciliation_key_contract_version"
_IDENTITY = "outcome IN ('posted', 'disputed')"
_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _where(clause: str) -> dict[str, Any]:
    return {"postgresql_where": sa.text(clause), "sqlite_where": sa.text(clause)}


def _ledger_indexes() -> None:
    op.create_index(
        "uq_ledger_entries_identity",
        _LEDGER,
        ["reconciliation_key", "contract_version"],
        unique=True,
        **_where(_IDENTITY),
    )
    op.create_index(
        "uq_ledger_entries_resolution",
        _LEDGER,
        ["supersedes_id"],
        unique=True,
        **_where("outcome = 'resolved'"),
    )
    op.create_index("ix_ledger_entries_disputes", _LEDGER, ["id"], **_where("outcome = 'disputed'"))


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        _ledger_indexes()
        op.drop_constraint(_OLD_UNIQUE, _LEDGER, type_="unique")
    else:
        with op.batch_alter_table(_LEDGER, recreate="always") as batch:
            batch.drop_constraint(_OLD_UNIQUE, type_="unique")
        _ledger_indexes()
    op.create_table(
        "dispute_resolutions",
        sa.Column("ledger_entry_id", _BIG_ID, nullable=False),
        sa.Column("dispute_id", _BIG_ID, nullable=False),
        sa.Column("decision", sa.String(length=16), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("resolved_by", sa.String(length=64), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["ledger_entry_id"],
            ["ledger_entries.id"],
            name=op.f("fk_dispute_resolutions_ledger_entry_id_ledger_entries"),
        ),
        sa.ForeignKeyConstraint(
            ["dispute_id"],
            ["ledger_entries.id"],
            name=op.f("fk_dispute_resolutions_dispute_id_ledger_entries"),
        ),
        sa.PrimaryKeyConstraint("ledger_entry_id", name=op.f("pk_dispute_resolutions")),
        sa.UniqueConstraint("dispute_id", name=op.f("uq_dispute_resolutions_dispute_id")),
    )


def downgrade() -> None:
    """Refused by the database while any ``resolved`` row exists: the old
    constraint cannot hold a resolution beside its dispute."""
    op.drop_table("dispute_resolutions")
    for name in ("ix_ledger_entries_disputes", "uq_ledger_entries_resolution"):
        op.drop_index(name, table_name=_LEDGER)
    with op.batch_alter_table(_LEDGER) as batch:
        batch.create_unique_constraint(_OLD_UNIQUE, ["reconciliation_key", "contract_version"])
    op.drop_index("uq_ledger_entries_identity", table_name=_LEDGER)
