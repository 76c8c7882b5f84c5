"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-29 13:56:57.602988
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "contracts",
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("partition_key", sa.String(length=128), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("body_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("kind", "partition_key", "version", name=op.f("pk_contracts")),
    )
    op.create_table(
        "dead_letters",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("chunk_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("partition_key", sa.String(length=128), nullable=False),
        sa.Column("document_id", sa.String(length=128), nullable=True),
        sa.Column("line_ref", sa.String(length=128), nullable=True),
        sa.Column("reason", sa.String(length=64), nullable=False),
        sa.Column("error_class", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("contract_version", sa.Integer(), nullable=True),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("first_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_dead_letters")),
    )
    op.create_index(op.f("ix_dead_letters_job_id"), "dead_letters", ["job_id"], unique=False)
    op.create_index(
        op.f("ix_dead_letters_status_reason"), "dead_letters", ["status", "reason"], unique=False
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("key_id", sa.String(length=128), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=False),
        sa.Column("body_sha256", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("chunks_total", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint(
            "key_id", "idempotency_key", name=op.f("uq_jobs_key_id_idempotency_key")
        ),
    )
    op.create_index(op.f("ix_jobs_created_at"), "jobs", ["created_at"], unique=False)
    op.create_table(
        "ledger_entries",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("reconciliation_key", sa.String(length=64), nullable=False),
        sa.Column("contract_version", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("partition_key", sa.String(length=128), nullable=False),
        sa.Column("document_id", sa.String(length=128), nullable=False),
        sa.Column("line_ref", sa.String(length=128), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column(
            "amount",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=False,
        ),
        sa.Column(
            "claimed_amount",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=True,
        ),
        sa.Column(
            "delta",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=False,
        ),
        sa.Column(
            "supersedes_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True
        ),
        sa.Column("correlation_id", sa.String(length=128), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["supersedes_id"],
            ["ledger_entries.id"],
            name=op.f("fk_ledger_entries_supersedes_id_ledger_entries"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_ledger_entries")),
        sa.UniqueConstraint(
            "reconciliation_key",
            "contract_version",
            name=op.f("uq_ledger_entries_reconciliation_key_contract_version"),
        ),
    )
    op.create_index(op.f("ix_ledger_entries_job_id"), "ledger_entries", ["job_id"], unique=False)
    op.create_table(
        "line_outcomes",
        sa.Column(
            "id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            autoincrement=True,
            nullable=False,
        ),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("chunk_id", sa.String(length=32), nullable=False),
        sa.Column("document_id", sa.String(length=128), nullable=False),
        sa.Column("line_ref", sa.String(length=128), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.String(length=64), nullable=True),
        sa.Column(
            "amount",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=True,
        ),
        sa.Column(
            "claimed_amount",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=True,
        ),
        sa.Column(
            "delta",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=True,
        ),
        sa.Column("reconciliation_key", sa.String(length=64), nullable=True),
        sa.Column("contract_version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_line_outcomes")),
    )
    op.create_index(
        op.f("ix_line_outcomes_job_id_outcome_id"),
        "line_outcomes",
        ["job_id", "outcome", "id"],
        unique=False,
    )
    op.create_table(
        "settleq_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_settleq_meta")),
    )
    op.create_table(
        "chunk_results",
        sa.Column("chunk_id", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("posted", sa.Integer(), nullable=False),
        sa.Column("disputed", sa.Integer(), nullable=False),
        sa.Column("duplicate", sa.Integer(), nullable=False),
        sa.Column("dead_lettered", sa.Integer(), nullable=False),
        sa.Column(
            "amount_posted",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=False,
        ),
        sa.Column(
            "amount_disputed",
            sa.Numeric(precision=20, scale=4).with_variant(sa.String(length=40), "sqlite"),
            nullable=False,
        ),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_chunk_results_job_id_jobs")),
        sa.PrimaryKeyConstraint("chunk_id", name=op.f("pk_chunk_results")),
    )
    op.create_index(op.f("ix_chunk_results_job_id"), "chunk_results", ["job_id"], unique=False)
    op.create_table(
        "chunks",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("documents", sa.Integer(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("payload_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_chunks_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_chunks")),
    )
    op.create_index(op.f("ix_chunks_job_id"), "chunks", ["job_id"], unique=False)
    op.create_table(
        "job_partitions",
        sa.Column("job_id", sa.String(length=32), nullable=False),
        sa.Column("partition_key", sa.String(length=128), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_job_partitions_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "partition_key", name=op.f("pk_job_partitions")),
    )
    op.create_index(
        op.f("ix_job_partitions_partition_key"), "job_partitions", ["partition_key"], unique=False
    )


def downgrade() -> None:

    op.drop_index(op.f("ix_job_partitions_partition_key"), table_name="job_partitions")
    op.drop_table("job_partitions")
    op.drop_index(op.f("ix_chunks_job_id"), table_name="chunks")
    op.drop_table("chunks")
    op.drop_index(op.f("ix_chunk_results_job_id"), table_name="chunk_results")
    op.drop_table("chunk_results")
    op.drop_table("settleq_meta")
    op.drop_index(op.f("ix_line_outcomes_job_id_outcome_id"), table_name="line_outcomes")
    op.drop_table("line_outcomes")
    op.drop_index(op.f("ix_ledger_entries_job_id"), table_name="ledger_entries")
    op.drop_table("ledger_entries")
    op.drop_index(op.f("ix_jobs_created_at"), table_name="jobs")
    op.drop_table("jobs")
    op.drop_index(op.f("ix_dead_letters_status_reason"), table_name="dead_letters")
    op.drop_index(op.f("ix_dead_letters_job_id"), table_name="dead_letters")
    op.drop_table("dead_letters")
    op.drop_table("contracts")
