"""Requeueing dead letters (docs/api.md#dead-letters-and-the-audit-log): each one
at most once per request that wins it, in batches.

A batch of letters is judged first: a letter in which no line would settle if
it ran again now (its pinned contract version still unpublished, or still
without the tier, accessorial or price it lacked) is not requeued but refused,
with its cause (``shared/domain/requeue_check.py``). The others are marked
``requeued`` in one conditional update (of two racing requests each letter is
won by one) with their audit entries, in one transaction; then their messages
are published with confirms, several publishing threads at once. Letters whose
message the broker did not confirm are put back to ``dead`` and the request
stops there with 503, logging why: nothing is left marked and unpublished by a
broker failure. (A process killed between a batch's commit and its publishing
leaves that batch's letters ``requeued`` without a message: at most two batches,
the one publishing and the next, already marked; docs/operations.md#dead-letters.)
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError
from sqlalchemy import Connection

from services.api.context import ApiContext
from services.api.errors import ApiError
from shared.adapters.broker import PartlyEnqueued, enqueue_many
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db.contracts import load_bodies
from shared.domain.kinds import KINDS
from shared.domain.messages import FAST_PATH, MAX_PRIORITY, VALIDATE_ACTOR, ChunkMessage
from shared.domain.requeue_check import (
    NOT_JUDGED,
    Cause,
    LetterWork,
    decode_letter,
    pinned,
    would_fail_again,
)
from shared.domain.settlement import Decoded

log = logging.getLogger("settleq.api")

BATCH = 1000  # letters judged, marked and published per transaction
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
    _finish(ctx, actor, [_start(ctx, _mark(ctx, actor, [dead_letter_id], done))], done)
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
    skipping (and counting) those that would fail again. A batch's messages are
    published while the next batch is judged and marked."""
    done = Requeueing()
    after: int | None = None
    pending: list[_Publishing] = []
    marked = 0
    while marked < limit:
        ids = dl_db.ids_matching(ctx.engine, where, min(BATCH, limit - marked), after)
        if not ids:
            break
        batch = _mark(ctx, actor, ids, done)
        marked += len(batch)
        pending.append(_start(ctx, batch))
        if len(pending) > 1:
            _finish(ctx, actor, pending, done, upto=1)
            del pending[0]
        after = ids[-1]
    _finish(ctx, actor, pending, done)
    done.causes.clear()  # a bulk answer says how many and why, not each letter's
    if done.refused or done.requeued:
        log.info(
            "bulk requeue: %d requeued, %d refused as they would fail again %s",
            done.requeued,
            done.refused.total(),
            dict(done.refused),
        )
    return done


def _mark(ctx: ApiContext, actor: str, ids: Sequence[int], done: Requeueing) -> list[dl_db.Marked]:
    """Judge the letters still dead among ``ids``; mark and audit those that
    would not fail again, in one transaction. The ones this request won."""
    with ctx.engine.begin() as conn:
        letters = dl_db.still_dead(conn, ids)
        causes = _judge(conn, letters)
        marked = dl_db.mark_requeued_many(conn, [r.id for r in letters if r.id not in causes])
        dl_db.audit_many(
            conn,
            actor,
            "dead_letter.requeue",
            [(f"dead_letter:{m.id}", {"job_id": m.job_id, "requeue": m.requeues}) for m in marked],
        )
    for letter_id, found in causes.items():
        done.refused[found[0].reason] += 1
        done.causes[letter_id] = found
    return marked


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


@dataclass
class _Publishing:
    """One batch's messages on their way: one slice per publishing thread."""

    slices: list[list[dl_db.Marked]]
    futures: list[Future[int]]


def _start(ctx: ApiContext, marked: list[dl_db.Marked]) -> _Publishing:
    key, queue = ctx.internal_key, ctx.settings.queue_for(FAST_PATH, MAX_PRIORITY)
    size = max(1, -(-len(marked) // SLICES))
    slices = [marked[n : n + size] for n in range(0, len(marked), size)]
    futures = [
        ctx.publishers.submit(
            enqueue_many,
            ctx.broker,
            queue,
            VALIDATE_ACTOR,
            [
                ChunkMessage(m.chunk_id, m.job_id, m.kind, m.digest, m.id, m.requeues).signed(key)
                for m in part
            ],
        )
        for part in slices
    ]
    return _Publishing(slices, futures)


def _finish(
    ctx: ApiContext,
    actor: str,
    pending: list[_Publishing],
    done: Requeueing,
    upto: int | None = None,
) -> None:
    """Wait for the first ``upto`` batches' messages (all by default). When one
    was not confirmed, wait for every pending batch, put the letters whose
    message was not confirmed back to ``dead``, log why and answer 503."""
    unconfirmed: list[dl_db.Marked] = []
    failure: BaseException | None = None
    for n, publishing in enumerate(pending):
        if upto is not None and n >= upto and failure is None:
            break
        for part, future in zip(publishing.slices, publishing.futures, strict=True):
            try:
                done.requeued += future.result()
            except PartlyEnqueued as exc:
                done.requeued += exc.done
                unconfirmed += part[exc.done :]
                failure = failure or exc.cause
            except Exception as exc:  # the publishing thread could not even start
                unconfirmed += part
                failure = failure or exc
    if failure is None:
        return
    pending.clear()
    with ctx.engine.begin() as conn:
        dl_db.unmark_requeued_many(conn, unconfirmed)
        dl_db.audit_many(
            conn,
            actor,
            "dead_letter.requeue_failed",
            [(f"dead_letter:{m.id}", {"reason": "broker_unavailable"}) for m in unconfirmed],
        )
    log.warning(
        "requeue stopped: the broker did not take %d messages (%s); those letters stay"
        " dead, %d were requeued before",
        len(unconfirmed),
        type(failure).__name__,
        done.requeued,
    )
    raise ApiError(
        503,
        "broker_unavailable",
        f"the message broker is unreachable: {done.requeued} requeued before it failed,"
        f" {len(unconfirmed)} left dead (requeue again)",
        [{"requeued": done.requeued, "left_dead": len(unconfirmed)}],
    ) from failure
