"""Requeueing dead letters (docs/api.md#dead-letters-and-the-audit-log): each one at most once per
request that wins it.

The dead letter is marked ``requeued`` (a conditional update: of two identical
requests only one wins), the audit entry is written in the same transaction,
and then its message is published with confirms. If publishing fails the mark
is undone and the caller gets 503.
"""

from __future__ import annotations

from services.api.context import ApiContext
from shared.adapters.broker import enqueue
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db.stored_chunk import chunk_digest
from shared.domain.messages import FAST_PATH, MAX_PRIORITY, VALIDATE_ACTOR, ChunkMessage


def requeue_one(ctx: ApiContext, actor: str, dead_letter_id: int) -> bool:
    """Requeue one dead letter; False when it is not ``dead`` (any more)."""
    with ctx.engine.begin() as conn:
        marked = dl_db.mark_requeued(conn, dead_letter_id)
        if marked is None:
            return False
        digest = chunk_digest(conn, marked.chunk_id)
        dl_db.audit(
            conn,
            actor,
            "dead_letter.requeue",
            f"dead_letter:{dead_letter_id}",
            {"job_id": marked.job_id, "requeue": marked.requeues},
        )
    message = ChunkMessage(
        marked.chunk_id, marked.job_id, marked.kind, digest, marked.id, marked.requeues
    )
    try:
        # On a publishing thread, not this request's: a connection made on a
        # request thread would sit unserviced (and leak when the thread ends).
        ctx.publishers.submit(
            enqueue,
            ctx.broker,
            ctx.settings.queue_for(FAST_PATH, MAX_PRIORITY),
            VALIDATE_ACTOR,
            message.signed(ctx.internal_key),
        ).result()
    except Exception:
        with ctx.engine.begin() as conn:
            dl_db.unmark_requeued(conn, dead_letter_id, marked.requeues)
            dl_db.audit(
                conn,
                actor,
                "dead_letter.requeue_failed",
                f"dead_letter:{dead_letter_id}",
                {"reason": "broker_unavailable"},
            )
        raise
    return True


def requeue_matching(ctx: ApiContext, actor: str, where: dl_db.Filter, limit: int) -> int:
    count = 0
    for dead_letter_id in dl_db.ids_matching(ctx.engine, where, limit):
        count += requeue_one(ctx, actor, dead_letter_id)
    return count
