"""leaner indexes on the per-line tables (each index is paid on every line)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29 15:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_ledger_entries_kind_partition_key_line_ref_id", table_name="ledger_entries")
    op.create_index(
        "ix_ledger_entries_line_history",
        "ledger_entries",
        ["kind", "partition_key", "line_ref", "id"],
        postgresql_where=sa.text("kind = 'recipe_cost'"),
        sqlite_where=sa.text("kind = 'recipe_cost'"),
    )
    op.drop_index("ix_line_outcomes_dead_letter_id", table_name="line_outcomes")
    op.create_index(
        "ix_line_outcomes_dead_letter",
        "line_outcomes",
        ["dead_letter_id"],
        postgresql_where=sa.text("dead_letter_id IS NOT NULL"),
        sqlite_where=sa.text("dead_letter_id IS NOT NULL"),
    )
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint("uq_outbox_event_id", type_="unique")


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.create_unique_constraint("uq_outbox_event_id", ["event_id"])
    op.drop_index("ix_line_outcomes_dead_letter", table_name="line_outcomes")
    op.create_index("ix_line_outcomes_dead_letter_id", "line_outcomes", ["dead_letter_id"])
    op.drop_index("ix_ledger_entries_line_history", table_name="ledger_entries")
    op.create_index(
        "ix_ledger_entries_kind_partition_key_line_ref_id",
        "ledger_entries",
        ["kind", "partition_key", "line_ref", "id"],
    )
