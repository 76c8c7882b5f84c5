"""The identity's unique index holds the reconciliation key's 32 bytes

On PostgreSQL ``uq_ledger_entries_identity`` is rebuilt on
``(decode(reconciliation_key, 'hex'), contract_version)``: half the size of
the 64-character hex, which every posted line's insert descends and a large
ledger's cache must hold (docs/performance.md). The column, what finance
reads, is unchanged. The rebuild reads the whole ledger and holds back writes
meanwhile (minutes on tens of millions of rows): run it with settlement
stopped. SQLite keeps its index on the key's text.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-06 02:40:00
"""

from __future__ import annotations

from alembic import op

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

_INDEX = "uq_ledger_entries_identity"
_WHERE = "WHERE outcome IN ('posted', 'disputed')"


def _rebuild(key: str) -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP INDEX {_INDEX}")
    op.execute(f"CREATE UNIQUE INDEX {_INDEX} ON ledger_entries ({key}, contract_version) {_WHERE}")


def upgrade() -> None:
    _rebuild("decode(reconciliation_key, 'hex')")


def downgrade() -> None:
    _rebuild("reconciliation_key")
