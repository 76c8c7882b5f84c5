"""Producer keys managed at runtime (docs/api.md#producer-keys): operators'
writes (each audited in its own transaction, never with a secret), and the
``Keyring`` every process that checks a key asks: the bootstrap keys of
``SETTLEQ_PRODUCER_KEYS`` and the database's, re-read at most every
``KEYS_TTL_S`` so that a change is honoured within seconds, without a restart.

A database key and an environment key never share an id: ``create`` refuses
an environment key's id. Should one appear later (the environment edited),
the database's row wins, revoked or not: a revocation is never undone by a
setting.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, select, update

from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.operators import audit
from shared.adapters.db.operators.tables import producer_keys as pk
from shared.adapters.db.types import utc
from shared.config.settings import ProducerKey
from shared.domain.sealing import SealError, seal, unseal
from shared.logs import mask

log = logging.getLogger("settleq.keys")

ACTIVE, REVOKED = "active", "revoked"
UNREADABLE = "unreadable"  # a Keyring's word for a key whose secret it cannot open
# How old the database's keys may be when a request is checked: a change
# (creation, scope, rotation, revocation) is honoured within this, plus a query.
KEYS_TTL_S = 1.0


class KeyExists(Exception):
    """The id is taken: by a database key (revoked ones too) or an environment key."""


class KeyMissing(Exception):
    """No database key has this id."""


class KeyRevoked(Exception):
    """The key is revoked: it cannot be scoped or rotated."""


@dataclass(frozen=True)
class StoredKey:
    key_id: str
    partitions: tuple[str, ...]
    status: str
    created_at: dt.datetime
    updated_at: dt.datetime
    revoked_at: dt.datetime | None
    previous_until: dt.datetime | None  # None: no rotated-out secret signs
    sealed: str = field(repr=False)
    sealed_previous: str | None = field(repr=False)


def _maybe_utc(value: dt.datetime | None) -> dt.datetime | None:
    return None if value is None else utc(value)


def _stored(row: Any) -> StoredKey:
    return StoredKey(
        key_id=row.key_id,
        partitions=tuple(json.loads(row.partitions)),
        status=row.status,
        created_at=utc(row.created_at),
        updated_at=utc(row.updated_at),
        revoked_at=_maybe_utc(row.revoked_at),
        previous_until=_maybe_utc(row.previous_until),
        sealed=row.secret,
        sealed_previous=row.previous_secret,
    )


def _partitions(partitions: Sequence[str]) -> str:
    return json.dumps(list(partitions))


def create(
    engine: Engine,
    key_id: str,
    partitions: Sequence[str],
    secret: str,
    seal_key: bytes,
    actor: str,
    now: dt.datetime,
    reserved: Collection[str] = (),
) -> StoredKey:
    """A new active key; ``KeyExists`` when ``key_id`` is taken (or ``reserved``:
    the environment's ids). Audited without its secret."""
    if key_id in reserved:
        raise KeyExists(key_id)
    values = {
        "key_id": key_id,
        "partitions": _partitions(partitions),
        "secret": seal(seal_key, secret, key_id),
        "status": ACTIVE,
        "created_at": now,
        "updated_at": now,
    }
    with engine.begin() as conn:
        inserted = insert_ignoring_conflicts(conn, pk).values(**values).returning(pk.c.key_id)
        if conn.execute(inserted).first() is None:
            raise KeyExists(key_id)
        audit.record(conn, actor, "producer_key.create", key_id, {"partitions": list(partitions)})
        return _locked(conn, key_id)


def get(engine: Engine, key_id: str) -> StoredKey | None:
    with engine.connect() as conn:
        row = conn.execute(select(pk).where(pk.c.key_id == key_id)).first()
    return None if row is None else _stored(row)


def listing(engine: Engine) -> list[StoredKey]:
    """Every database key, revoked ones too, by id."""
    with engine.connect() as conn:
        return [_stored(row) for row in conn.execute(select(pk).order_by(pk.c.key_id))]


def _locked(conn: Connection, key_id: str) -> StoredKey:
    row = conn.execute(select(pk).where(pk.c.key_id == key_id).with_for_update()).first()
    if row is None:
        raise KeyMissing(key_id)
    return _stored(row)


def _active(conn: Connection, key_id: str) -> StoredKey:
    found = _locked(conn, key_id)
    if found.status != ACTIVE:
        raise KeyRevoked(key_id)
    return found


def scope(
    engine: Engine, key_id: str, partitions: Sequence[str], actor: str, now: dt.datetime
) -> StoredKey:
    """Replace an active key's partitions (``KeyMissing``, ``KeyRevoked``)."""
    with engine.begin() as conn:
        was = _active(conn, key_id)
        conn.execute(
            update(pk)
            .where(pk.c.key_id == key_id)
            .values(partitions=_partitions(partitions), updated_at=now)
        )
        details = {"partitions": list(partitions), "was": list(was.partitions)}
        audit.record(conn, actor, "producer_key.scope", key_id, details)
        return _locked(conn, key_id)


def rotate(
    engine: Engine,
    key_id: str,
    secret: str,
    seal_key: bytes,
    previous_valid_for: dt.timedelta,
    actor: str,
    now: dt.datetime,
) -> StoredKey:
    """A new secret for an active key; its current one keeps signing for
    ``previous_valid_for`` (none: not at all), an older rotated-out one no more."""
    with engine.begin() as conn:
        was = _active(conn, key_id)
        keep = previous_valid_for > dt.timedelta(0)
        until = now + previous_valid_for if keep else None
        conn.execute(
            update(pk)
            .where(pk.c.key_id == key_id)
            .values(
                secret=seal(seal_key, secret, key_id),
                previous_secret=was.sealed if keep else None,
                previous_until=until,
                updated_at=now,
            )
        )
        details = {"previous_until": until.isoformat() if until else None}
        audit.record(conn, actor, "producer_key.rotate", key_id, details)
        return _locked(conn, key_id)


def revoke(engine: Engine, key_id: str, actor: str, now: dt.datetime) -> StoredKey:
    """Revoke a key (``KeyMissing``); a revoked key stays so (audited once)."""
    with engine.begin() as conn:
        was = _locked(conn, key_id)
        if was.status == REVOKED:
            return was
        conn.execute(
            update(pk)
            .where(pk.c.key_id == key_id)
            .values(status=REVOKED, revoked_at=now, updated_at=now)
        )
        audit.record(conn, actor, "producer_key.revoke", key_id, {})
        return _locked(conn, key_id)


def scopes(conn: Connection) -> dict[str, tuple[str, ...] | None]:
    """Every database key's partitions by id (None: revoked), read with no
    secret: what a process that only asks a key's scope (the webhooks
    component) needs."""
    query = select(pk.c.key_id, pk.c.partitions, pk.c.status)
    return {
        row.key_id: tuple(json.loads(row.partitions)) if row.status == ACTIVE else None
        for row in conn.execute(query)
    }


@dataclass(frozen=True)
class _Usable:
    key: ProducerKey  # every secret it has
    current: ProducerKey  # its current secret only: the previous one has expired
    previous_until: dt.datetime | None


class Keyring:
    """The producer keys a request may be signed with, by id: the database's
    (active ones; a revoked or unreadable one is refused) over the
    environment's. The database's are re-read when ``ttl_s`` old; a process
    that cannot read them raises SQLAlchemy's error (the API answers 503)."""

    def __init__(
        self,
        engine: Engine,
        configured: Sequence[ProducerKey],
        seal_key: Callable[[], bytes],
        ttl_s: float = KEYS_TTL_S,
    ) -> None:
        self.engine = engine
        self.configured = {key.key_id: key for key in configured}
        self.seal_key = seal_key
        self.ttl_s = ttl_s
        # A refused key's id maps to why: REVOKED, or UNREADABLE (its secret
        # does not open with this process's internal key).
        self._stored: dict[str, _Usable | str] | None = None
        self._loaded_at = 0.0
        self._lock = threading.Lock()
        self._unreadable: set[str] = set()

    def key(self, key_id: str, now: dt.datetime | None = None) -> ProducerKey | None:
        """The key (with the secrets that sign now), or None: unknown or refused
        (``revoked`` tells a revoked one apart)."""
        stored = self._current()
        if key_id not in stored:
            return self.configured.get(key_id)
        usable = stored[key_id]
        if not isinstance(usable, _Usable):
            return None
        until = usable.previous_until
        if until is not None and (now or dt.datetime.now(dt.UTC)) >= until:
            return usable.current
        return usable.key

    def revoked(self, key_id: str) -> bool:
        """Whether ``key_id`` is a database key an operator revoked."""
        return self._current().get(key_id) == REVOKED

    def expire(self) -> None:
        """Re-read the database's keys at the next request (this process wrote one)."""
        self._loaded_at = 0.0

    def _current(self) -> dict[str, _Usable | str]:
        stale = time.monotonic() - self._loaded_at > self.ttl_s
        if self._stored is not None and not stale:
            return self._stored
        # One thread re-reads; the others go on with what was read a moment
        # ago, unless nothing has been read yet.
        if not self._lock.acquire(blocking=self._stored is None):
            assert self._stored is not None
            return self._stored
        try:
            if self._stored is None or time.monotonic() - self._loaded_at > self.ttl_s:
                started = time.monotonic()
                self._stored = self._load()
                self._loaded_at = started
            return self._stored
        finally:
            self._lock.release()

    def _load(self) -> dict[str, _Usable | str]:
        rows = listing(self.engine)
        if not rows:
            return {}
        key = self.seal_key()
        return {row.key_id: self._usable(row, key) for row in rows}

    def _usable(self, row: StoredKey, seal_key: bytes) -> _Usable | str:
        if row.status != ACTIVE:
            return REVOKED
        try:
            current = unseal(seal_key, row.sealed, row.key_id)
            previous = (
                unseal(seal_key, row.sealed_previous, row.key_id)
                if row.sealed_previous is not None and row.previous_until is not None
                else None
            )
        except SealError:
            if row.key_id not in self._unreadable:
                self._unreadable.add(row.key_id)
                log.error(
                    "producer key %s: its stored secret does not open with this internal"
                    " signing key (SETTLEQ_INTERNAL_SIGNING_KEY changed?); it is refused",
                    row.key_id,
                )
            return UNREADABLE
        mask(current, previous)  # whichever process holds a secret never logs it
        partitions = list(row.partitions)
        now_only = ProducerKey(key_id=row.key_id, secrets=[current], partitions=partitions)
        both = [current, previous] if previous is not None else [current]
        full = ProducerKey(key_id=row.key_id, secrets=both, partitions=partitions)
        return _Usable(full, now_only, row.previous_until if previous is not None else None)
