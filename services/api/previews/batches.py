"""``POST /v1/batches?preview=true`` (docs/api.md#previewing-a-batch): a batch
the front door accepted, settled as the workers would settle it now, and
nothing written.

The batch is read, screened and chunked by the front door's own intake, so it
is refused with the same codes as a submission. Its chunks are decoded and
planned as a worker plans them (each chunk's lines at the positions the job
would give them), then settled in order by one ``PreviewWriter``: the ledger
writer's own rules, its later chunks finding the earlier ones' rows as a real
job's would. Nothing is stored: no job, chunk, idempotency key, ledger,
outbox or dead letter row, and no Redis lease (a lease guards a write, and
there is none).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sqlalchemy import Connection

from services.api.context import ApiContext
from services.api.errors import ApiError
from services.api.intake.ingest import Ingested
from shared.adapters.db.contracts import load_bodies
from shared.adapters.db.ledger.preview import PreviewWriter, read_only
from shared.domain.kinds import KINDS
from shared.domain.kinds.base import Kind
from shared.domain.pipeline.chunking import NewChunk
from shared.domain.pipeline.settlement import Decoded, decode_chunk, document_list, plan_chunk
from shared.domain.pipeline.units import ChunkRef, Unit, chunk_start
from shared.domain.previews import PreviewLine, Totals, digest, totals
from shared.logs import only, stage_event

log = logging.getLogger("settleq.api")

# A preview answers synchronously, every line in one body.
MAX_LINES = 10_000
# The ids of what a preview never stores: its rows name them, and are dropped.
_UNSTORED = "preview"


def wanted(request_query: Mapping[str, str]) -> bool:
    """``?preview=``: ``true`` or ``false`` (absent: false); anything else is
    refused rather than taken for a submission."""
    value = request_query.get("preview")
    if value is None or value == "false":
        return False
    if value == "true":
        return True
    raise ApiError(422, "preview_invalid", "preview must be true or false")


def preview_batch(ctx: ApiContext, batch: Ingested) -> dict[str, Any]:
    """The preview's answer (docs/api.md#previewing-a-batch): each line's
    outcome in batch order, the totals in all and per partition, and the
    digest of the rest. 413 ``preview_too_large`` above ``MAX_LINES`` lines.
    (The route refuses a reused idempotency key, or an X12 interchange another
    submission holds, as a submission does: services/api/routes/batches.py.)"""
    if batch.lines > MAX_LINES:
        raise _too_large(batch.lines)
    answer, lines = _preview(ctx, batch)
    if batch.edi is not None:
        # An X12 file's: each transaction set's settlement (a set is one
        # document), and the 997 that would accept it, not digested (its date
        # and time are the preview's; its control numbers 1, 2, ...: a
        # submission allocates its own).
        answer["documents"] = _documents(lines)
        ack = batch.edi.acknowledgement
        answer["acknowledgement"] = None if ack is None else ack.decode("utf-8", "replace")
    return answer


def _too_large(lines: int) -> ApiError:
    return ApiError(
        413,
        "preview_too_large",
        f"a preview takes at most {MAX_LINES:,} lines; this batch has {lines:,}:"
        " preview it in parts",
    )


def _documents(lines: list[PreviewLine]) -> list[dict[str, Any]]:
    """Each document's totals, in batch order (an X12 set is one document)."""
    by_document: dict[tuple[str, str | None], Totals] = {}
    for line in lines:
        by_document.setdefault((line.partition_key, line.document_id), Totals()).add(line)
    return [
        {"partition_key": pk, "document_id": d, **t.wire()} for (pk, d), t in by_document.items()
    ]


def _preview(ctx: ApiContext, batch: Ingested) -> tuple[dict[str, Any], list[PreviewLine]]:
    kind = KINDS[batch.kind]
    writer = PreviewWriter()
    lines: list[PreviewLine] = []
    # The versions read so far, parsed once for every chunk (a worker's cache).
    contracts: dict[tuple[str, int], Any] = {}
    with ctx.engine.connect() as conn:
        conn = read_only(conn)
        for chunk in batch.chunks:
            lines += writer.preview(conn, _unit(conn, kind, chunk, contracts))
    lines.sort(key=_order)
    whole, parts = totals(lines)
    answer: dict[str, Any] = {
        "preview": True,
        "kind": batch.kind,
        "lines": [line.wire() for line in lines],
        "totals": whole.wire(),
        "partitions": {pk: t.wire() for pk, t in parts.items()},
    }
    answer["digest"] = digest(answer)
    return answer, lines


def _unit(
    conn: Connection, kind: Kind[Any, Any], chunk: NewChunk, known: dict[tuple[str, int], Any]
) -> Unit:
    """A chunk as a worker would settle it (services/worker/stages.py::settle_chunk):
    decoded from its stored bytes, planned against the contract versions its
    documents pin (one the ledger lacks dead-letters them); those not in
    ``known`` are read and parsed, and kept there."""
    decoded: Decoded = decode_chunk(kind, document_list(kind), chunk.payload, chunk.lines)
    pinned = {(d.partition_key, d.contract_version) for d in decoded.documents}
    missing = pinned - known.keys()
    if missing:
        bodies = load_bodies(conn, kind.name, missing)
        known.update({k: kind.contract_model.model_validate(b) for k, b in bodies.items()})
    contracts = {k: known[k] for k in pinned if k in known}
    plan = plan_chunk(kind, decoded.documents, contracts, chunk_start(chunk.seq))
    plan.failed_documents += decoded.failures
    ref = ChunkRef(_UNSTORED, _UNSTORED, kind.name, chunk.lines)
    return Unit(ref, plan, 1)


def _order(line: PreviewLine) -> tuple[bool, int]:
    # Every line has its position: the front door validated each document, so
    # none fails to decode; one that did would follow, in settlement order.
    return (line.position is None, line.position or 0)


def log_preview(answer: dict[str, Any], batch: Ingested, key_id: str, started: float) -> None:
    """The front door's one event per preview, as ``accept`` is per batch:
    nothing is stored, so it has no job id."""
    counts = answer["totals"]
    stage_event(
        log,
        "preview",
        started=started,
        job_id=None,
        chunk_id=None,
        partition_key=only(batch.partitions),
        correlation_id=None,
        status="previewed",
        key_id=key_id,
        kind=batch.kind,
        partitions=len(batch.partitions),
        documents=batch.documents,
        lines=batch.lines,
        chunks=batch.chunks_total,
        outcomes={o: counts[o] for o in ("posted", "disputed", "duplicate", "dead_lettered")},
        digest=answer["digest"],
    )
