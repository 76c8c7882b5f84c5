"""Outcome events (docs/architecture.md#outcome-events): one per posted, disputed or
resolved ledger row."""

from __future__ import annotations

import datetime as dt
import hashlib
from typing import Any

import msgspec

from shared.domain.money import to_wire

_encode = msgspec.json.Encoder().encode


def event_id(reconciliation_key: str, contract_version: int, outcome: str = "posted") -> str:
    """Stable across retries and relays: the identity of the ledger row. A
    ``resolved`` row shares its disputed row's key and version, so its identity
    adds ``|resolved`` (there is at most one per disputed row)."""
    text = f"{reconciliation_key}|{contract_version}"
    if outcome == "resolved":
        text += "|resolved"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def routing_key(outcome: str, kind: str) -> str:
    return f"settlement.{outcome}.{kind}"


def occurred_at_text(occurred_at: dt.datetime) -> str:
    """An event's ``occurred_at``: its unit's commit time, UTC, ISO-8601 with ``Z``."""
    if occurred_at.tzinfo is None:
        occurred_at = occurred_at.replace(tzinfo=dt.UTC)
    return occurred_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def event_body(row: Any, eid: str, occurred_at: str, resolution: Any = None) -> bytes:
    """The JSON event of one ledger row, whose ``event_id`` is ``eid``; amounts as
    strings. ``occurred_at`` comes from ``occurred_at_text`` (one per committed
    unit, not one per event). A resolved row's event adds its ``resolution``'s
    ``decision`` and ``note``, and the disputed row it supersedes."""
    event: dict[str, Any] = {
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
    if resolution is not None:
        event["decision"] = resolution.decision
        event["note"] = resolution.note
        event["supersedes_id"] = row.supersedes_id
    return _encode(event)
