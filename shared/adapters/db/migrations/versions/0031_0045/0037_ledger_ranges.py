"""A job's and a document's ledger rows found by id ranges, not per-line indexes

Every write of ledger rows now records the id range it wrote for each job
(``ledger_job_ranges``, with its lines' batch positions) and each document
(``ledger_document_ranges``): a row a unit, where the indexes
``(job_id, outcome, position, id)`` and ``ix_ledger_entries_document`` cost
the server an entry a line. Both are dropped; a job's disputed rows keep a
partial index of their own, as the dispute queue's.

The existing rows' ranges are built here, one a unit: a unit's rows share
their transaction's ``created_at``. The ledger is locked against writes while
they are (a read of the whole table, twice): stop the workers first
(docs/operations.md#issue-57-a-lines-cost). Rows an older worker writes after
this migration would have no range.

Revision ID: 0037
Revises: 0036
Create Date: 2026-12-08 01:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0037"
down_revision = "0036"
branch_labels = None
depends_on = None

JOB_ID = sa.String(32).with_variant(sa.String(32, collation="C"), "postgresql")
ID = sa.String(128)
_DISPUTED = sa.text("outcome = 'disputed'")


def upgrade() -> None:
    op.create_table(
        "ledger_job_ranges",
        sa.Column("job_id", JOB_ID, nullable=False),
        sa.Column("first_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.Column("first_position", sa.BigInteger(), nullable=True),
        sa.Column("last_position", sa.BigInteger(), nullable=True),
        sa.Column("unpositioned", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("job_id", "first_id", name=op.f("pk_ledger_job_ranges")),
    )
    op.create_table(
        "ledger_document_ranges",
        sa.Column("document_id", ID, nullable=False),
        sa.Column("partition_key", ID, nullable=False),
        sa.Column("first_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint(
            "document_id", "partition_key", "first_id", name=op.f("pk_ledger_document_ranges")
        ),
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute("LOCK TABLE ledger_entries IN SHARE MODE")
    op.execute(
        "INSERT INTO ledger_job_ranges"
        " (job_id, first_id, last_id, first_position, last_position, unpositioned)"
        " SELECT job_id, min(id), max(id), min(position), max(position),"
        " sum(CASE WHEN position IS NULL THEN 1 ELSE 0 END)"
        " FROM ledger_entries GROUP BY job_id, created_at"
    )
    op.execute(
        "INSERT INTO ledger_document_ranges (document_id, partition_key, first_id, last_id)"
        " SELECT document_id, partition_key, min(id), max(id)"
        " FROM ledger_entries GROUP BY document_id, partition_key, created_at"
    )
    op.create_index(
        "ix_ledger_entries_job_disputes",
        "ledger_entries",
        ["job_id", "position", "id"],
        postgresql_where=_DISPUTED,
        sqlite_where=_DISPUTED,
    )
    op.drop_index("ix_ledger_entries_document", table_name="ledger_entries")
    op.drop_index("ix_ledger_entries_job_id_outcome_position_id", table_name="ledger_entries")


def downgrade() -> None:
    op.create_index(
        "ix_ledger_entries_job_id_outcome_position_id",
        "ledger_entries",
        ["job_id", "outcome", "position", "id"],
    )
    op.create_index(
        "ix_ledger_entries_document", "ledger_entries", ["document_id", "partition_key", "id"]
    )
    op.drop_index("ix_ledger_entries_job_disputes", table_name="ledger_entries")
    op.drop_table("ledger_document_ranges")
    op.drop_table("ledger_job_ranges")
