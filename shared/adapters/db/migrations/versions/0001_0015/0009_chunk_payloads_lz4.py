"""Stored chunk payloads compressed with lz4 on PostgreSQL

A chunk payload is a few hundred kB of NDJSON, compressed by PostgreSQL's
TOAST when stored. Its default, pglz, costs the database several times lz4's
CPU per line accepted, and lz4's rows are only slightly larger (the figures:
docs/performance.md). Rows stored before keep their pglz
compression; both read back the same. A PostgreSQL built without lz4 keeps
pglz.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-29 20:00:00
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def _lz4_available() -> bool:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    return bool(
        bind.execute(
            text(
                "SELECT 'lz4' = ANY(enumvals) FROM pg_settings "
                "WHERE name = 'default_toast_compression'"
            )
        ).scalar()
    )


def upgrade() -> None:
    if _lz4_available():
        op.execute("ALTER TABLE chunks ALTER COLUMN payload SET COMPRESSION lz4")


def downgrade() -> None:
    if _lz4_available():
        op.execute("ALTER TABLE chunks ALTER COLUMN payload SET COMPRESSION DEFAULT")
