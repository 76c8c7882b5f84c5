"""dead letter requeue and audit log

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 14:11:48.087475
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "audit_log",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=255), nullable=False),
        sa.Column("details", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_at"), "audit_log", ["at"], unique=False)
    op.add_column(
        "chunk_results",
        sa.Column("source", sa.String(length=16), server_default="chunk", nullable=False),
    )
    op.add_column(
        "dead_letters", sa.Column("requeues", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column("dead_letters", sa.Column("note", sa.Text(), nullable=True))
    op.add_column(
        "line_outcomes",
        sa.Column(
            "dead_letter_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
    )
    op.create_index(
        op.f("ix_line_outcomes_dead_letter_id"), "line_outcomes", ["dead_letter_id"], unique=False
    )


def downgrade() -> None:

    op.drop_index(op.f("ix_line_outcomes_dead_letter_id"), table_name="line_outcomes")
    op.drop_column("line_outcomes", "dead_letter_id")
    op.drop_column("dead_letters", "note")
    op.drop_column("dead_letters", "requeues")
    op.drop_column("chunk_results", "source")
    op.drop_index(op.f("ix_audit_log_at"), table_name="audit_log")
    op.drop_table("audit_log")
