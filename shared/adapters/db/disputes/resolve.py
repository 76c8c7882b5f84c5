"""Resolving disputes, at most once whatever is repeated or raced
(docs/architecture.md#exactly-once-resolution).

One transaction appends the ``resolved`` ledger row with its outcome event
(an outbox row), its decision (``dispute_resolutions``), the audit entry and
the webhook event. The ledger rows are the ledger writer's to book, as a
settlement's are (``LedgerWriter.resolve_one``, ``resolve_selected``:
ledger/resolutions.py); this module decides and records the rest. The
database decides a race: the partial unique index
``uq_ledger_entries_resolution`` takes one ``resolved`` row per disputed row,
and the insert names it (``ON CONFLICT DO NOTHING``), so a loser writes
nothing and reads the winner's resolution. On PostgreSQL a resolution first
takes its dispute's lineage lock (``LedgerWriter.lock_disputes``), the one a
settlement of a newer version of the same identity takes: the two serialise,
so neither measures its delta from a row the other has just superseded.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Connection, Engine

from shared.adapters.db.bulk import insert_rows
from shared.adapters.db.dialect import id_in
from shared.adapters.db.disputes.sql import (
    STATUS_WHERE,
    abs_variance,
    apply,
    d,
    disputes_query,
    joined,
    to_dispute,
)
from shared.adapters.db.disputes.types import Dispute, Filter, Resolved
from shared.adapters.db.ledger import Booked, writer_for
from shared.adapters.db.tables import audit_log, dispute_resolutions
from shared.adapters.db.webhooks import events as webhook_events
from shared.domain.disputes import (
    BULK_DECISIONS,
    BULK_LIMIT_MAX,
    LEDGER_SCALE,
    DisputeAlreadyResolved,
    DisputeSuperseded,
    ResolveRequest,
    check_decided,
    decided_amount,
    same_resolution,
)
from shared.domain.kinds import shown
from shared.domain.pipeline.events import (
    EVENT_BATCH_LIMIT,
    Message,
    event,
    occurred_at_text,
    unit_messages,
)
from shared.domain.pipeline.settlement import LEDGER_LIMIT

ACTION = "dispute_resolve"
# Publish the messages of committed outbox rows (event_publisher.EventPublisher.publish_messages).
Publish = Callable[[Sequence[int], Sequence[Message]], object]


@dataclass(frozen=True)
class Committed:
    """An outbox row a resolution wrote, with its events' messages."""

    outbox_id: int
    messages: list[Message]


def _load(conn: Connection, dispute_id: int) -> Dispute | None:
    query = disputes_query(Filter(status="all"), conn.dialect.name).where(d.c.id == dispute_id)
    row = conn.execute(query).first()
    return None if row is None else to_dispute(row)


def _again(dispute: Dispute, request: ResolveRequest) -> Resolved:
    """A resolved dispute asked again: the same resolution, or a conflict."""
    done = dispute.resolution
    assert done is not None
    if same_resolution(
        request, done.decision, done.amount, dispute.claimed_amount, dispute.model_amount
    ):
        return Resolved(dispute, created=False)
    raise DisputeAlreadyResolved(
        f"dispute {dispute.id} is already resolved"
        f" ({done.decision}, {shown(dispute.kind, done.amount)})"
    )


def _record(
    conn: Connection,
    booked: Booked,
    request: ResolveRequest,
    actor: str,
    now: dt.datetime,
    event_batch_max: int,
) -> list[Committed]:
    """Each new ``resolved`` row's decision and audit entry, and each dispute's
    webhook event; the ledger's outbox rows with their events' messages, to
    publish once committed."""
    resolved = booked.rows
    insert_rows(
        conn,
        dispute_resolutions,
        [
            {
                "ledger_entry_id": ledger_id,
                "dispute_id": dispute_id,
                "decision": request.decision,
                "note": request.note,
                "resolved_by": actor,
                "resolved_at": now,
            }
            for ledger_id, dispute_id in ((r.id, r.supersedes_id) for r in resolved)
        ],
    )
    committed = []
    occurred_at = occurred_at_text(now)
    for unit in booked.outbox:
        events = [event(row, occurred_at, request) for row in unit.rows]
        committed.append(Committed(unit.outbox_id, unit_messages(events, event_batch_max)))
    entries = [
        {
            "at": now,
            "actor": actor,
            "action": ACTION,
            "target": str(dispute_id),
            "details": json.dumps(
                {
                    "decision": request.decision,
                    # As the ledger holds it, shown as every read shows it.
                    "amount": shown(kind, amount.quantize(LEDGER_SCALE)),
                    "ledger_entry_id": i,
                },
                sort_keys=True,
            ),
        }
        for i, dispute_id, kind, amount in (
            (r.id, r.supersedes_id, r.kind, r.amount) for r in resolved
        )
    ]
    insert_rows(conn, audit_log, entries)
    decided = [(r.supersedes_id, r.partition_key) for r in resolved if r.supersedes_id is not None]
    webhook_events.disputes_resolved(conn, decided, now)
    return committed


