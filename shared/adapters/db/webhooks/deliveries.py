"""Webhook deliveries (docs/architecture.md#webhooks): the events fanned out
to endpoints, the deliveries due, one attempt claimed and recorded, the
delivery log, a manual retry, and what the metrics read.

Who sends what is decided by ``next_attempt_at``: a delivery is due when it
is ``pending`` and that time has come. Handing it to the queue pushes the
time past the attempt's lease, and so does claiming it for an attempt, so a
delivery whose message or process was lost is due again once the lease
runs out; an attempt is recorded only by the claim that counted the same
attempts (a stale or doubled message sends nothing twice on purpose, and
records nothing twice). ``leased_until`` marks a delivery in flight (handed
out or claimed, its attempt not recorded): an endpoint has at most
``IN_FLIGHT_PER_ENDPOINT`` at once, so endpoints that hang slow only
themselves.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, Select, and_, func, insert, or_, select, update

from shared.adapters.db.tables import (
    PUBLISHED_TYPES,
    outbox,
    webhook_attempts,
    webhook_deliveries,
    webhook_endpoints,
)
from shared.adapters.db.types import utc
from shared.adapters.db.webhooks.endpoints import retired_of, signing_secrets

ev, dl, at, we = outbox, webhook_deliveries, webhook_attempts, webhook_endpoints
# The outbox's webhook events (the rest are outcome units, the relay's to publish).
WEBHOOK_EVENTS = ev.c.type.not_in(PUBLISHED_TYPES)
DELIVERY_STATUSES = ("pending", "delivered", "failed")
IN_FLIGHT_PER_ENDPOINT = 2


def _later(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else utc(value)


@dataclass(frozen=True)
class Waiting:
    """An event not yet fanned out."""

    id: str
    type: str
    subject: str
    partition_keys: tuple[str, ...] | None  # None: a ping, for ``endpoint_id`` only
    endpoint_id: str | None
    created_at: dt.datetime


def waiting_events(conn: Connection, limit: int) -> list[Waiting]:
    """The oldest events not fanned out."""
    rows = conn.execute(
        select(ev.c.event_id, ev.c.type, ev.c.subject, ev.c.partitions, ev.c.endpoint_id)
        .add_columns(ev.c.created_at)
        .where(ev.c.published_at.is_(None), WEBHOOK_EVENTS)
        .order_by(ev.c.id)
        .limit(limit)
    ).all()
    return [
        Waiting(
            r.event_id,
            r.type,
            r.subject,
            None if r.partitions is None else tuple(r.partitions),
            r.endpoint_id,
            utc(r.created_at),
        )
        for r in rows
    ]


@dataclass(frozen=True)
class Subscriber:
    """An enabled endpoint, as fan-out sees it."""

    id: str
    key_id: str
    events: tuple[str, ...]


def subscribers(conn: Connection) -> list[Subscriber]:
    rows = conn.execute(
        select(we.c.id, we.c.key_id, we.c.events).where(we.c.status == "enabled")
    ).all()
    return [Subscriber(r.id, r.key_id, tuple(r.events.split(","))) for r in rows]


def fan_out(
    conn: Connection,
    event_id: str,
    data: str | None,
    endpoint_ids: Sequence[str],
    now: dt.datetime,
) -> list[str]:
    """The event marked fanned out with its data, and its deliveries, one per
    endpoint, due at ``now`` (handed out by ``hand_out_due``, endpoint by
    endpoint); none when another process fanned it out first."""
    marked = conn.execute(
        update(ev)
        .where(ev.c.event_id == event_id, ev.c.published_at.is_(None))
        .values(data=data, published_at=now)
    )
    if marked.rowcount != 1:
        return []
    ids = ["dlv_" + secrets.token_hex(12) for _ in endpoint_ids]
    if ids:
        conn.execute(
            insert(dl),
            [
                {
                    "id": delivery_id,
                    "event_id": event_id,
                    "endpoint_id": endpoint_id,
                    "status": "pending",
                    "attempts": 0,
                    "next_attempt_at": now,
                    "created_at": now,
                }
                for delivery_id, endpoint_id in zip(ids, endpoint_ids, strict=True)
            ],
        )
    return ids


def hand_out_due(
    conn: Connection, now: dt.datetime, lease: dt.timedelta, limit: int
) -> list[tuple[str, int]]:
    """Deliveries due (pending, their time come), oldest due first, each with
    its attempts so far, at most ``IN_FLIGHT_PER_ENDPOINT`` in flight for an
    endpoint (those handed out or claimed count); their time pushed past
    ``lease`` and marked in flight until then."""
    in_flight = (
        select(dl.c.endpoint_id, func.count().label("n"))
        .where(dl.c.leased_until.is_not(None), dl.c.leased_until > now)
        .group_by(dl.c.endpoint_id)
        .subquery()
    )
    due = (
        select(
            dl.c.id,
            dl.c.endpoint_id,
            dl.c.next_attempt_at,
            func.row_number()
            .over(partition_by=dl.c.endpoint_id, order_by=(dl.c.next_attempt_at, dl.c.id))
            .label("rank"),
        )
        .where(dl.c.status == "pending", dl.c.next_attempt_at <= now)
        .subquery()
    )
    chosen = (
        conn.execute(
            select(due.c.id)
            .select_from(due.outerjoin(in_flight, in_flight.c.endpoint_id == due.c.endpoint_id))
            .where(due.c.rank + func.coalesce(in_flight.c.n, 0) <= IN_FLIGHT_PER_ENDPOINT)
            .order_by(due.c.next_attempt_at, due.c.id)
            .limit(limit)
        )
        .scalars()
        .all()
    )
    if not chosen:
        return []
    # Only those still due: another scheduler may have taken some meanwhile
    # (PostgreSQL re-reads a row it waited for).
    rows = conn.execute(
        update(dl)
        .where(dl.c.id.in_(chosen), dl.c.status == "pending", dl.c.next_attempt_at <= now)
        .values(next_attempt_at=now + lease, leased_until=now + lease)
        .returning(dl.c.id, dl.c.attempts)
    ).all()
    order = {delivery_id: n for n, delivery_id in enumerate(chosen)}
    return [(r.id, r.attempts) for r in sorted(rows, key=lambda r: order[r.id])]


@dataclass(frozen=True)
class Claimed:
    """A delivery claimed for one attempt: what to send, where, signed with what."""

    delivery_id: str
    attempts: int  # before this one
    first_attempt_at: dt.datetime | None
    event_id: str
    event_type: str
    event_created_at: dt.datetime
    data: str | None
    endpoint_id: str
    url: str
    endpoint_status: str
    failing: bool  # the endpoint's last attempts failed
    secret: str = field(repr=False)
    previous_secret: str | None = field(repr=False)
    previous_until: dt.datetime | None
    retired: tuple[tuple[str, dt.datetime], ...] = field(default=(), repr=False)

    def signing_secrets(self, now: dt.datetime) -> list[str]:
        return signing_secrets(
            self.secret, self.previous_secret, self.previous_until, now, self.retired
        )


_CLAIMED = (
    dl.c.id,
    dl.c.attempts,
    dl.c.first_attempt_at,
    ev.c.event_id,
    ev.c.type,
    ev.c.created_at,
    ev.c.data,
    we.c.id.label("endpoint_id"),
    we.c.url,
    we.c.status,
    we.c.failing_since,
    we.c.secret,
    we.c.previous_secret,
    we.c.previous_until,
    we.c.retired_secrets,
)


def _claimed_select(delivery_id: str) -> Select[Any]:
    return (
        select(*_CLAIMED)
        .join(ev, ev.c.event_id == dl.c.event_id)
        .join(we, we.c.id == dl.c.endpoint_id)
        .where(dl.c.id == delivery_id)
    )


def claim(
    engine: Engine, delivery_id: str, attempts: int, now: dt.datetime, lease: dt.timedelta
) -> Claimed | None:
    """The delivery, if it is still pending with ``attempts`` attempts: its time
    pushed past ``lease`` for this attempt. None for a stale message."""
    # On PostgreSQL one statement: the claim and what it claims.
    claiming = (
        update(dl)
        .where(
            dl.c.id == delivery_id,
            dl.c.attempts == attempts,
            dl.c.status == "pending",
            ev.c.event_id == dl.c.event_id,
            we.c.id == dl.c.endpoint_id,
        )
        .values(next_attempt_at=now + lease, leased_until=now + lease)
        .returning(*_CLAIMED)
    )
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            row = conn.execute(claiming).first()
        else:  # SQLite returns the updated table's columns only
            done = conn.execute(
                update(dl)
                .where(dl.c.id == delivery_id, dl.c.attempts == attempts, dl.c.status == "pending")
                .values(next_attempt_at=now + lease, leased_until=now + lease)
            )
            row = None if done.rowcount != 1 else conn.execute(_claimed_select(delivery_id)).one()
    if row is None:
        return None
    return Claimed(
        delivery_id=row.id,
        attempts=row.attempts,
        first_attempt_at=_later(row.first_attempt_at),
        event_id=row.event_id,
        event_type=row.type,
        event_created_at=utc(row.created_at),
        data=row.data,
        endpoint_id=row.endpoint_id,
        url=row.url,
        endpoint_status=row.status,
        failing=row.failing_since is not None,
        secret=row.secret,
        previous_secret=row.previous_secret,
        previous_until=_later(row.previous_until),
        retired=retired_of(row.retired_secrets),
    )


@dataclass(frozen=True)
class Tried:
    """One attempt's result, as the log keeps it."""

    at: dt.datetime
    status_code: int | None
    error: str | None
    detail: str
    latency_ms: int
    answer: str


