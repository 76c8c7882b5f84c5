"""COLLATE "C": the ledger's and the outcomes' indexed identifiers compared as bytes

``reconciliation_key``, ``job_id`` and ``outcome`` of ``ledger_entries`` and
``line_outcomes`` are ASCII we mint or hash, and every settled line inserts
them into B-tree indexes (the identity's unique index, the job's lines). Under
the database's locale each comparison went through ``strcoll``; under "C" it
is a ``memcmp``, and the insert's sort by key gets abbreviated keys: less of
the server's CPU on every ledger row. For ASCII the two orders are
the same, so no answer changes. PostgreSQL only (SQLite compares bytes
already). The table is not rewritten, but each index on these columns is
rebuilt, in time that grows with the ledger, while the tables are locked
(docs/operations.md#migration-0015-byte-ordered-identifiers).

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-03 10:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_COLUMNS = {
    table: (("reconciliation_key", 64), ("job_id", 32), ("outcome", 16))
    for table in ("ledger_entries", "line_outcomes")
}


def _collate(collation: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table, columns in _COLUMNS.items():
        changes = ", ".join(
            f'ALTER COLUMN {name} TYPE varchar({width}) COLLATE "{collation}"'
            for name, width in columns
        )
        op.execute(f"ALTER TABLE {table} {changes}")


def upgrade() -> None:
    _collate("C")


def downgrade() -> None:
    _collate("default")
