"""Outcome events (docs/architecture.md#outcome-events): one per posted or disputed ledger row."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import msgspec

from shared.domain.money import to_wire

_encode = msgspec.json.Encoder().encode


def event_id(reconciliation_key: str, contract_version: int) -> str:
    """Stable across retries and relays: the identity of the ledger row."""
    return hashlib.sha256(f"{reconciliation_key}|{contract_version}".encode()).hexdigest()[:32]


def routing_key(outcome: str, kind: str) -> str:
    return f"settlement.{outcome}.{kind}"


def occurred_at_text(occurred_at: dt.datetime) -> str:
    """An event's ``occurred_at``: its unit's commit time, UTC, ISO-8601 with ``Z``."""
    if occurred_at.tzinfo is None:
        occurred_at = occurred_at.replace(tzinfo=dt.UTC)
    return occurred_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def event_body(row: Any, eid: str, occurred_at: str) -> bytes:
    """The JSON event of one ledger row, whose ``event_id`` is ``eid``; amounts as
    strings. ``occurred_at`` comes from ``occurred_at_text`` (one per committed
    unit, not one per event)."""
    return _encode(
        {
            "event_id": eid,
            "type": f"settlement.{row.outcome}",
            "kind": row.kind,
            "job_id": row.job_id,
            "document_id": row.document_id,
            "line_ref": row.line_ref,
            "partition_key": row.partition_key,
            "reconciliation_key": row.reconciliation_key,
            "contract_version": row.contract_version,
            "correlation_id": row.correlation_id,
            "amount": to_wire(row.amount),
            "claimed_amount": to_wire(row.claimed_amount),
            "delta": to_wire(row.delta),
            "occurred_at": occurred_at,
        }
    )