@dataclass(frozen=True)
class Recorded:
    counted: bool  # False: another claim recorded this attempt first
    endpoint_disabled: bool  # this failure was the endpoint's fifth day of failing


def record(
    engine: Engine,
    claimed: Claimed,
    tried: Tried | None,
    status: str,
    next_attempt_at: dt.datetime | None,
    disable_after: dt.timedelta,
) -> Recorded:
    """The attempt (None: none was made, the endpoint being disabled) and the
    delivery's new ``status``: ``delivered``, ``failed``, or ``pending`` until
    ``next_attempt_at``. A failure starts or continues the endpoint's failing
    run, which disables it once ``disable_after`` long; a delivery ends it."""
    with engine.begin() as conn:
        n = claimed.attempts + (tried is not None)
        values: dict[str, Any] = {
            "status": status,
            "attempts": n,
            "next_attempt_at": None,
            "leased_until": None,  # no longer in flight: the endpoint's next may go
        }
        if status == "pending":
            values["next_attempt_at"] = next_attempt_at
        if tried is not None:
            values["last_attempt_at"] = tried.at
            values["first_attempt_at"] = func.coalesce(dl.c.first_attempt_at, tried.at)
        done = conn.execute(
            update(dl)
            .where(dl.c.id == claimed.delivery_id, dl.c.attempts == claimed.attempts)
            .values(**values)
        )
        if done.rowcount != 1:
            # Another claim recorded this attempt first, or the endpoint and its
            # deliveries were deleted meanwhile: nothing to record.
            return Recorded(False, False)
        if tried is None:
            return Recorded(True, False)
        conn.execute(
            insert(at).values(
                delivery_id=claimed.delivery_id,
                attempt=n,
                at=tried.at,
                status_code=tried.status_code,
                error=tried.error,
                detail=tried.detail,
                latency_ms=tried.latency_ms,
                answer=tried.answer.replace("\x00", "\ufffd"),  # PostgreSQL text holds no NUL
            )
        )
        if status == "delivered":
            if claimed.failing:
                conn.execute(
                    update(we).where(we.c.id == claimed.endpoint_id).values(failing_since=None)
                )
            return Recorded(True, False)
        conn.execute(
            update(we)
            .where(we.c.id == claimed.endpoint_id, we.c.failing_since.is_(None))
            .values(failing_since=tried.at)
        )
        disabled = conn.execute(
            update(we)
            .where(
                we.c.id == claimed.endpoint_id,
                we.c.status == "enabled",
                we.c.failing_since <= tried.at - disable_after,
            )
            .values(status="disabled", disabled_reason="failing")
        )
        return Recorded(True, disabled.rowcount == 1)


