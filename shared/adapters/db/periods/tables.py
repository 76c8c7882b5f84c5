"""The booking periods' tables (docs/api.md#periods-and-the-close),
on the schema's one metadata.

Exactly one period is ``open`` (the partial unique index). A period's ledger
rows are the ids after ``after_id`` up to ``last_id``: the close is a cut
(booking.py), so no row of a later period was given an id before it. A closed
period's ``period_balances`` are summed once, when it is closed, and carried
forward: every (kind, partition_key) that has a ledger row by then has a row
for it, so a closed period's balances are one read, however large the ledger.
"""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    text,
)

from shared.adapters.db.schema import ID, KEY, TS, metadata
from shared.adapters.db.types import total_column_type

NAME = String(32)
# A dated period is ``ended`` from its cut at ends_at until an operator closes it.
OPEN, ENDED, CLOSED = "open", "ended", "closed"

periods = Table(
    "periods",
    metadata,
    Column("name", NAME, primary_key=True),
    Column("seq", Integer, nullable=False, unique=True),  # the periods' order
    Column("status", String(8), nullable=False),
    Column("opened_at", TS, nullable=False),
    # The ledger's largest id when the period opened: its rows come after it.
    Column("after_id", BigInteger, nullable=False),
    Column("closed_at", TS, nullable=True),
    Column("closed_by", String(64), nullable=True),  # the operator token's fingerprint
    Column("note", Text, nullable=True),
    Column("next", NAME, nullable=True),  # the period its close opened
    # The ledger's largest id at the close: the period's last row, or before it.
    Column("last_id", BigInteger, nullable=True),
    # Summed once the period is closed (close.py::finalise): its rows, totals
    # per kind and outcome, what it carried over, the accounts its journal
    # was made with, and the SHA-256 of the journal's CSV.
    Column("rows", BigInteger, nullable=True),
    Column("totals", JSON, nullable=True),
    Column("carried", JSON, nullable=True),
    Column("accounts", JSON, nullable=True),
    Column("journal_sha256", KEY, nullable=True),
    # Migration 0034: the entity, currency, counterparties and accounting date
    # its journal carries, fixed at the close; null for a period closed before.
    Column("made_with", JSON, nullable=True),
    # Migration 0036: a dated period's calendar range [starts_at, ends_at) and
    # when its cut was made; all null for a manual period, which is how a
    # ledger remembers it is manual.
    Column("starts_at", TS, nullable=True),
    Column("ends_at", TS, nullable=True),
    Column("ended_at", TS, nullable=True),
    Index(
        "uq_periods_open",
        "status",
        unique=True,
        postgresql_where=text("status = 'open'"),
        sqlite_where=text("status = 'open'"),
    ),
)

# A closed period's balance of each (kind, partition_key) with a ledger row by
# its close: opening, the six sums of its activity (and the rows of its
# remittance outcomes, whose journal entries are their own), closing, and the
# disputes open at the close.
period_balances = Table(
    "period_balances",
    metadata,
    Column("period", NAME, ForeignKey("periods.name"), primary_key=True),
    Column("kind", String(32), primary_key=True),
    Column("partition_key", ID, primary_key=True),
    Column("rows", BigInteger, nullable=False),
    Column("opening", total_column_type(), nullable=False),
    Column("posted", total_column_type(), nullable=False),
    Column("disputed", total_column_type(), nullable=False),
    Column("repriced", total_column_type(), nullable=False),
    Column("resolved", total_column_type(), nullable=False),
    # Migration 0032: a remittance's rows (docs/api.md#balances-and-statements).
    Column("deducted", total_column_type(), nullable=False, server_default="0"),
    Column("written_off", total_column_type(), nullable=False, server_default="0"),
    Column("deducted_rows", BigInteger, nullable=False, server_default="0"),
    Column("written_off_rows", BigInteger, nullable=False, server_default="0"),
    Column("closing", total_column_type(), nullable=False),
    Column("in_dispute_count", Integer, nullable=False),
    Column("in_dispute_variance", total_column_type(), nullable=False),
    # Migration 0034: {outcome: [rows, sum of delta]} of the period's rows
    # (their outcome's own journal entry); null for a period closed before.
    Column("outcomes", JSON, nullable=True),
)

# What a partition is called in the ERP its journal goes to: an operator's
# word (PUT /v1/partitions/{partition_key}, audited), carried on its journal's
# entries as their counterparty (docs/api.md#a-partitions-erp-counterparty).
partition_profiles = Table(
    "partition_profiles",
    metadata,
    Column("partition_key", ID, primary_key=True),
    Column("erp_counterparty", String(64), nullable=True),
    Column("updated_at", TS, nullable=False),
    Column("updated_by", String(64), nullable=False),  # the operator token's fingerprint
)
