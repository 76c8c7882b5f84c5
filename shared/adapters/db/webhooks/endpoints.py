"""The webhook endpoints a producer key registers (docs/api.md#webhooks), and
the secrets that sign for each: create, read, rotate, disable, delete.

An endpoint belongs to one key; every read and change but an operator's
names the key, so a key never sees or touches another's endpoint (a wrong
key reads as no such endpoint). The secret is returned by ``create`` and
``rotate`` only, to be shown once; an ``Endpoint`` keeps its secrets out of
its ``repr``, so logging one logs no secret. A change made for someone
(``actor``) is audited in its transaction, without the secret.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, delete, func, insert, select, text, update

from shared.adapters.db.operators import audit
from shared.adapters.db.tables import webhook_attempts, webhook_deliveries, webhook_endpoints
from shared.adapters.db.types import utc
from shared.domain.webhooks import EVENT_TYPES, ROTATION_GRACE_S, new_secret

we = webhook_endpoints


class UnknownEvent(ValueError):
    """An event type no endpoint can subscribe to."""


class EndpointLimit(ValueError):
    """The key has as many endpoints as it may register."""


# Pings and manual retries an endpoint may be sent in a minute (each is a
# signed POST settleq makes for whoever holds the key).
MANUAL_SENDS = 10
MANUAL_WINDOW = dt.timedelta(minutes=1)


@dataclass(frozen=True)
class Endpoint:
    id: str
    key_id: str
    url: str
    events: tuple[str, ...]
    description: str | None
    status: str  # enabled, disabled
    disabled_reason: str | None
    created_at: dt.datetime
    failing_since: dt.datetime | None
    secret: str = field(repr=False)
    previous_secret: str | None = field(repr=False)
    previous_until: dt.datetime | None
    retired: tuple[tuple[str, dt.datetime], ...] = field(default=(), repr=False)

    def signing_secrets(self, now: dt.datetime) -> list[str]:
        return signing_secrets(
            self.secret, self.previous_secret, self.previous_until, now, self.retired
        )


def signing_secrets(
    secret: str,
    previous: str | None,
    previous_until: dt.datetime | None,
    now: dt.datetime,
    retired: Iterable[tuple[str, dt.datetime]] = (),
) -> list[str]:
    """The secrets that sign a request sent at ``now``: the current one, then
    each rotated out whose grace (24 h from its own rotation) still runs,
    newest first."""
    found = [secret]
    if previous and previous_until is not None and now < utc(previous_until):
        found.append(previous)
    found += [s for s, until in retired if now < until]
    return found


def retired_of(text: str | None) -> tuple[tuple[str, dt.datetime], ...]:
    """``retired_secrets`` as stored (JSON ``[[secret, until], ...]``)."""
    if not text:
        return ()
    return tuple((s, utc(dt.datetime.fromisoformat(u))) for s, u in json.loads(text))


def _endpoint(row: Any) -> Endpoint:
    return Endpoint(
        id=row.id,
        key_id=row.key_id,
        url=row.url,
        events=tuple(row.events.split(",")),
        description=row.description,
        status=row.status,
        disabled_reason=row.disabled_reason,
        created_at=utc(row.created_at),
        failing_since=None if row.failing_since is None else utc(row.failing_since),
        secret=row.secret,
        previous_secret=row.previous_secret,
        previous_until=None if row.previous_until is None else utc(row.previous_until),
        retired=retired_of(row.retired_secrets),
    )


def events_of(names: Iterable[str]) -> tuple[str, ...]:
    """The event types named, each once, sorted (``UnknownEvent`` for another)."""
    chosen = sorted(set(names))
    unknown = [n for n in chosen if n not in EVENT_TYPES]
    if unknown or not chosen:
        raise UnknownEvent(f"events are one or more of {', '.join(EVENT_TYPES)}")
    return tuple(chosen)


def create(
    engine: Engine,
    key_id: str,
    url: str,
    events: Iterable[str],
    description: str | None,
    now: dt.datetime,
    actor: str | None = None,
    limit: int = 10,
) -> tuple[Endpoint, str]:
    """A new enabled endpoint of ``key_id`` and its secret (shown once);
    ``EndpointLimit`` when the key has ``limit`` already (disabled ones count:
    they are there until deleted)."""
    endpoint_id = "we_" + secrets.token_hex(12)
    secret = new_secret()
    chosen = events_of(events)
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # Two creations at once would each count the other's absence: one
            # waits for the other's commit. (SQLite's writers take turns.)
            conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtext('webhook_endpoints:' || :k))"),
                {"k": key_id},
            )
        held = conn.execute(
            select(func.count()).select_from(we).where(we.c.key_id == key_id)
        ).scalar_one()
        if held >= limit:
            raise EndpointLimit(f"a key registers at most {limit} webhook endpoints")
        _audit(conn, actor, "webhook_endpoint.create", endpoint_id, url=url, events=chosen)
        conn.execute(
            insert(we).values(
                id=endpoint_id,
                key_id=key_id,
                url=url,
                events=",".join(chosen),
                description=description,
                status="enabled",
                secret=secret,
                created_at=now,
            )
        )
    endpoint = get(engine, endpoint_id, key_id)
    assert endpoint is not None
    return endpoint, secret


def list_for(engine: Engine, key_id: str | None) -> list[Endpoint]:
    """A key's endpoints, oldest first; every key's when ``key_id`` is None (an operator)."""
    query = select(we).order_by(we.c.created_at, we.c.id)
    if key_id is not None:
        query = query.where(we.c.key_id == key_id)
    with engine.connect() as conn:
        return [_endpoint(row) for row in conn.execute(query)]


def get(engine: Engine, endpoint_id: str, key_id: str | None) -> Endpoint | None:
    """The endpoint, if ``key_id`` owns it (any key's when None: an operator)."""
    query = select(we).where(we.c.id == endpoint_id)
    if key_id is not None:
        query = query.where(we.c.key_id == key_id)
    with engine.connect() as conn:
        row = conn.execute(query).first()
    return None if row is None else _endpoint(row)


def remove(engine: Engine, endpoint_id: str, key_id: str, actor: str | None = None) -> bool:
    """Delete a key's endpoint, and its deliveries: whether there was one."""
    with engine.begin() as conn:
        gone = conn.execute(delete(we).where(we.c.id == endpoint_id, we.c.key_id == key_id))
        if gone.rowcount != 1:
            return False
        # Explicitly, not by the foreign keys' cascade: SQLite enforces one only
        # on a connection that asked.
        mine = select(webhook_deliveries.c.id).where(
            webhook_deliveries.c.endpoint_id == endpoint_id
        )
        conn.execute(delete(webhook_attempts).where(webhook_attempts.c.delivery_id.in_(mine)))
        conn.execute(
            delete(webhook_deliveries).where(webhook_deliveries.c.endpoint_id == endpoint_id)
        )
        _audit(conn, actor, "webhook_endpoint.delete", endpoint_id)
    return True


def rotate(
    engine: Engine, endpoint_id: str, key_id: str, now: dt.datetime, actor: str | None = None
) -> str | None:
    """A new secret for a key's endpoint (shown once); the one it replaces keeps
    signing for ``ROTATION_GRACE_S``. None when the key has no such endpoint."""
    secret = new_secret()
    until = now + dt.timedelta(seconds=ROTATION_GRACE_S)
    with engine.begin() as conn:
        row = conn.execute(
            select(we.c.previous_secret, we.c.previous_until, we.c.retired_secrets)
            .where(we.c.id == endpoint_id, we.c.key_id == key_id)
            .with_for_update()
        ).first()
        if row is None:
            return None
        # The secret rotated out before keeps its own 24 h beside the others.
        retired = [(s, u) for s, u in retired_of(row.retired_secrets) if now < u]
        if row.previous_secret and row.previous_until and now < utc(row.previous_until):
            retired.insert(0, (row.previous_secret, utc(row.previous_until)))
        stored = json.dumps([[s, u.isoformat()] for s, u in retired]) if retired else None
        conn.execute(
            update(we)
            .where(we.c.id == endpoint_id)
            .values(
                previous_secret=we.c.secret,
                previous_until=until,
                secret=secret,
                retired_secrets=stored,
            )
        )
        _audit(conn, actor, "webhook_endpoint.rotate", endpoint_id, previous_until=until)
    return secret


def take_manual_send(engine: Engine, endpoint_id: str, now: dt.datetime) -> dt.timedelta | None:
    """Count one ping or manual retry of the endpoint, if it had fewer than
    ``MANUAL_SENDS`` in the minute before ``now``; else how long until it may
    (nothing counted)."""
    with engine.begin() as conn:
        stored = conn.execute(
            select(we.c.manual_sends).where(we.c.id == endpoint_id).with_for_update()
        ).scalar_one_or_none()
        since = now - MANUAL_WINDOW
        recent = sorted(
            t
            for t in (utc(dt.datetime.fromisoformat(v)) for v in json.loads(stored or "[]"))
            if t > since
        )
        if len(recent) >= MANUAL_SENDS:
            return recent[-MANUAL_SENDS] - since
        recent.append(now)
        conn.execute(
            update(we)
            .where(we.c.id == endpoint_id)
            .values(manual_sends=json.dumps([t.isoformat() for t in recent]))
        )
    return None


def disable(engine: Engine, endpoint_id: str, reason: str, actor: str | None = None) -> bool:
    """An operator's (or the failing rule's) stop: no more deliveries to it."""
    with engine.begin() as conn:
        done = conn.execute(
            update(we)
            .where(we.c.id == endpoint_id)
            .values(status="disabled", disabled_reason=reason)
        )
        if done.rowcount == 1:
            _audit(conn, actor, "webhook_endpoint.disable", endpoint_id, reason=reason)
    return done.rowcount == 1


def _audit(conn: Connection, actor: str | None, action: str, target: str, **details: Any) -> None:
    """An audit entry of what was done for ``actor`` (none for the system's own
    changes); never a secret."""
    if actor is not None:
        shown = {k: v.isoformat() if isinstance(v, dt.datetime) else v for k, v in details.items()}
        audit.record(conn, actor, action, target, shown)
