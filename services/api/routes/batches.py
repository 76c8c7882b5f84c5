"""``POST /v1/batches``: the front door (docs/api.md#submitting-a-batch)."""

from __future__ import annotations

import datetime as dt
import logging
import time
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import TypeAdapter
from sqlalchemy.exc import SQLAlchemyError

from services.api.auth import Ctx, producer_verifier
from services.api.context import ApiContext
from services.api.edi.ingest import EdiIngest
from services.api.edi.query import edi_query
from services.api.edi.refusal import kept, preview_997, refusal, write_997
from services.api.errors import ApiError, ErrorBody
from services.api.intake.ingest import Ingest, Ingested, media_type
from services.api.previews import batches as previews
from services.api.schemas import Accepted, BatchPreview
from services.api.submission import (
    Submitted,
    preview_file,
    previous_job,
    response_body,
    submit,
    submit_file,
)
from shared.adapters.db.edi import partners as partners_db
from shared.adapters.db.edi.partners import Refusal
from shared.config.settings import ProducerKey
from shared.domain.kinds import BATCH, KINDS
from shared.domain.kinds.ids import PartitionKey
from shared.domain.signing import SignatureError
from shared.domain.x12 import EdiRefused
from shared.logs import only, stage_event

router = APIRouter(tags=["batches"])
log = logging.getLogger("settleq.api")


# The body reaches the app in parts of up to 64 KiB; it is validated a few
# parts at a time because a hop to the thread pool and back costs more CPU
# than validating a small part.
FEED_BYTES = 1 << 20


def _idempotency_key(request: Request) -> str | None:
    value = request.headers.get("idempotency-key")
    if value is None:
        return None
    if not 1 <= len(value) <= 255 or not value.isprintable():
        raise ApiError(
            422, "idempotency_key_invalid", "Idempotency-Key must be 1-255 printable characters"
        )
    return value


_errors: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in {
        401: "signature missing, invalid, stale or of an unknown key",
        403: (
            "a document names a partition the key may not submit for, or an X12 sender's"
            " trading-partner profile names the keys that may send its files and this key is"
            " not one (edi_sender_not_allowed)"
        ),
        409: (
            "Idempotency-Key reused with a different body (idempotency_key_reused), or an X12"
            " interchange this key had accepted before as part of another file"
            " (edi_duplicate_interchange)"
        ),
        413: (
            "body above the configured limit (payload_too_large), or a preview of more"
            f" than {previews.MAX_LINES:,} lines (preview_too_large)"
        ),
        415: "unsupported content type",
        429: "queues are above SETTLEQ_MAX_QUEUE_DEPTH: retry after Retry-After seconds",
        422: (
            "invalid batch; an X12 file refused for its content (edi_*) carries the 997"
            " rejecting it in error.acknowledgement (null when its envelope was unreadable)"
        ),
        503: "broker or database unavailable: nothing was accepted",
    }.items()
}
_errors[200] = {
    "model": Accepted | BatchPreview,
    "description": (
        "the same submission, seen before; with preview=true, the preview"
        " (docs/api.md#previewing-a-batch)"
    ),
}


def request_body() -> tuple[dict[str, Any], dict[str, Any]]:
    """The body's OpenAPI description and the component schemas it refers to, of
    the kinds registered now (``app.openapi`` asks when it writes the document,
    so a kind registered after import is in it). The body is read raw (its exact
    bytes are signed) and validated by the kinds' own models (``BATCH``)."""
    schema = BATCH.json_schema(ref_template="#/components/schemas/{model}")
    components: dict[str, Any] = schema.pop("$defs", {})
    x12 = " or ".join(f"{k.x12_set}s ({k.name})" for k in KINDS.values() if k.x12_set)
    body = {
        "required": True,
        "content": {
            "application/json": {"schema": schema},
            "application/x-ndjson": {
                "schema": {
                    "type": "string",
                    "description": 'first line {"kind": ...}, then one document per line',
                }
            },
            "application/edi-x12": {
                "schema": {
                    "type": "string",
                    "description": (
                        f"an ANSI X12 file of {x12}, as the trading partner sent it"
                        " (docs/api.md#edi-intake)"
                    ),
                }
            },
        },
    }
    return body, components


