"""Requeueing dead letters (docs/api.md#dead-letters-and-the-audit-log): each one
at most once per request that wins it, in batches.

A batch of letters is judged first: a letter in which no line would settle if
it ran again now (its pinned contract version still unpublished, or still
without the tier, accessorial or price it lacked) is not requeued but refused,
with its cause (``shared/domain/requeue/check.py``). The others are marked
``requeued`` in one conditional update (of two racing requests each letter is
won by one) with their audit entries; their messages are published with
confirms, several publishing threads at once, and only then is the batch's
transaction committed. So a batch is requeued whole or not at all: a broker
failure rolls it back (the letters stay ``dead``; the request stops with 503,
logging why), and so does a process killed before the commit. A message the
broker took for a batch rolled back is dropped by the worker, which reads its
letter only once the marking transaction has ended
(``services/worker/loading.py``): still ``dead``, it is stale.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection

from services.api.context import ApiContext
from services.api.errors import ApiError
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db.contracts import load_bodies
from shared.adapters.db.operators import audit
from shared.adapters.rabbitmq.broker import PartlyEnqueued, enqueue_many
from shared.domain.kinds import KINDS
from shared.domain.pipeline.messages import FAST_PATH, MAX_PRIORITY, VALIDATE_ACTOR, ChunkMessage
from shared.domain.pipeline.settlement import Decoded
from shared.domain.requeue.check import (
    NOT_JUDGED,
    Cause,
    LetterWork,
    decode_letter,
    pinned,
    would_fail_again,
)

log = logging.getLogger("settleq.api")

BATCH = 2000  # letters judged, marked and published per transaction
SLICES = 4  # messages of a batch published at once, one slice per publishing thread


@dataclass
class Requeueing:
    """What a requeue request did so far."""

    requeued: int = 0
    # Letters not requeued because they would fail again, by the cause's reason.
    refused: Counter[str] = field(default_factory=Counter)
    causes: dict[int, list[Cause]] = field(default_factory=dict)


def requeue_one(ctx: ApiContext, actor: str, dead_letter_id: int) -> bool:
    """Requeue one dead letter; False when it is not ``dead`` (any more).

    Raises ``ApiError`` 409 ``requeue_would_fail_again`` naming the cause when
    no line of it would settle now, and 503 when the broker did not take it."""
    done = Requeueing()
    _requeue_batch(ctx, actor, [dead_letter_id], done)
    causes = done.causes.get(dead_letter_id)
    if causes:
        raise ApiError(
            409,
            "requeue_would_fail_again",
            "requeued now, this dead letter would be dead-lettered again: "
            + "; ".join(f"{c.reason} ({c.message})" for c in causes),
            [{"reason": c.reason, "lines": c.lines, "message": c.message} for c in causes],
        )
    return done.requeued == 1


def requeue_matching(ctx: ApiContext, actor: str, where: dl_db.Filter, limit: int) -> Requeueing:
    """Requeue up to ``limit`` dead letters matching ``where``, oldest first,
    skipping (and counting) those that would fail again."""
    done = Requeueing()
    after: int | None = None
    while done.requeued < limit:
        ids = dl_db.ids_matching(ctx.engine, where, min(BATCH, limit - done.requeued), after)
        if not ids:
            break
        _requeue_batch(ctx, actor, ids, done)
        after = ids[-1]
    done.causes.clear()  # a bulk answer says how many and why, not each letter's
    if done.refused or done.requeued:
        log.info(
            "bulk requeue: %d requeued, %d refused as they would fail again %s",
            done.requeued,
            done.refused.total(),
            dict(done.refused),
        )
    return done


class _NotPublished(Exception):
    def __init__(self, letters: int, cause: BaseException) -> None:
        super().__init__(type(cause).__name__)
        self.letters = letters
        self.cause = cause


def _requeue_batch(ctx: ApiContext, actor: str, ids: Sequence[int], done: Requeueing) -> None:
    """Judge the letters still dead among ``ids``; mark and audit those that
    would not fail again and publish their messages, in one transaction
    committed once the broker took every message."""
    key = ctx.internal_key  # before the transaction: on SQLite it would wait on ours
    try:
        with ctx.engine.begin() as conn:
            letters = dl_db.still_dead(conn, ids)
            causes = _judge(conn, letters)
            marked = dl_db.mark_requeued_many(conn, [r.id for r in letters if r.id not in causes])
            audit.record_many(
                conn,
                actor,
                "dead_letter.requeue",
                [
                    (f"dead_letter:{m.id}", {"job_id": m.job_id, "requeue": m.requeues})
                    for m in marked
                ],
            )
            _publish(ctx, key, marked)
    except _NotPublished as failed:
        _stopped(ctx, actor, [m.id for m in marked], failed, done)
    for letter_id, found in causes.items():
        done.refused[found[0].reason] += 1
        done.causes[letter_id] = found
    done.requeued += len(marked)


def _judge(conn: Connection, letters: Sequence[Any]) -> dict[int, list[Cause]]:
    """The letters that would fail again, with their causes. A chunk-level letter
    (its chunk unreadable or untrusted) and one whose cause was not its data are
    not judged: they are requeued."""
    works = {
        r.id: LetterWork(r.kind, r.payload, r.lines, r.line_ref, r.line_index)
        for r in letters
        if r.reason not in NOT_JUDGED and (r.document_id is not None or r.line_ref is not None)
    }
    legacy = [i for i, w in works.items() if w.line_ref is not None and w.line_index is None]
    for letter_id, key in dl_db.line_keys(conn, legacy).items():
        w = works[letter_id]
        works[letter_id] = LetterWork(w.kind, w.payload, w.lines, w.line_ref, None, key)
    decoded = {i: decode_letter(w) for i, w in works.items()}
    wanted: dict[str, set[tuple[str, int]]] = {}
    for i, w in works.items():
        d = decoded[i]
        if d is not None:
            wanted.setdefault(w.kind, set()).update(pinned(d))
    contracts: dict[str, dict[tuple[str, int], Any]] = {}
    unreadable: set[tuple[str, str, int]] = set()
    for kind_name, pairs in wanted.items():
        model = KINDS[kind_name].contract_model
        parsed = contracts.setdefault(kind_name, {})
        for pair, body in load_bodies(conn, kind_name, pairs).items():
            try:
                parsed[pair] = model.model_validate(body)
            except ValidationError:
                # Stored before a check it fails: the worker decides, not this guess.
                unreadable.add((kind_name, *pair))
    judged = {
        i: would_fail_again(w, decoded[i], contracts.get(w.kind, {}))
        for i, w in works.items()
        if not any((w.kind, *pair) in unreadable for pair in pinned(decoded[i] or Decoded([], [])))
    }
    return {i: causes for i, causes in judged.items() if causes}


def _publish(ctx: ApiContext, key: bytes, marked: list[dl_db.Marked]) -> None:
    """Publish the marked letters' messages, one slice per publishing thread;
    raise ``_NotPublished`` unless the broker took them all."""
    if not marked:
        return
    queue = ctx.settings.queue_for(FAST_PATH, MAX_PRIORITY)
    size = max(1, -(-len(marked) // SLICES))
    futures = [
        ctx.publishers.submit(
            enqueue_many,
            ctx.broker,
            queue,
            VALIDATE_ACTOR,
            [
                ChunkMessage(m.chunk_id, m.job_id, m.kind, m.digest, m.id, m.requeues).signed(key)
                for m in marked[n : n + size]
            ],
        )
        for n in range(0, len(marked), size)
    ]
    failure: BaseException | None = None
    for future in futures:  # every one waited for: none still publishing after a rollback
        try:
            future.result()
        except PartlyEnqueued as exc:
            failure = failure or exc.cause
        except Exception as exc:  # the publishing thread could not even start
            failure = failure or exc
    if failure is not None:
        raise _NotPublished(len(marked), failure)


def _stopped(
    ctx: ApiContext, actor: str, ids: Sequence[int], failed: _NotPublished, done: Requeueing
) -> None:
    """A batch rolled back for the broker: audit it, log why, answer 503."""
    with ctx.engine.begin() as conn:
        audit.record_many(
            conn,
            actor,
            "dead_letter.requeue_failed",
            [(f"dead_letter:{i}", {"reason": "broker_unavailable"}) for i in ids],
        )
    log.warning(
        "requeue stopped: the broker did not take a batch of %d messages (%s); those letters"
        " stay dead, %d were requeued before",
        failed.letters,
        type(failed.cause).__name__,
        done.requeued,
    )
    raise ApiError(
        503,
        "broker_unavailable",
        f"the message broker is unreachable: {done.requeued} requeued before it failed,"
        f" {failed.letters} of this batch left dead (requeue again)",
        [{"requeued": done.requeued, "left_dead": failed.letters}],
    ) from failed.cause
