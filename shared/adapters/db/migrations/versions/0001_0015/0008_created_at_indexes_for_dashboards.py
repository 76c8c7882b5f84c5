"""created_at indexes on chunks and chunk_results, for the dashboard and /metrics

The dashboard's throughput chart reads the last minutes of ``chunk_results``
and the oldest-waiting-work proxy the last hour of ``chunks``: both bounded
range scans on these indexes. One entry per chunk, not per line.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-29 17:30:00
"""

from __future__ import annotations

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_chunks_created_at", "chunks", ["created_at"])
    op.create_index("ix_chunk_results_created_at", "chunk_results", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_chunk_results_created_at", table_name="chunk_results")
    op.drop_index("ix_chunks_created_at", table_name="chunks")
