"""The tables of operators' decisions (dispute resolutions) and actions (the
audit log), on the schema's one metadata (shared/adapters/db/tables.py)."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, String, Table, Text, UniqueConstraint

from shared.adapters.db.tables import TS, metadata
from shared.adapters.db.types import BigId

# The decision behind each ``resolved`` ledger row (docs/architecture.md#exactly-once-resolution):
# one per dispute (``dispute_id``, the disputed row), written with that row.
dispute_resolutions = Table(
    "dispute_resolutions",
    metadata,
    Column("ledger_entry_id", BigId, ForeignKey("ledger_entries.id"), primary_key=True),
    Column("dispute_id", BigId, ForeignKey("ledger_entries.id"), nullable=False),
    Column("decision", String(16), nullable=False),
    Column("note", Text, nullable=False),
    Column("resolved_by", String(64), nullable=False),  # the operator token's fingerprint
    Column("resolved_at", TS, nullable=False),
    UniqueConstraint("dispute_id"),
)

# Every operator action: who (a token fingerprint, never the token), when, what.
audit_log = Table(
    "audit_log",
    metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("at", TS, nullable=False),
    Column("actor", String(64), nullable=False),
    Column("action", String(64), nullable=False),
    Column("target", String(255), nullable=False),
    Column("details", Text, nullable=False),
    Index(None, "at"),
)
