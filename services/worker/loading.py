"""Which unit of work a message names: verified, fetched, and still to do.

A unit is a stored chunk, or a requeued dead letter of one (its document, or
one line of it). A message whose signature fails is recorded as a dead letter
of its chunk; one of a withdrawn or unaccepted job, a stale requeue, or a unit
already processed leaves nothing to do.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass
from typing import Any

from services.worker.context import WorkerContext
from services.worker.recording import record_tampered
from shared.adapters.db import dead_letters
from shared.adapters.db.stored_chunk import chunk_processed, load_chunk, stored_state
from shared.domain.pipeline.messages import ChunkMessage, open_message
from shared.domain.pipeline.settlement import ChunkPlan
from shared.domain.pipeline.units import ChunkRef, Requeue, chunk_start
from shared.domain.requeue.lines import restrict_to_line
from shared.errors import StructuralError, TransientError

log = logging.getLogger("settleq.worker")


@dataclass(frozen=True)
class Unit:
    message: ChunkMessage
    ref: ChunkRef
    chunk_payload: bytes
    payload: bytes  # what to decode: the chunk, or the requeued dead letter's document
    # A requeued line-level dead letter settles this one line only: its position,
    # or (stored before positions were) its line_ref and reconciliation key.
    line_ref: str | None = None
    line_index: int | None = None
    line_key: str | None = None
    # The batch position of the first line ``payload`` holds (docs/api.md#jobs);
    # None for a requeued dead letter stored before positions were.
    start: int | None = None

    def restrict(self, plan: ChunkPlan) -> ChunkPlan:
        if self.line_ref is None:
            return plan
        return restrict_to_line(plan, self.line_ref, self.line_index, self.line_key)


def load_unit(ctx: WorkerContext, raw: Any) -> Unit | None:
    """Verify and fetch a unit of work; None when there is nothing (left) to do."""
    try:
        message = open_message(ctx.internal_key, raw)
    except StructuralError as exc:
        record_tampered(ctx, raw, exc)
        return None
    with ctx.engine.connect() as conn:
        row = load_chunk(conn, message.chunk_id)
        if row is None or row.job_id != message.job_id:
            # The submission was withdrawn before its 202 (broker failure): nothing accepted.
            log.warning(
                "chunk %s of job %s is not stored; dropped", message.chunk_id, message.job_id
            )
            return None
        if not _check_accepted(ctx, conn, row.job_id):
            return None
        if message.dead_letter_id is not None:
            return _requeue_unit(ctx, conn, message, row)
        if chunk_processed(conn, row.id):
            return None
    ref = ChunkRef(chunk_id=row.id, job_id=row.job_id, kind=row.kind, lines=row.lines)
    payload = bytes(row.payload)
    return Unit(message, ref, payload, payload, start=chunk_start(row.seq))


def _check_accepted(ctx: WorkerContext, conn: Any, job_id: str) -> bool:
    """False for a submission that never got its 202; retry while it may still.

    The front door marks a job accepted as soon as the broker has confirmed all
    its chunks, so a worker that sees a chunk first usually waits milliseconds:
    it waits here (up to ``accept_wait_s``) rather than take a retry, which
    costs at least a second of the job's latency.
    """
    deadline = time.monotonic() + ctx.settings.accept_wait_s
    while True:
        stored = stored_state(conn, job_id)
        if stored is None:
            # Withdrawn: its chunks could not all be enqueued and the producer got a 503.
            log.warning("message of withdrawn job %s dropped", job_id)
            return False
        state, created = stored
        if state != "receiving":
            return True
        if (dt.datetime.now(dt.UTC) - created).total_seconds() > ctx.settings.receiving_timeout_s:
            # The producer never got its 202; its retry republishes every chunk.
            log.warning("message of unaccepted job %s dropped", job_id)
            return False
        if time.monotonic() >= deadline:
            raise TransientError("job_not_ready", "job is still being enqueued")
        conn.rollback()  # the next look needs a fresh snapshot (SQLite keeps one per transaction)
        time.sleep(0.02)


def _marked_letter(ctx: WorkerContext, conn: Any, message: ChunkMessage) -> Any:
    """The requeued dead letter as its requeue left it. A requeue publishes its
    messages before it commits (services/api/dead_letters/requeue.py): on PostgreSQL the read
    waits for that transaction; on SQLite a letter still one requeue short is
    read again for up to ``accept_wait_s``. Still short then, the requeue was
    rolled back (its batch failed to publish, or its process died): the
    message is stale."""
    letter_id = message.dead_letter_id or 0
    letter = dead_letters.load_settled(conn, letter_id)
    deadline = time.monotonic() + ctx.settings.accept_wait_s
    while (
        conn.dialect.name != "postgresql"
        and letter is not None
        and letter.status == "dead"
        and letter.requeues == message.requeue - 1
        and time.monotonic() < deadline
    ):
        conn.rollback()  # a fresh snapshot (SQLite keeps one per transaction)
        time.sleep(0.02)
        letter = dead_letters.load_settled(conn, letter_id)
    return letter


def _requeue_unit(ctx: WorkerContext, conn: Any, message: ChunkMessage, row: Any) -> Unit | None:
    letter = _marked_letter(ctx, conn, message)
    if (
        letter is None
        or letter.chunk_id != row.id
        or letter.status != "requeued"
        or letter.requeues != message.requeue
    ):
        log.warning("stale requeue of dead letter %s dropped", message.dead_letter_id)
        return None
    ref = ChunkRef(
        chunk_id=row.id,
        job_id=row.job_id,
        kind=row.kind,
        lines=letter.lines,
        requeue=Requeue(letter.id, letter.requeues, letter.lines),
    )
    if chunk_processed(conn, ref.result_id):
        return None
    chunk_payload = bytes(row.payload)
    if letter.document_id is None and letter.line_ref is None:
        payload = chunk_payload  # a chunk-level dead letter re-runs the whole stored chunk
        start: int | None = chunk_start(row.seq)
    else:
        payload = b"[" + letter.payload.encode() + b"]"
        start = _document_start(letter)
    key = None
    if letter.line_ref is not None and letter.line_index is None:
        key = dead_letters.line_key(conn, letter.id)
    return Unit(
        message, ref, chunk_payload, payload, letter.line_ref, letter.line_index, key, start
    )


def _document_start(letter: Any) -> int | None:
    """The batch position of the first line of a dead letter's document: its lines
    keep their places when requeued. A line-level dead letter holds its line's."""
    if letter.position is None:
        return None
    if letter.line_ref is None:
        return int(letter.position)
    return None if letter.line_index is None else int(letter.position - letter.line_index)
