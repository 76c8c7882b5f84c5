"""ledger_entries: index (job_id, id), the order a job's posted and disputed lines are listed in

Posted and disputed lines no longer have a line_outcomes row of their own:
their ledger row is their outcome, listed by job in id order.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-29 17:00:00
"""

from __future__ import annotations

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        op.f("ix_ledger_entries_job_id_id"), "ledger_entries", ["job_id", "id"], unique=False
    )
    op.drop_index(op.f("ix_ledger_entries_job_id"), table_name="ledger_entries")


def downgrade() -> None:
    op.create_index(op.f("ix_ledger_entries_job_id"), "ledger_entries", ["job_id"], unique=False)
    op.drop_index(op.f("ix_ledger_entries_job_id_id"), table_name="ledger_entries")
