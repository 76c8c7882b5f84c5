"""The tables of operators' decisions (dispute resolutions), actions (the
audit log) and the producer keys they manage, on the schema's one metadata
(shared/adapters/db/schema.py)."""

from __future__ import annotations

from sqlalchemy import Column, ForeignKey, Index, String, Table, Text, UniqueConstraint

from shared.adapters.db.schema import ID, TS, metadata
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

# Producer keys managed at runtime (docs/api.md#producer-keys), beside the
# bootstrap ones of SETTLEQ_PRODUCER_KEYS. ``partitions`` is a JSON array (a
# partition key may hold a comma). ``secret`` and ``previous_secret`` are
# sealed (shared/domain/sealing.py), never the secret itself; a rotated-out
# secret still signs until ``previous_until``. A revoked key keeps its row:
# its id is never given again (its jobs name it).
producer_keys = Table(
    "producer_keys",
    metadata,
    Column("key_id", ID, primary_key=True),
    Column("partitions", Text, nullable=False),
    Column("secret", Text, nullable=False),
    Column("previous_secret", Text, nullable=True),
    Column("previous_until", TS, nullable=True),
    Column("status", String(16), nullable=False),  # active, revoked
    Column("revoked_at", TS, nullable=True),
    Column("created_at", TS, nullable=False),
    Column("updated_at", TS, nullable=False),
)
