"""Accepting a batch (SPEC §4.1): parse, scope, chunk, store, enqueue with confirms.

A job is stored as ``receiving`` with its chunks, each chunk is published and
confirmed by RabbitMQ, and only then is the job ``accepted`` and 202 answered.
If publishing fails the stored job is withdrawn and the producer gets 503:
workers refuse chunks of a ``receiving`` job, so nothing of it can settle.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from services.api.context import ApiContext
from services.api.errors import ApiError, validation_error
from shared.broker import enqueue
from shared.chunking import NewChunk, build_chunks
from shared.db import jobs as jobs_db
from shared.kinds import BATCH, KINDS
from shared.kinds.base import Document
from shared.messages import FAST_PATH, VALIDATE_ACTOR, ChunkMessage
from shared.settings import ProducerKey

JSON = "application/json"
NDJSON = "application/x-ndjson"


@dataclass(frozen=True)
class Submitted:
    job_id: str
    documents: int
    lines: int
    chunks: int
    created: bool  # False: the same submission seen before (200, not 202)


def parse_batch(body: bytes, content_type: str) -> tuple[str, list[Document]]:
    """Decode and validate a batch; raise ``ApiError`` 415/422."""
    media = content_type.split(";")[0].strip().lower()
    try:
        if media == JSON:
            batch = BATCH.validate_json(body)
            return batch.kind, list(batch.documents)
        if media == NDJSON:
            return _parse_ndjson(body)
    except ValidationError as exc:
        raise validation_error(list(exc.errors())) from None
    raise ApiError(415, "unsupported_media_type", f"content type must be {JSON} or {NDJSON}")


def _parse_ndjson(body: bytes) -> tuple[str, list[Document]]:
    lines = [line for line in body.split(b"\n") if line.strip()]
    if not lines:
        raise ApiError(422, "empty_batch", "an NDJSON batch needs a header line and documents")
    try:
        header = json.loads(lines[0])
    except ValueError:
        raise ApiError(422, "json_invalid", "the first NDJSON line is not JSON") from None
    name = header.get("kind") if isinstance(header, dict) else None
    kind = KINDS.get(name) if isinstance(name, str) else None
    if kind is None or set(header) != {"kind"}:
        raise ApiError(422, "unknown_kind", 'the first NDJSON line must be {"kind": "<kind>"}')
    if len(lines) < 2:
        raise ApiError(422, "empty_batch", "an NDJSON batch needs at least one document")
    documents = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            documents.append(kind.document_model.model_validate_json(line))
        except ValidationError as exc:
            err = validation_error(list(exc.errors()))
            for d in err.details:
                d["loc"] = [f"line {number}", *d["loc"]]
            raise err from None
    return kind.name, documents


def _check_scope(key: ProducerKey, documents: Sequence[Document]) -> None:
    refused = sorted(
        {d.partition_key for d in documents if not key.may_submit_for(d.partition_key)}
    )
    if refused:
        raise ApiError(
            403,
            "partition_not_allowed",
            f"key {key.key_id} may not submit for {len(refused)} partition(s)",
            [{"partition_key": p} for p in refused[:20]],
        )


def _build_chunks(ctx: ApiContext, kind_name: str, documents: Sequence[Document]) -> list[NewChunk]:
    kind = KINDS[kind_name]
    # Correlation ids are fixed here, once, so every retry and event carries the same one.
    serialized = [
        (d if d.correlation_id else d.model_copy(update={"correlation_id": uuid.uuid4().hex}))
        .model_dump_json()
        .encode()
        for d in documents
    ]
    return build_chunks(
        serialized,
        [kind.line_count(d) for d in documents],
        ctx.settings.max_chunk_documents,
        ctx.settings.max_chunk_bytes,
    )


def publish_job(ctx: ApiContext, job_id: str, kind_name: str) -> None:
    """Enqueue every stored chunk of a job with publisher confirms, then accept it."""
    key = ctx.internal_key
    queue = ctx.settings.queue_name(FAST_PATH)
    for chunk_id, payload_sha256 in jobs_db.stored_chunks(ctx.engine, job_id):
        message = ChunkMessage(chunk_id, job_id, kind_name, payload_sha256)
        enqueue(ctx.broker, queue, VALIDATE_ACTOR, message.signed(key))
    jobs_db.mark_accepted(ctx.engine, job_id)


def submit(
    ctx: ApiContext, key: ProducerKey, body: bytes, content_type: str, idempotency_key: str | None
) -> Submitted:
    body_sha = hashlib.sha256(body).hexdigest()
    idem = idempotency_key or body_sha
    existing = jobs_db.find_job(ctx.engine, key.key_id, idem)
    if existing is not None:
        return _resubmitted(ctx, existing, body_sha)
    kind_name, documents = parse_batch(body, content_type)
    _check_scope(key, documents)
    ctx.internal_key  # noqa: B018 - fail with 503 before storing anything if the DB is down
    kind = KINDS[kind_name]
    new = jobs_db.NewJob(
        id=uuid.uuid4().hex,
        key_id=key.key_id,
        idempotency_key=idem,
        body_sha256=body_sha,
        kind=kind_name,
        documents=len(documents),
        lines=sum(kind.line_count(d) for d in documents),
        partition_keys=[d.partition_key for d in documents],
        chunks=_build_chunks(ctx, kind_name, documents),
    )
    if not jobs_db.create_job(ctx.engine, new):
        # Lost a race with the same submission: answer as its repeat.
        raced = jobs_db.find_job(ctx.engine, key.key_id, idem)
        if raced is None:
            raise ApiError(409, "submission_conflict", "retry the submission")
        return _resubmitted(ctx, raced, body_sha)
    try:
        publish_job(ctx, new.id, kind_name)
    except Exception:
        jobs_db.discard_unaccepted(ctx.engine, new.id)
        raise
    return Submitted(new.id, new.documents, new.lines, len(new.chunks), created=True)


def _resubmitted(ctx: ApiContext, job: jobs_db.ExistingJob, body_sha: str) -> Submitted:
    if job.body_sha256 != body_sha:
        raise ApiError(
            409,
            "idempotency_key_reused",
            "this Idempotency-Key was used with a different body",
        )
    if job.state == "receiving":
        # An earlier attempt stored the job but did not finish enqueueing (it
        # crashed or is still at it): finish it. Chunk markers make repeats harmless.
        publish_job(ctx, job.id, job.kind)
    return Submitted(job.id, job.documents, job.lines, job.chunks_total, created=False)


def response_body(s: Submitted) -> dict[str, Any]:
    return {
        "job_id": s.job_id,
        "status_url": f"/v1/jobs/{s.job_id}",
        "documents": s.documents,
        "lines": s.lines,
        "chunks": s.chunks,
    }
