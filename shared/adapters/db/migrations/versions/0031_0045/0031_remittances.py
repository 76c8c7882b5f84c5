"""Remittances and deductions: what a payer paid and took off

``remittances`` (one per 820 transaction set or JSON remittance, unique by
key, payer and trace), ``deductions`` (one per deduction, with how its match
left it and a person's decision), a partial unique index that gives each
``deducted`` / ``written_off`` ledger row its identity (a replay inserts
nothing), and a partner profile's remittance settings: the partition its
payer maps to, its tolerance, its reason codes and its dispute window
(docs/architecture.md#remittances-and-deductions).

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07 07:10:00
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
ID = sa.String(128)
MONEY = sa.Numeric(20, 4).with_variant(sa.String(length=40), "sqlite")
_MATCHES = "outcome IN ('deducted', 'written_off')"


def _big_id() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "remittances",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("key_id", ID, nullable=False),
        sa.Column("payer", ID, nullable=False),
        sa.Column("trace", ID, nullable=False),
        sa.Column("body_sha256", sa.String(64), nullable=False),
        sa.Column("partition_key", ID, nullable=False),
        sa.Column("source_format", sa.String(8), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("paid_total", MONEY, nullable=False),
        sa.Column("computed_total", MONEY, nullable=False),
        sa.Column("paid_at", sa.Date(), nullable=True),
        sa.Column("received_at", TS, nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("acknowledgement", sa.Text(), nullable=True),
        sa.Column("deductions", sa.Integer(), nullable=False),
        sa.UniqueConstraint("key_id", "payer", "trace", name="uq_remittances_key_id_payer_trace"),
    )
    op.create_index(
        "ix_remittances_partition_key_received_at", "remittances", ["partition_key", "received_at"]
    )
    op.create_index("ix_remittances_received_at", "remittances", ["received_at"])
    op.create_table(
        "deductions",
        sa.Column("id", _big_id(), primary_key=True, autoincrement=True),
        sa.Column(
            "remittance_id",
            sa.String(32),
            sa.ForeignKey(
                "remittances.id",
                ondelete="CASCADE",
                name="fk_deductions_remittance_id_remittances",
            ),
            nullable=False,
        ),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("partition_key", ID, nullable=False),
        sa.Column("amount", MONEY, nullable=False),
        sa.Column("reason_code", sa.String(16), nullable=False),
        sa.Column("reason_class", sa.String(16), nullable=False),
        sa.Column("reference", ID, nullable=True),
        sa.Column("line_reference", ID, nullable=True),
        sa.Column("deducted_on", sa.Date(), nullable=False),
        sa.Column("due_on", sa.Date(), nullable=False),
        sa.Column("matched", MONEY, nullable=False),
        sa.Column("written_off", MONEY, nullable=False),
        sa.Column("disputed", MONEY, nullable=False),
        sa.Column("dispute_reason", sa.String(32), nullable=True),
        sa.Column("dispute_document_id", ID, nullable=True),
        sa.Column("decision", sa.String(8), nullable=True),
        sa.Column("decision_note", sa.Text(), nullable=True),
        sa.Column("decided_by", sa.String(64), nullable=True),
        sa.Column("decided_at", TS, nullable=True),
        sa.Column("decision_detail", sa.Text(), nullable=True),
        sa.UniqueConstraint("remittance_id", "seq", name="uq_deductions_remittance_id_seq"),
    )
    op.create_index("ix_deductions_partition_key_id", "deductions", ["partition_key", "id"])
    op.create_index("ix_deductions_deducted_on", "deductions", ["deducted_on"])
    op.create_index(
        "uq_ledger_entries_match",
        "ledger_entries",
        ["reconciliation_key"],
        unique=True,
        postgresql_where=sa.text(_MATCHES),
        sqlite_where=sa.text(_MATCHES),
    )
    with op.batch_alter_table("edi_partners") as batch:
        batch.add_column(sa.Column("payer_partition_key", ID, nullable=True))
        batch.add_column(sa.Column("tolerance", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("deduction_reasons", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("dispute_window_days", sa.Integer(), nullable=True))
    op.create_index("ix_edi_partners_payer_partition_key", "edi_partners", ["payer_partition_key"])


def downgrade() -> None:
    op.drop_index("ix_edi_partners_payer_partition_key", "edi_partners")
    with op.batch_alter_table("edi_partners") as batch:
        for name in (
            "dispute_window_days",
            "deduction_reasons",
            "tolerance",
            "payer_partition_key",
        ):
            batch.drop_column(name)
    op.drop_index("uq_ledger_entries_match", "ledger_entries")
    op.drop_table("deductions")
    op.drop_table("remittances")
