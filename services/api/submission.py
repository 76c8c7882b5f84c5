"""Accepting a batch (docs/architecture.md#front-door): store, enqueue with confirms, then accept.

A job is stored as ``receiving`` with its chunks, each chunk is published and
confirmed by RabbitMQ, and only then is the job ``accepted`` and 202 answered.
If publishing fails the stored job is withdrawn and the producer gets 503:
workers refuse chunks of a ``receiving`` job, so nothing of it can settle.

A JSON or NDJSON batch was chunked while it streamed in (a slow upload holds
no transaction) and is stored in one short transaction (``submit``); an X12
file is mapped once received, its chunks stored as they are built, in one
transaction committed after the last (``submit_file``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from services.api.context import ApiContext
from services.api.edi.ingest import EdiFile, EdiIngest
from services.api.edi.submission import accepted_before
from services.api.errors import ApiError
from services.api.intake.ingest import Ingested
from services.api.intake.job_store import Discard, open_store
from shared.adapters.db.jobs import intake as jobs_db
from shared.adapters.db.jobs.writer import JobHead, JobTotals, Raced
from shared.adapters.rabbitmq.broker import enqueue
from shared.config.settings import ProducerKey
from shared.domain.pipeline.messages import FAST_PATH, VALIDATE_ACTOR, ChunkMessage, priority_for


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
    priority = priority_for(lines)
    queue = ctx.settings.queue_for(FAST_PATH, priority)

    def publish(chunk: tuple[str, str]) -> None:
        message = ChunkMessage(chunk[0], job_id, kind_name, chunk[1], priority=priority)
        enqueue(ctx.broker, queue, VALIDATE_ACTOR, message.signed(key), priority)

    # Each publisher thread has its own channel and waits for its own confirms,
    # so a job's chunks are confirmed several at a time.
    list(ctx.publishers.map(publish, jobs_db.stored_chunks(ctx.engine, job_id)))
    jobs_db.mark_accepted(ctx.engine, job_id)


def previous_job(
    ctx: ApiContext,
    key: ProducerKey,
    idempotency_key: str,
    body_sha256: str,
    file: EdiFile | None = None,
) -> jobs_db.ExistingJob | None:
    """The job this submission repeats, if any (docs/api.md#idempotency): by
    its idempotency key, or (X12) by its interchanges, whatever its key. An X12
    file's interchanges are its identity first (docs/api.md#edi-intake): one
    received before as part of another submission is 409
    ``edi_duplicate_interchange``, not a reused key."""
    if file is not None:
        job = accepted_before(ctx, key, file)
        if job is not None:
            return job
    job = jobs_db.find_job(ctx.engine, key.key_id, idempotency_key)
    if job is None:
        return None
    same = file.repeats(job.body_sha256) if file is not None else job.body_sha256 == body_sha256
    if not same:
        raise ApiError(
            409, "idempotency_key_reused", "this Idempotency-Key was used with a different body"
        )
    return job


def _repeated(
    ctx: ApiContext,
    key: ProducerKey,
    idempotency_key: str,
    body_sha256: str,
    file: EdiFile | None = None,
) -> Submitted | None:
    job = previous_job(ctx, key, idempotency_key, body_sha256, file)
    return None if job is None else _resubmitted(ctx, job)


def submit(ctx: ApiContext, key: ProducerKey, batch: Ingested, idempotency_key: str) -> Submitted:
    """A JSON or NDJSON batch, validated and chunked while it streamed in."""
    existing = _repeated(ctx, key, idempotency_key, batch.body_sha256)
    if existing is not None:
        return existing
    ctx.internal_key  # noqa: B018 - fail with 503 before storing anything if the DB is down
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
    )
    if not jobs_db.create_job(ctx.engine, new):
        # Lost a race with the same submission: answer as its repeat.
        raced = _repeated(ctx, key, idempotency_key, batch.body_sha256)
        if raced is None:
            raise ApiError(409, "submission_conflict", "retry the submission")
        return raced
    _publish_new(ctx, new.id, batch)
    return Submitted(new.id, new.documents, new.lines, len(new.chunks), created=True)


def submit_file(
    ctx: ApiContext, key: ProducerKey, ingest: EdiIngest, idempotency_key: str | None
) -> tuple[Submitted, Ingested]:
    """An X12 file (``EdiRefused`` when refused for its content): read, then
    either a repeat (200, nothing stored) or mapped into a new job whose chunks
    are stored as they are built, in one transaction committed only once the
    whole file was mapped and accepted (services/api/intake/job_store.py)."""
    try:
        return _submit_file(ctx, key, ingest, idempotency_key)
    finally:
        ingest.close()  # its mapping children, however the request ended


def preview_file(
    ctx: ApiContext, key: ProducerKey, ingest: EdiIngest, idempotency_key: str | None
) -> Ingested:
    """An X12 file read, checked and mapped as ``submit_file`` reads, checks and
    maps it, into nothing (docs/api.md#previewing-a-batch): ``EdiRefused`` for
    its content, 409 ``edi_duplicate_interchange`` for an interchange another
    submission holds, 409 ``idempotency_key_reused``; a repeat is previewed."""
    try:
        file = ingest.read()
        key_used = idempotency_key or file.file_sha256
        previous_job(ctx, key, key_used, file.submission_sha256, file)
        return ingest.finish()
    finally:
        ingest.close()


def _submit_file(
    ctx: ApiContext, key: ProducerKey, ingest: EdiIngest, idempotency_key: str | None
) -> tuple[Submitted, Ingested]:
    file = ingest.read()
    key_used = idempotency_key or file.file_sha256
    body_sha256 = file.submission_sha256
    # Decided before the file is mapped: a 409 costs no mapping, and a repeat
    # opens no transaction. A repeat is still mapped (into nothing) so that
    # it is refused, or answered with its skipped sets, as the first time.
    previous = previous_job(ctx, key, key_used, body_sha256, file)
    if previous is not None:
        batch = ingest.finish(Discard())
        return _resubmitted(ctx, previous), batch
    ctx.internal_key  # noqa: B018 - fail with 503 before storing anything if the DB is down
    head = JobHead(
        id=uuid.uuid4().hex,
        key_id=key.key_id,
        idempotency_key=key_used,
        body_sha256=body_sha256,
        kind="",  # the mapping names it (JobStore.begin)
        source_format="x12",
        senders=file.senders,
        file_sha256=file.file_sha256,
    )
    store = open_store(ctx.engine, head)
    try:
        batch = ingest.finish(store)
        assert batch.edi is not None
        totals = JobTotals(
            batch.documents,
            batch.lines,
            batch.chunks_total,
            batch.partitions,
            batch.edi.acknowledgement,
        )
        store.commit(totals)
    except Raced:
        # Another request stored this idempotency key or an interchange of
        # this file first (``commit`` tells, once the file was mapped whole):
        # answer as its repeat, or 409.
        store.abort()
        raced = _repeated(ctx, key, key_used, body_sha256, file)
        if raced is None:
            raise ApiError(409, "submission_conflict", "retry the submission") from None
        return raced, batch
    except BaseException:
        store.abort()  # a refused file stores nothing
        raise
    _publish_new(ctx, head.id, batch)
    return Submitted(head.id, batch.documents, batch.lines, batch.chunks_total, created=True), batch


def _publish_new(ctx: ApiContext, job_id: str, batch: Ingested) -> None:
    try:
        publish_job(ctx, job_id, batch.kind, batch.lines)
    except Exception:
        jobs_db.discard_unaccepted(ctx.engine, job_id)
        raise


def _resubmitted(ctx: ApiContext, job: jobs_db.ExistingJob) -> Submitted:
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
        # None when the partner's profile asks for no 997 of an accepted file.
        body["acknowledgement_url"] = (
            f"/v1/jobs/{s.job_id}/acknowledgement"
            if batch.edi.acknowledgement is not None
            else None
        )
    return body