def _query_parameter(name: str, schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


# As the documents' own (shared.domain.kinds.base.Identifier).
_IDENTIFIER = {
    "type": "string",
    "minLength": 1,
    "maxLength": 128,
    "pattern": r"^[^\x00-\x1f\x7f-\x9f|]+$",
}
# Read by services/api/edi/query.py::edi_query (checked whenever given) and
# services/api/previews/batches.py::wanted.
_QUERY = [
    _query_parameter(
        "contract_version",
        {"type": "integer", "minimum": 1, "maximum": 2**31 - 1},
        "application/edi-x12: the contract version every document of the file settles"
        " under (else the sender's trading-partner profile's; edi_partner_unknown without"
        " one; ignored for JSON, whose documents carry theirs)",
    ),
    _query_parameter(
        "partition_key",
        # As a document's partition_key (shared/domain/kinds/ids.py).
        TypeAdapter(PartitionKey).json_schema(),
        "application/edi-x12, 810s: the vendor (else the sender's profile's, else REF*IA,"
        " REF*VN or the N1 VN/SU/SE's id)",
    ),
    _query_parameter(
        "period",
        _IDENTIFIER,
        "application/edi-x12, 810s: the period (else the sender's profile's, else BIG-01's"
        " quarter)",
    ),
    _query_parameter(
        "preview",
        {"type": "boolean", "default": False},
        "true: answer what submitting this batch now would do, line by line, and store"
        f" nothing (at most {previews.MAX_LINES:,} lines: docs/api.md#previewing-a-batch)",
    ),
]


def _new_ingest(ctx: ApiContext, request: Request, key: Any, preview: bool) -> Ingest:
    media = media_type(request.headers.get("content-type", ""))
    query = edi_query(request.query_params, media)
    if query is None:
        return Ingest(ctx.settings, key, media)
    return EdiIngest(
        ctx.settings,
        key,
        media,
        query=query,
        # A preview's 997 takes no control numbers from the sequence.
        acknowledge=preview_997 if preview else partial(write_997, ctx),
        partner=partial(partners_db.get, ctx.engine),
    )


def _submit_file(
    ctx: ApiContext, key: ProducerKey, ingest: EdiIngest, idempotency_key: str | None
) -> tuple[Submitted, Ingested]:
    try:
        return submit_file(ctx, key, ingest, idempotency_key)
    except EdiRefused as refused:
        error = refusal(ctx, refused, ingest.acknowledge_policy != "never")
        _keep(ctx, kept(refused, key.key_id, ingest.sha.hexdigest(), error))
        raise error from None


def _preview(
    ctx: ApiContext, key: ProducerKey, ingest: Ingest, idempotency_key: str | None
) -> tuple[dict[str, Any], Ingested]:
    """What submitting the body now would do, and its batch. An X12 file is
    read and refused as a submission's, but its 997 takes no control numbers
    and its refusal is not kept in its senders' health."""
    if isinstance(ingest, EdiIngest):
        try:
            batch = preview_file(ctx, key, ingest, idempotency_key)
        except EdiRefused as refused:
            error = refusal(ctx, refused, ingest.acknowledge_policy != "never", preview_997)
            raise error from None
    else:
        batch = ingest.finish()
        if idempotency_key is not None:
            # A key used with another body is refused as a submission refuses it
            # (409); a repeat is previewed: its lines are what they are now.
            previous_job(ctx, key, idempotency_key, batch.body_sha256)
    return previews.preview_batch(ctx, batch), batch


def _keep(ctx: ApiContext, refused: list[Refusal]) -> None:
    """A refused file, for its partners' health; the 422 goes out even if the
    database cannot keep it."""
    if not refused:
        return
    try:
        partners_db.record_refusals(ctx.engine, refused, dt.datetime.now(dt.UTC))
    except SQLAlchemyError as exc:
        log.warning("a refused X12 file was not kept for its partner: %s", type(exc).__name__)


def _log_accepted(result: Submitted, partitions: set[str], key_id: str, started: float) -> None:
    """The front door's one event per batch. A batch has no chunk of its own and
    its documents each carry their own correlation id: both fields are null."""
    stage_event(
        log,
        "accept",
        started=started,
        job_id=result.job_id,
        chunk_id=None,
        partition_key=only(partitions),
        correlation_id=None,
        status="accepted" if result.created else "repeat",
        key_id=key_id,
        partitions=len(partitions),
        documents=result.documents,
        lines=result.lines,
        chunks=result.chunks,
    )


@router.post(
    "/v1/batches",
    operation_id="submitBatch",
    status_code=202,
    response_model=Accepted,
    responses=_errors,
    # The body as the registry is at import; app.openapi writes it anew.
    openapi_extra={"requestBody": request_body()[0], "parameters": _QUERY},
)
async def submit_batch(request: Request, ctx: Ctx) -> JSONResponse:
    started = time.perf_counter()
    # Header checks first: an unsigned, stale or unknown caller is refused
    # before a byte of its body is read.
    key, verifier = await producer_verifier(ctx, request)
    preview = previews.wanted(request.query_params)
    ingest = _new_ingest(ctx, request, key, preview)
    idempotency_key = _idempotency_key(request)
    # A preview queues nothing: the queues' depth does not hold it back.
    depth = 0 if preview else await run_in_threadpool(ctx.queue_depth.current)
    if depth > ctx.settings.max_queue_depth:
        # Nothing is read or stored: the producer retries the same batch later.
        raise ApiError(
            429,
            "backpressure",
            f"{depth} messages are waiting; retry later",
            headers={"Retry-After": "5"},
        )
    limit = ctx.settings.max_body_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "payload_too_large", f"body is larger than {limit} bytes")
    size = 0
    parts: list[bytes] = []
    buffered = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise ApiError(413, "payload_too_large", f"body is larger than {limit} bytes")
        parts.append(part)
        buffered += len(part)
        if buffered >= FEED_BYTES:
            # Validation runs in a thread: the event loop keeps serving other requests.
            await run_in_threadpool(ingest.feed_parts, parts, verifier.update)
            parts, buffered = [], 0
    if parts:
        await run_in_threadpool(ingest.feed_parts, parts, verifier.update)
    try:
        verifier.verify()
    except SignatureError as exc:
        raise ApiError(401, exc.code, str(exc)) from None
    if preview:
        answer, batch = await run_in_threadpool(_preview, ctx, key, ingest, idempotency_key)
        previews.log_preview(answer, batch, key.key_id, started)
        return JSONResponse(answer)
    if isinstance(ingest, EdiIngest):
        # Mapped and stored at once: its chunks go to the database as they are built.
        result, batch = await run_in_threadpool(_submit_file, ctx, key, ingest, idempotency_key)
    else:
        batch = await run_in_threadpool(ingest.finish)
        result = await run_in_threadpool(
            submit, ctx, key, batch, idempotency_key or batch.default_key
        )
    _log_accepted(result, batch.partitions, key.key_id, started)
    return JSONResponse(response_body(result, batch), status_code=202 if result.created else 200)