@dataclass(frozen=True)
class Delivery:
    """A delivery as the log shows it, with every attempt, oldest first."""

    id: str
    event_id: str
    event_type: str
    status: str
    attempts: int
    created_at: dt.datetime
    next_attempt_at: dt.datetime | None
    tries: list[Tried]


def get(engine: Engine, endpoint_id: str, delivery_id: str) -> Delivery | None:
    """One delivery of an endpoint, with its attempts."""
    found = _read(engine, _deliveries(endpoint_id).where(dl.c.id == delivery_id))
    return found[0] if found else None


def _deliveries(endpoint_id: str) -> Select[Any]:
    return (
        select(dl, ev.c.type)
        .join(ev, ev.c.event_id == dl.c.event_id)
        .where(dl.c.endpoint_id == endpoint_id)
    )


def page(
    engine: Engine,
    endpoint_id: str,
    *,
    status: str | None,
    before: tuple[dt.datetime, str] | None,
    limit: int,
) -> list[Delivery]:
    """An endpoint's deliveries, newest first; ``before`` is the (created_at,
    id) of the last one seen."""
    query = _deliveries(endpoint_id).order_by(dl.c.created_at.desc(), dl.c.id.desc()).limit(limit)
    if status is not None:
        query = query.where(dl.c.status == status)
    if before is not None:
        created, last = before
        query = query.where(
            or_(dl.c.created_at < created, and_(dl.c.created_at == created, dl.c.id < last))
        )
    return _read(engine, query)


