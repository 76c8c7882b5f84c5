"""Reading a unit's documents from its stored bytes, re-checked against the
signed digest; a unit that cannot be read (or trusted) is dead-lettered whole."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from services.worker.context import WorkerContext
from services.worker.loading import Unit
from services.worker.recording import record
from services.worker.stage_log import note_documents
from shared.domain.keys import correlation_id_for
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Kind
from shared.domain.pipeline.settlement import (
    Decoded,
    decode_chunk,
    document_list,
    unreadable,
    with_correlation_id,
)
from shared.errors import StructuralError


class Envelope(msgspec.Struct):
    """What the fast path reads of a document: enough to route and check contracts."""

    document_id: str
    partition_key: str
    contract_version: int
    correlation_id: str | None = None


# Not strict: a contract_version written 1.0 (an integer to JSON Schema) passed
# the front door's model; the door refused everything else lax mode would take.
ENVELOPES = msgspec.json.Decoder(list[Envelope], strict=False)


def digest_ok(ctx: WorkerContext, unit: Unit, attempt: int) -> bool:
    """The stored bytes are the ones the front door validated and signed the digest
    of; a unit whose bytes differ is dead-lettered whole."""
    if hashlib.sha256(unit.chunk_payload).hexdigest() == unit.message.payload_sha256:
        return True
    reason, message = "signature_mismatch", "chunk payload does not match its digest"
    dead_letter_whole(ctx, unit, reason, message, attempt)
    return False


def dead_letter_whole(
    ctx: WorkerContext, unit: Unit, reason: str, message: str, attempt: int
) -> None:
    """Record every line of a unit that cannot be read (or trusted) as one dead letter."""
    plan = unreadable(unit.payload, unit.ref.lines, reason, message, start=unit.start)
    record(ctx, unit.ref, plan, attempt)


def decode_documents(unit: Unit) -> tuple[Kind[Any, Any], Decoded]:
    """The unit's kind and documents (those that fail apart); StructuralError when
    the unit cannot be read at all."""
    kind = KINDS.get(unit.ref.kind)
    if kind is None:
        raise StructuralError("schema_invalid", f"unknown kind {unit.ref.kind!r}")
    return kind, decode_chunk(kind, document_list(kind), unit.payload, unit.ref.lines)


def decode(
    ctx: WorkerContext, unit: Unit, attempt: int, *, digest_checked: bool = False
) -> Decoded | None:
    """Re-check the stored bytes; an unreadable unit is dead-lettered whole."""
    if not digest_checked and not digest_ok(ctx, unit, attempt):
        return None
    try:
        _, decoded = decode_documents(unit)
    except StructuralError as exc:
        dead_letter_whole(ctx, unit, exc.reason, str(exc), attempt)
        return None
    # A document that came without a correlation id gets one derived from the job
    # and document, the same on every retry, requeue and event.
    decoded.documents = [
        d
        if d.correlation_id
        else with_correlation_id(d, correlation_id_for(unit.ref.job_id, d.document_id))
        for d in decoded.documents
    ]
    note_documents(decoded.documents)  # for the stage's log event (stage_log.py)
    return decoded
