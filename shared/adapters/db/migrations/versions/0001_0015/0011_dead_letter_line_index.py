"""dead_letters.line_index: the one line a line-level dead letter's requeue re-runs

A requeue picked its line by line_ref, so a document repeating a line_no had
every line of that number re-run, and each requeue added an outcome the job
does not have (issue 12). Dead letters stored before have no index: their
requeue picks the line by line_ref and reconciliation key, one line at most.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-01 09:30:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("dead_letters", sa.Column("line_index", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("dead_letters") as batch:
        batch.drop_column("line_index")