def _read(engine: Engine, query: Select[Any]) -> list[Delivery]:
    with engine.connect() as conn:
        rows = conn.execute(query).all()
        tries: dict[str, list[Tried]] = {r.id: [] for r in rows}
        if rows:
            for t in conn.execute(
                select(at).where(at.c.delivery_id.in_(list(tries))).order_by(at.c.attempt, at.c.id)
            ):
                tries[t.delivery_id].append(
                    Tried(utc(t.at), t.status_code, t.error, t.detail, t.latency_ms, t.answer)
                )
    return [
        Delivery(
            id=r.id,
            event_id=r.event_id,
            event_type=r.type,
            status=r.status,
            attempts=r.attempts,
            created_at=utc(r.created_at),
            next_attempt_at=_later(r.next_attempt_at),
            tries=tries[r.id],
        )
        for r in rows
    ]


def retry(engine: Engine, endpoint_id: str, delivery_id: str, now: dt.datetime) -> bool:
    """Send an endpoint's delivery again now, whatever its status: whether it
    has one by that id."""
    with engine.begin() as conn:
        done = conn.execute(
            update(dl)
            .where(dl.c.id == delivery_id, dl.c.endpoint_id == endpoint_id)
            .values(status="pending", next_attempt_at=now)
        )
    return done.rowcount == 1


# What the gauges count: the delivered ones are history, as many as the
# retention keeps, and counting them at every scrape read them all.
GAUGED_STATUSES = ("pending", "failed")


@dataclass(frozen=True)
class Backlog:
    """What the API's metrics read at scrape time, by indexes only."""

    by_status: dict[str, int]  # pending and failed
    oldest_undelivered: dt.datetime | None  # an event not fanned out, or a pending delivery
    endpoints: dict[tuple[str, str], int]  # (status, reason) -> endpoints


def backlog(engine: Engine) -> Backlog:
    with engine.connect() as conn:
        # One count per status, each an index's range (the pending ones' partial
        # index, the failed ones' (status, last_attempt_at)).
        counts = {
            status: conn.execute(
                select(func.count()).select_from(dl).where(dl.c.status == status)
            ).scalar_one()
            for status in GAUGED_STATUSES
        }
        pending = conn.execute(
            select(func.min(ev.c.created_at))
            .select_from(dl.join(ev, ev.c.event_id == dl.c.event_id))
            .where(dl.c.status == "pending")
        ).scalar()
        waiting = conn.execute(
            select(func.min(ev.c.created_at)).where(ev.c.published_at.is_(None), WEBHOOK_EVENTS)
        ).scalar()
        endpoints = conn.execute(
            select(we.c.status, we.c.disabled_reason, func.count()).group_by(
                we.c.status, we.c.disabled_reason
            )
        ).all()
    oldest = [utc(t) for t in (pending, waiting) if t is not None]
    return Backlog(
        by_status={s: int(counts[s]) for s in GAUGED_STATUSES},
        oldest_undelivered=min(oldest) if oldest else None,
        endpoints={(s, r or ""): int(n) for s, r, n in endpoints},
    )
