"""The remittances' tables (docs/architecture.md#remittances-and-deductions),
on the schema's one metadata.

A remittance is named forever by the producer key that sent it, its payer and
its trace (TRN02): the unique constraint, not a read before the write, decides
between two API processes receiving the same one at once. Its deductions are
rows of their own, one per deduction, in the remittance's order; what each
took from a document is a ledger row (``deducted`` / ``written_off``), never
a column here. What a person decided about a disputed deduction is kept on
its row (``decision``): the ledger gets the rows the decision books.
"""

from __future__ import annotations

from sqlalchemy import (
    Column,
    Date,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
)

from shared.adapters.db.schema import ID, KEY, TS, metadata
from shared.adapters.db.types import BigId, money_column_type

remittances = Table(
    "remittances",
    metadata,
    Column("id", String(32), primary_key=True),  # rm_ + 24 hex digits
    Column("key_id", ID, nullable=False),
    Column("payer", ID, nullable=False),  # N1*PR's id, else the ISA sender's; JSON: payer
    Column("trace", ID, nullable=False),  # TRN02
    Column("body_sha256", KEY, nullable=False),  # of the remittance as read: a replay's match
    Column("partition_key", ID, nullable=False),  # the payer's, through its profile
    Column("source_format", String(8), nullable=False),  # x12 or json
    Column("currency", String(3), nullable=False),
    Column("paid_total", money_column_type(), nullable=False),  # BPR02, as stated
    Column("computed_total", money_column_type(), nullable=False),  # the lines and ADX
    Column("paid_at", Date, nullable=True),
    Column("received_at", TS, nullable=False),
    Column("body", Text, nullable=False),  # the remittance as read, JSON
    Column("acknowledgement", Text, nullable=True),  # the 997 sent with it, if any
    Column("deductions", Integer, nullable=False),
    UniqueConstraint("key_id", "payer", "trace", name="uq_remittances_key_id_payer_trace"),
    Index(None, "partition_key", "received_at"),
    Index(None, "received_at"),
)

deductions = Table(
    "deductions",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("remittance_id", ForeignKey("remittances.id", ondelete="CASCADE"), nullable=False),
    Column("seq", Integer, nullable=False),  # its place among the remittance's deductions
    Column("partition_key", ID, nullable=False),
    Column("amount", money_column_type(), nullable=False),  # what was taken: above zero
    Column("reason_code", String(16), nullable=False),  # the partner's, as sent
    Column("reason_class", String(16), nullable=False),
    Column("reference", ID, nullable=True),
    Column("line_reference", ID, nullable=True),  # its RMR02; none: it stands alone
    Column("deducted_on", Date, nullable=False),  # the payment's date, else received
    Column("due_on", Date, nullable=False),  # deducted_on + the dispute window
    # How the match left it (each also a ledger row, but for ``disputed``):
    Column("matched", money_column_type(), nullable=False),
    Column("written_off", money_column_type(), nullable=False),
    Column("disputed", money_column_type(), nullable=False),
    Column("dispute_reason", String(32), nullable=True),  # over_deduction, unmatched...
    Column("dispute_document_id", ID, nullable=True),  # what it was measured against
    # A person's decision on the disputed part: accept, deny or match.
    Column("decision", String(8), nullable=True),
    Column("decision_note", Text, nullable=True),
    Column("decided_by", String(64), nullable=True),  # the operator token's fingerprint
    Column("decided_at", TS, nullable=True),
    Column("decision_detail", Text, nullable=True),  # a match's documents and amounts, JSON
    UniqueConstraint("remittance_id", "seq", name="uq_deductions_remittance_id_seq"),
    Index(None, "partition_key", "id"),
    Index(None, "deducted_on"),
)
