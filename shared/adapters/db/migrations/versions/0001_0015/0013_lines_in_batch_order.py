"""position: a job's lines listed in the order the batch had them

Each line's ledger row or outcome row records its batch position (its chunk's
number in the high 32 bits, its ordinal in the chunk in the low ones), and a
dead letter the position of its first line, so a requeue keeps it. The job
indexes of ``ledger_entries`` and ``line_outcomes`` are replaced by
``(job_id, outcome, position, id)``: a job's lines page (one range per
outcome, merged) reads them in batch order, filtered or not, and the ledger
keeps its number of indexes. Rows written before have no position (null):
they are listed after the job's positioned lines, by id.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02 10:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_NEW = ["job_id", "outcome", "position", "id"]
_OLD = {"ledger_entries": ["job_id", "id"], "line_outcomes": ["job_id", "outcome", "id"]}


def _name(table: str, columns: list[str]) -> str:
    return f"ix_{table}_{'_'.join(columns)}"


def upgrade() -> None:
    for table in ("ledger_entries", "line_outcomes", "dead_letters"):
        op.add_column(table, sa.Column("position", sa.BigInteger(), nullable=True))
    for table, old in _OLD.items():
        # The new index first: the job's lines are never without one.
        op.create_index(_name(table, _NEW), table, _NEW)
        op.drop_index(_name(table, old), table_name=table)


def downgrade() -> None:
    for table, old in _OLD.items():
        op.create_index(_name(table, old), table, old)
        op.drop_index(_name(table, _NEW), table_name=table)
    for table in ("ledger_entries", "line_outcomes", "dead_letters"):
        with op.batch_alter_table(table) as batch:
            batch.drop_column("position")
