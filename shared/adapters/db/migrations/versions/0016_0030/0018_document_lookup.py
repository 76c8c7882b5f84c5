"""A document's lines found without their job (GET /v1/lines)

Finance asks "what happened to INV-0042 of VENDOR-7?": the ledger's rows of a
document and the duplicates and dead-lettered lines it carried, across every
job. By document id first, then partition: a search by document id alone
uses it too. ``line_outcomes`` holds only the lines the ledger did not take,
so its index is small. (A line's identity needs none: the identity index and
the resolution index answer it.)

On PostgreSQL the indexes are built ``CONCURRENTLY``, outside the migration's
transaction: settlement keeps writing while they are built (a full read of
each table). A build that is interrupted leaves an invalid index, which
``upgrade`` drops and builds again when it is run again.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-04 06:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


_INDEXES = (
    ("ix_ledger_entries_document", "ledger_entries", ["document_id", "partition_key", "id"]),
    ("ix_line_outcomes_document", "line_outcomes", ["document_id", "id"]),
)


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        for name, table, columns in _INDEXES:
            op.create_index(name, table, columns)
        return
    with op.get_context().autocommit_block():
        for name, table, columns in _INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")  # an interrupted build's
            op.create_index(name, table, columns, postgresql_concurrently=True)


def downgrade() -> None:
    op.drop_index("ix_line_outcomes_document", table_name="line_outcomes")
    op.drop_index("ix_ledger_entries_document", table_name="ledger_entries")
