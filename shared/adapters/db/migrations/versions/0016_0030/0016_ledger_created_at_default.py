"""The ledger's ``created_at`` takes the transaction's ``now()`` when not given

A unit of work stamps its rows with its transaction's time on PostgreSQL
(ledger/writer.py::claim_marker); a chunk ``COPY``'d into the ledger (ledger/postgres.py)
leaves the column out and takes that time from this default, so the server
parses no timestamp a row. Only the default changes: no row is rewritten, no
index rebuilt. PostgreSQL only: SQLite's ledger is never ``COPY``'d into, and
changing a column's default there would rebuild the table.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-04 10:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def _default(clause: str) -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE ledger_entries ALTER COLUMN created_at {clause}")


def upgrade() -> None:
    _default("SET DEFAULT now()")


def downgrade() -> None:
    _default("DROP DEFAULT")
