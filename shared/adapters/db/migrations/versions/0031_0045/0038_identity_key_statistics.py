"""Statistics on the identity's key bytes, so a lookup by key is planned as one row

The identity index (migration 0030) holds ``decode(reconciliation_key, 'hex')``.
It is partial, and PostgreSQL keeps no statistics on a partial index's
expression, so a lookup by key was estimated at 0.5% of the ledger: on 20M
rows, 100,000. The planner then sent a one-row lookup (``GET
/v1/identities/{key}``) to two parallel workers with JIT, 35-40 ms where the
read itself takes 0.1 ms (docs/performance.md#issue-57-ranges-not-rows).
Extended statistics on the expression (PostgreSQL 14 and later) give it the
expression's distinct count: about one row a key. ``ANALYZE`` fills them
here; autovacuum keeps them.

Revision ID: 0038
Revises: 0037
Create Date: 2026-12-08 02:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0038"
down_revision = "0037"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return  # SQLite's planner takes the index by its shape
    op.execute(
        "CREATE STATISTICS IF NOT EXISTS ledger_entries_identity_key"
        " ON (decode(reconciliation_key, 'hex')) FROM ledger_entries"
    )
    op.execute("ANALYZE ledger_entries")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP STATISTICS IF EXISTS ledger_entries_identity_key")
