"""X12 intake: jobs.source_format, received interchanges, 997s, control numbers

``line_outcomes.correlation_id``: every line of a job, duplicates and dead
letters included, names its document's correlation id (an X12 set's control
numbers) as posted lines do in the ledger.

``edi_interchanges`` holds each accepted interchange once per (sender, ISA13):
its unique constraint refuses the same control number with other bytes, even
from two API processes at once. ``edi_acknowledgements`` keeps each X12 job's
997. This system's control numbers come from the ``edi_control_number``
sequence on PostgreSQL, and from ``edi_control_numbers`` (AUTOINCREMENT) on
SQLite, which has no sequences.

Revision ID: 0014
Revises: 0012
Create Date: 2026-12-02 09:00:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TS = sa.DateTime(timezone=True)
_SEQUENCE = sa.Sequence("edi_control_number", minvalue=1, maxvalue=999_999_999, cycle=True)


def upgrade() -> None:
    op.add_column(
        "jobs",
        sa.Column("source_format", sa.String(length=8), nullable=False, server_default="json"),
    )
    # A duplicate's or dead-lettered line's document correlation id (an X12
    # set's control numbers), as a posted line's ledger row has it.
    op.add_column("line_outcomes", sa.Column("correlation_id", sa.String(128), nullable=True))
    op.create_table(
        "edi_interchanges",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("sender_qualifier", sa.String(length=8), nullable=False),
        sa.Column("sender_id", sa.String(length=128), nullable=False),
        sa.Column("control_number", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("file_sha256", sa.String(length=64), nullable=False),
        sa.Column("received_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_edi_interchanges_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_edi_interchanges")),
        sa.UniqueConstraint(
            "sender_qualifier",
            "sender_id",
            "control_number",
            name=op.f("uq_edi_interchanges_sender_qualifier_sender_id_control_number"),
        ),
    )
    op.create_index(op.f("ix_edi_interchanges_job_id"), "edi_interchanges", ["job_id"])
    op.create_table(
        "edi_acknowledgements",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"],
            ["jobs.id"],
            name=op.f("fk_edi_acknowledgements_job_id_jobs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("job_id", name=op.f("pk_edi_acknowledgements")),
    )
    op.create_table(
        "edi_control_numbers",
        sa.Column("n", _BIG_ID, autoincrement=True, nullable=False),
        sa.PrimaryKeyConstraint("n", name=op.f("pk_edi_control_numbers")),
        sqlite_autoincrement=True,
    )
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.schema.CreateSequence(_SEQUENCE))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.schema.DropSequence(_SEQUENCE))
    op.drop_table("edi_control_numbers")
    op.drop_table("edi_acknowledgements")
    op.drop_index(op.f("ix_edi_interchanges_job_id"), table_name="edi_interchanges")
    op.drop_table("edi_interchanges")
    with op.batch_alter_table("line_outcomes") as batch:
        batch.drop_column("correlation_id")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("source_format")
