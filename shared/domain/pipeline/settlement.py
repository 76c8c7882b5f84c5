"""Decode and plan a chunk's settlement: pure, no I/O.

Given the stored chunk bytes and the contracts that exist, decide for every
line whether it settles (and to what) or is dead-lettered, and with which
reason. A document that cannot be decoded or settled is isolated: it is
dead-lettered alone and the rest of the chunk goes on. Whether a settled line
posts or is a duplicate is decided later, by the ledger's unique constraint.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import cache
from typing import Any

import msgspec
from pydantic import TypeAdapter, ValidationError

from shared.domain.kinds.base import Document, Kind, Line, Settlement
from shared.errors import BusinessError, StructuralError

# NUMERIC(20,4) holds 16 integer digits.
LEDGER_LIMIT = Decimal(10) ** 16


# Made per line and kept until the commit: a dataclass is a GC-tracked object, and
# thousands of survivors per chunk set off full collections of the whole heap. A
# planned line never refers back to itself (a document, a line, a settlement), so
# it can stay out of the collector.
class PlannedLine(msgspec.Struct, gc=False):
    document: Document
    line: Line
    settlement: Settlement | None  # None: dead-lettered with ``reason``
    reason: str | None = None
    message: str = ""
    index: int = -1  # the line's position among its document's lines (a requeue names it)
    # Its position in the batch (``units.chunk_start``): the job's lines page lists
    # lines in this order. None where it cannot be known (docs/api.md#jobs).
    position: int | None = None


@dataclass(frozen=True, slots=True)
class DocumentFailure:
    """Every line of one document (or of an unreadable chunk) dead-lettered at once."""

    document: Document | None  # None: the bytes could not be decoded
    lines: list[Line]  # per-line outcomes; empty when undecodable
    reason: str
    message: str
    error_class: str = "BusinessError"
    line_count: int | None = None  # lines covered, when ``lines`` cannot say
    payload: str | None = None  # the undecodable bytes, for the operator
    document_id: str | None = None
    partition_key: str = ""
    # Set when the failure covers one line only (a requeued line failing again at
    # document level): its dead letter stays that line's.
    line_ref: str | None = None
    line_index: int | None = None
    position: int | None = None  # the batch position of ``lines[0]``; the rest follow it

    @property
    def covered(self) -> int:
        return len(self.lines) if self.line_count is None else self.line_count

    def dead_letter_payload(self) -> str:
        if self.document is not None:
            return document_json(self.document)
        return self.payload or ""


def document_json(document: Document) -> str:
    """A decoded document as JSON (a dead letter's payload), whichever decoder
    made it: the kind's model or its settle decoder (a msgspec struct)."""
    if isinstance(document, msgspec.Struct):
        return msgspec.json.encode(document).decode()
    return document.model_dump_json()


def document_with(document: Document, **changes: Any) -> Document:
    """A decoded document with some fields changed, whichever decoder made it."""
    if isinstance(document, msgspec.Struct):
        return msgspec.structs.replace(document, **changes)
    return document.model_copy(update=changes)


def with_correlation_id(document: Document, correlation_id: str) -> Document:
    return document_with(document, correlation_id=correlation_id)


@cache
def document_list(kind: Kind[Any, Any]) -> TypeAdapter[Any]:
    """A list of the kind's documents (a chunk's), built once a kind (not at
    import: the registry is read when a unit names its kind, so any kind in it
    is known)."""
    return TypeAdapter(list[kind.document_model])  # type: ignore[name-defined]


@dataclass
class ChunkPlan:
    lines: list[PlannedLine] = field(default_factory=list)
    failed_documents: list[DocumentFailure] = field(default_factory=list)

    def claim_keys(self) -> list[tuple[str, int]]:
        """(reconciliation_key, contract_version) of every line that may post."""
        return sorted((key, v) for v, keys in self.claim_keys_by_version().items() for key in keys)

    def claim_keys_by_version(self) -> dict[int, set[str]]:
        """The reconciliation keys of every line that may post, per contract version
        (strings in sets: no (key, version) tuple made per line)."""
        by_version: dict[int, set[str]] = {}
        keys: set[str] = set()
        doc = None
        for p in self.lines:
            if p.settlement is None:
                continue
            if p.document is not doc:  # a document's lines are consecutive
                doc = p.document
                keys = by_version.setdefault(doc.contract_version, set())
            keys.add(p.line.reconciliation_key)
        return by_version


def _settle_document(
    kind: Kind[Any, Any], document: Document, contract: Any, plan: ChunkPlan, first: int | None
) -> int:
    """Plan one document whose first line is at batch position ``first``; its line count."""
    lines = kind.lines(document)
    if contract is None:
        plan.failed_documents.append(
            DocumentFailure(
                document,
                lines,
                "unknown_contract_version",
                f"no {kind.name} contract {document.partition_key} "
                f"version {document.contract_version}",
                position=first,
            )
        )
        return len(lines)
    try:
        kind.check_document(document, contract)
    except BusinessError as exc:
        plan.failed_documents.append(
            DocumentFailure(document, lines, exc.reason, str(exc), position=first)
        )
        return len(lines)
    settle = kind.settle
    planned: list[PlannedLine] = []
    append = planned.append
    for index, line in enumerate(lines):
        position = None if first is None else first + index
        try:
            settlement = settle(document, line, contract)
            if abs(settlement.amount) >= LEDGER_LIMIT:
                raise BusinessError(
                    "amount_out_of_range", "the modelled amount does not fit the ledger"
                )
        except BusinessError as exc:
            append(PlannedLine(document, line, None, exc.reason, str(exc), index, position))
        else:
            # Positional: keyword arguments cost more, and this runs once per line.
            append(PlannedLine(document, line, settlement, None, "", index, position))
    plan.lines.extend(planned)
    return len(lines)


def plan_chunk(
    kind: Kind[Any, Any],
    documents: Sequence[Document],
    contracts: Mapping[tuple[str, int], Any],
    start: int | None = None,
) -> ChunkPlan:
    """Plan a unit's documents; ``start`` is the batch position of its first line
    (``units.chunk_start``), the others follow in document, then line order."""
    plan = ChunkPlan()
    position = start
    for document in documents:
        try:
            used = _settle_document(
                kind,
                document,
                contracts.get((document.partition_key, document.contract_version)),
                plan,
                position,
            )
        except Exception as exc:  # a poison document: isolate it, settle the rest
            used = kind.line_count(document)
            plan.failed_documents.append(
                DocumentFailure(
                    document,
                    [],
                    "internal_error",
                    f"{type(exc).__name__}: {exc}"[:2000],
                    error_class=type(exc).__name__,
                    line_count=used,
                    position=position,
                )
            )
        if position is not None:
            position += used
    return plan


def plan_failure(
    kind: Kind[Any, Any],
    documents: Sequence[Document],
    reason: str,
    error_class: str,
    message: str,
    start: int | None = None,
) -> ChunkPlan:
    """Dead-letter every document of a chunk (e.g. ``retries_exhausted``)."""
    plan = ChunkPlan()
    position = start
    for d in documents:
        lines = kind.lines(d)
        plan.failed_documents.append(
            DocumentFailure(d, lines, reason, message, error_class, position=position)
        )
        if position is not None:
            position += len(lines)
    return plan


def unreadable(
    payload: bytes,
    lines: int,
    reason: str,
    message: str,
    error_class: str = "StructuralError",
    start: int | None = None,
) -> ChunkPlan:
    """A chunk whose bytes cannot be trusted or read: one dead letter for all its lines."""
    return ChunkPlan(
        failed_documents=[
            DocumentFailure(
                None,
                [],
                reason,
                message,
                error_class,
                line_count=lines,
                payload=payload.decode("utf-8", "replace"),
                position=start,
            )
        ]
    )


@dataclass
class Decoded:
    documents: list[Document]
    failures: list[DocumentFailure]


def decode_chunk(
    kind: Kind[Any, Any], adapter: TypeAdapter[Any], payload: bytes, expected_lines: int
) -> Decoded:
    """Decode a chunk's JSON array of documents, isolating documents that fail.

    Raises ``StructuralError('schema_invalid')`` when the bytes are not a JSON
    array at all. The lines of undecodable documents are whatever the chunk
    held beyond its readable documents, so the job's counts still add up.
    """
    if kind.settle_decoder is not None:
        # The kind's C-speed reading (a strict subset of its model, same values);
        # a chunk it does not vouch for is read by the model.
        documents = kind.settle_decoder(payload)
        if documents is not None:
            return Decoded(documents, [])
    try:
        return Decoded(list(adapter.validate_json(payload)), [])
    except ValidationError:
        pass
    try:
        items = json.loads(payload)
    except ValueError:
        raise StructuralError("schema_invalid", "chunk payload is not JSON") from None
    if not isinstance(items, list):
        raise StructuralError("schema_invalid", "chunk payload is not a list of documents")
    decoded = Decoded([], [])
    bad: list[tuple[Any, str]] = []
    for item in items:
        try:
            decoded.documents.append(kind.document_model.model_validate_json(json.dumps(item)))
        except ValidationError as exc:
            bad.append((item, str(exc)[:2000]))
    remaining = expected_lines - sum(kind.line_count(d) for d in decoded.documents)
    for index, (item, message) in enumerate(bad):
        fields = item if isinstance(item, dict) else {}
        estimate = len(fields["lines"]) if isinstance(fields.get("lines"), list) else 0
        count = remaining if index == len(bad) - 1 else min(estimate, remaining)
        remaining -= count
        decoded.failures.append(
            DocumentFailure(
                None,
                [],
                "schema_invalid",
                message,
                "StructuralError",
                line_count=count,
                payload=json.dumps(item)[:1_000_000],
                document_id=_text(fields.get("document_id")),
                partition_key=_text(fields.get("partition_key")) or "",
            )
        )
    return decoded


def _text(value: Any) -> str | None:
    return value[:128] if isinstance(value, str) else None
