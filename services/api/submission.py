"""Accepting a batch (docs/architecture.md#front-door): store, enqueue with confirms, then accept.

A job is stored as ``receiving`` with its chunks, each chunk is published and
confirmed by RabbitMQ, and only then is the job ``accepted`` and 202 answered.
If publishing fails the stored job is withdrawn and the producer gets 503:
workers refuse chunks of a ``receiving`` job, so nothing of it can settle.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from services.api.context import ApiContext
from services.api.edi_submission import accepted_before, edi_record
from services.api.errors import ApiError
from services.api.ingest import Ingested
from shared.adapters.broker import enqueue
from shared.adapters.db import jobs as jobs_db
from shared.domain.messages import FAST_PATH, VALIDATE_ACTOR, ChunkMessage, priority_for
from shared.settings import ProducerKey


@dataclass(frozen=True)
class Submitted:
    job_id: str
    documents: int
    lines: int
    chunks: int
    created: bool  # False: the same submission seen before (200, not 202)


def publish_job(ctx: ApiContext, job_id: str, kind_name: str, lines: int) -> None:
    """Enqueue every stored chunk of a job with publisher confirms, then accept it."""
    key = ctx.internal_key
    queue = ctx.settings.queue_name(FAST_PATH)
    priority = priority_for(lines)

    def publish(chunk: tuple[str, str]) -> None:
        message = ChunkMessage(chunk[0], job_id, kind_name, chunk[1], priority=priority)
        enqueue(ctx.broker, queue, VALIDATE_ACTOR, message.signed(key), priority)

    # Each publisher thread has its own channel and waits for its own confirms,
    # so a job's chunks are confirmed several at a time.
    list(ctx.publishers.map(publish, jobs_db.stored_chunks(ctx.engine, job_id)))
    jobs_db.mark_accepted(ctx.engine, job_id)


def previous_submission(
    ctx: ApiContext, key: ProducerKey, idempotency_key: str, body_sha256: str
) -> Submitted | None:
    """The job this submission repeats, if any (docs/api.md#idempotency)."""
    existing = jobs_db.find_job(ctx.engine, key.key_id, idempotency_key)
    return None if existing is None else _resubmitted(ctx, existing, body_sha256)


def _repeated(
    ctx: ApiContext, key: ProducerKey, batch: Ingested, idempotency_key: str
) -> Submitted | None:
    """The job this submission repeats: by its idempotency key, or (X12) by its
    interchanges, whatever its key. An X12 file's interchanges are its identity
    first (docs/api.md#edi-intake): one received before as part of another
    submission is 409 ``edi_duplicate_interchange``, not a reused key."""
    if batch.edi is not None:
        job = accepted_before(ctx, key, batch)
        if job is not None:
            return _resubmitted(ctx, job, batch.body_sha256)
    return previous_submission(ctx, key, idempotency_key, batch.body_sha256)


def submit(ctx: ApiContext, key: ProducerKey, batch: Ingested, idempotency_key: str) -> Submitted:
    existing = _repeated(ctx, key, batch, idempotency_key)
    if existing is not None:
        return existing
    ctx.internal_key  # noqa: B018 - fail with 503 before storing anything if the DB is down
    edi = None if batch.edi is None else edi_record(batch)
    new = jobs_db.NewJob(
        id=uuid.uuid4().hex,
        key_id=key.key_id,
        idempotency_key=idempotency_key,
        body_sha256=batch.body_sha256,
        kind=batch.kind,
        documents=batch.documents,
        lines=batch.lines,
        partition_keys=sorted(batch.partitions),
        chunks=batch.chunks,
        source_format=batch.source_format,
        edi=edi,
    )
    if not jobs_db.create_job(ctx.engine, new):
        # Lost a race with the same submission: answer as its repeat (or, for
        # an X12 interchange stored first with other bytes, 409).
        raced = _repeated(ctx, key, batch, idempotency_key)
        if raced is None:
            raise ApiError(409, "submission_conflict", "retry the submission")
        return raced
    try:
        publish_job(ctx, new.id, batch.kind, new.lines)
    except Exception:
        jobs_db.discard_unaccepted(ctx.engine, new.id)
        raise
    return Submitted(new.id, new.documents, new.lines, len(new.chunks), created=True)


def _resubmitted(ctx: ApiContext, job: jobs_db.ExistingJob, body_sha: str) -> Submitted:
    if job.body_sha256 != body_sha:
        raise ApiError(
            409, "idempotency_key_reused", "this Idempotency-Key was used with a different body"
        )
    if job.state == "receiving":
        # An earlier attempt stored the job but did not finish enqueueing (it
        # crashed or is still at it): finish it. Chunk markers make repeats harmless.
        publish_job(ctx, job.id, job.kind, job.lines)
    return Submitted(job.id, job.documents, job.lines, job.chunks_total, created=False)


def response_body(s: Submitted, batch: Ingested) -> dict[str, Any]:
    body: dict[str, Any] = {
        "job_id": s.job_id,
        "status_url": f"/v1/jobs/{s.job_id}",
        "documents": s.documents,
        "lines": s.lines,
        "chunks": s.chunks,
    }
    if batch.edi is not None:
        # The sets of the file not settled, and why (an 810 without an allowance).
        body["skipped"] = [
            {"control_number": k.control_number, "reason": k.reason} for k in batch.edi.skipped
        ]
        body["acknowledgement_url"] = f"/v1/jobs/{s.job_id}/acknowledgement"
    return body
