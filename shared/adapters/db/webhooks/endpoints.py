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
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, delete, insert, select, update

from shared.adapters.db.dead_letters import audit
from shared.adapters.db.tables import webhook_attempts, webhook_deliveries, webhook_endpoints
from shared.adapters.db.types import utc
from shared.domain.webhooks import EVENT_TYPES, ROTATION_GRACE_S, new_secret

we = webhook_endpoints


class UnknownEvent(ValueError):
    """An event type no endpoint can subscribe to."""


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

    def signing_secrets(self, now: dt.datetime) -> list[str]:
        return signing_secrets(self.secret, self.previous_secret, self.previous_until, now)


def signing_secrets(
    secret: str, previous: str | None, previous_until: dt.datetime | None, now: dt.datetime
) -> list[str]:
    """The secrets that sign a request sent at ``now``: the current one, and a
    rotated one during its grace."""
    if previous and previous_until is not None and now < utc(previous_until):
        return [secret, previous]
    return [secret]


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
) -> tuple[Endpoint, str]:
    """A new enabled endpoint of ``key_id`` and its secret (shown once)."""
    endpoint_id = "we_" + secrets.token_hex(12)
    secret = new_secret()
    chosen = events_of(events)
    with engine.begin() as conn:
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
        done = conn.execute(
            update(we)
            .where(we.c.id == endpoint_id, we.c.key_id == key_id)
            .values(previous_secret=we.c.secret, previous_until=until, secret=secret)
        )
        if done.rowcount == 1:
            _audit(conn, actor, "webhook_endpoint.rotate", endpoint_id, previous_until=until)
    return secret if done.rowcount == 1 else None


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
        audit(conn, actor, action, target, shown)