def resolve(
    engine: Engine,
    dispute_id: int,
    request: ResolveRequest,
    actor: str,
    publish: Publish | None = None,
    event_batch_max: int = EVENT_BATCH_LIMIT,
) -> Resolved:
    """See ``shared.adapters.db.disputes.queue.resolve``."""
    committed: list[Committed] = []
    with engine.begin() as conn:
        writer = writer_for(conn)
        dispute = _load(conn, dispute_id)
        if dispute is None:
            raise LookupError(f"no dispute {dispute_id}")
        writer.lock_disputes(conn, [dispute])
        dispute = _load(conn, dispute_id)  # as it is now that no one else may change it
        assert dispute is not None
        if dispute.status == "resolved":
            return _again(dispute, request)
        if dispute.status == "superseded":
            raise DisputeSuperseded(f"dispute {dispute_id} is superseded by a newer settlement")
        amount = decided_amount(request, dispute.claimed_amount, dispute.model_amount)
        check_decided(amount, dispute.model_amount)
        now = dt.datetime.now(dt.UTC)
        booked = writer.resolve_one(conn, dispute_id, amount, now)
        if not booked.rows:
            # Another transaction resolved it first and has committed (the insert
            # waited for it): answer as for a repeated request.
            winner = _load(conn, dispute_id)
            assert winner is not None and winner.resolution is not None
            return _again(winner, request)
        committed = _record(conn, booked, request, actor, now, event_batch_max)
        after = _load(conn, dispute_id)
    assert after is not None
    _publish(publish, committed)
    return Resolved(after, created=True)


def _publish(publish: Publish | None, committed: list[Committed]) -> None:
    """Right after the commit (docs/architecture.md#events-at-commit-and-the-relay):
    what is not published waits for the relay."""
    if publish is not None:
        for unit in committed:
            publish([unit.outbox_id], unit.messages)


def resolve_bulk(
    engine: Engine,
    where: Filter,
    request: ResolveRequest,
    limit: int,
    actor: str,
    publish: Publish | None = None,
    event_batch_max: int = EVENT_BATCH_LIMIT,
) -> int:
    """See ``shared.adapters.db.disputes.queue.resolve_bulk``. Set-based: one statement
    selects the candidates, one takes their locks, one inserts every resolved
    row (the ledger writer's ``resolve_selected``, re-checking each is still
    open, under the locks), then COPY."""
    if request.decision not in BULK_DECISIONS:
        raise ValueError(f"a bulk resolution decides {' or '.join(BULK_DECISIONS)}")
    if not 1 <= limit <= BULK_LIMIT_MAX:
        raise ValueError(f"limit is 1 to {BULK_LIMIT_MAX}")
    where = dataclasses.replace(where, status="open")
    with engine.begin() as conn:
        writer = writer_for(conn)
        dialect = conn.dialect.name
        columns = (d.c.id, d.c.kind, d.c.partition_key, d.c.document_id, d.c.line_ref)
        candidates = conn.execute(
            apply(joined(*columns), where, dialect).order_by(d.c.id).limit(limit)
        ).all()
        if not candidates:
            return 0
        writer.lock_disputes(conn, candidates)
        now = dt.datetime.now(dt.UTC)
        decided = d.c.claimed_amount if request.decision == "accept_claim" else d.c.amount
        which = joined(d.c.id).where(
            id_in(d.c.id, [c.id for c in candidates], dialect),
            STATUS_WHERE["open"],  # under the locks: still open
        )
        if request.decision == "accept_claim":
            # Its change from the model must fit the ledger (check_decided's rule).
            which = which.where(abs_variance(dialect, operator.lt, LEDGER_LIMIT))
        booked = writer.resolve_selected(conn, which, d, decided, now)
        committed = _record(conn, booked, request, actor, now, event_batch_max)
    _publish(publish, committed)
    return len(booked.rows)
