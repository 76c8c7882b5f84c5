"""Webhook events, written in the transaction of what they report
(docs/architecture.md#webhooks): a job's last chunk writes ``job.completed``
(and ``dead_letters.created`` when any of its lines were), a dispute's
resolution ``dispute.resolved``, an endpoint's test a ``ping``. Each is a row
of the one outbox, typed, naming its subject and partitions only; the relay
renders its data and fans it out.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Iterable

from sqlalchemy import Connection, func, insert, select

from shared.adapters.db.tables import chunk_results, job_partitions, jobs, outbox

JOB_COMPLETED = "job.completed"
DEAD_LETTERS_CREATED = "dead_letters.created"
DISPUTE_RESOLVED = "dispute.resolved"
PING = "ping"


def new_event_id() -> str:
    return "evt_" + secrets.token_hex(12)


def after_chunk(conn: Connection, job_id: str, now: dt.datetime) -> None:
    """At the end of a chunk's transaction: when it is its job's last, the job's
    events. The job's row is locked first, so that of two last chunks
    committing at once the second sees the first's result (READ COMMITTED
    reads what committed before each statement): exactly one writes them.
    ``FOR NO KEY UPDATE``, not ``FOR UPDATE``: every chunk's transaction
    already holds the row ``FOR KEY SHARE`` (its result row's foreign key),
    which ``FOR UPDATE`` would wait on: two chunks, each waiting for the
    other, a deadlock (tests/integration/test_job_completion_race.py)."""
    total = conn.execute(
        select(jobs.c.chunks_total).where(jobs.c.id == job_id).with_for_update(key_share=True)
    ).scalar_one_or_none()
    if total is None:
        return
    # Requeues add rows that are not chunks (and take dead letters away).
    chunk_rows = func.count().filter(chunk_results.c.source == "chunk")
    done, dead = conn.execute(
        select(chunk_rows, func.coalesce(func.sum(chunk_results.c.dead_lettered), 0)).where(
            chunk_results.c.job_id == job_id
        )
    ).one()
    if (done or 0) < total:
        return
    partitions = sorted(
        conn.execute(
            select(job_partitions.c.partition_key).where(job_partitions.c.job_id == job_id)
        ).scalars()
    )
    rows = [_row(JOB_COMPLETED, job_id, partitions, now)]
    if dead > 0:
        rows.append(_row(DEAD_LETTERS_CREATED, job_id, partitions, now))
    conn.execute(insert(outbox), rows)


def disputes_resolved(
    conn: Connection, resolved: Iterable[tuple[int, str]], now: dt.datetime
) -> None:
    """``dispute.resolved`` for each (dispute id, partition) a resolution decided."""
    rows = [_row(DISPUTE_RESOLVED, str(d), [p], now) for d, p in resolved]
    if rows:
        conn.execute(insert(outbox), rows)


def ping(conn: Connection, endpoint_id: str, now: dt.datetime) -> str:
    """A test event for one endpoint; its id."""
    row = _row(PING, endpoint_id, None, now)
    row["endpoint_id"] = endpoint_id
    conn.execute(insert(outbox).values(**row))
    return str(row["event_id"])


def _row(
    kind: str, subject: str, partitions: Iterable[str] | None, now: dt.datetime
) -> dict[str, object]:
    return {
        "event_id": new_event_id(),
        "type": kind,
        "subject": subject,
        "partitions": None if partitions is None else list(partitions),
        "endpoint_id": None,
        "created_at": now,
    }
