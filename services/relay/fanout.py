"""The relay's sweep of the outbox's webhook events (docs/architecture.md#webhooks):
every ``webhook_poll_s`` it fans the events not yet handled out to the
endpoints that may see them, each with its data rendered once
(payloads.py), and marks them handled. The webhooks component then hands out
and sends each delivery. The relay sweeps the one outbox: its outcome units
to the broker (relay.py), its webhook events here.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from services.relay.payloads import data_of
from services.rounds import run_rounds
from shared.adapters.db.operators import producer_keys
from shared.adapters.db.webhooks import deliveries
from shared.adapters.db.webhooks.deliveries import Subscriber, Waiting
from shared.config.settings import ProducerKey, Settings

log = logging.getLogger("settleq.relay")

# The database's keys' partitions by id (None: revoked): producer_keys.scopes.
Scopes = Mapping[str, tuple[str, ...] | None]

BATCH = 200
# A job's event waits for its job to be readable (accepted by the front door);
# one that never is after this long goes to no one.
SUBJECT_WAIT = dt.timedelta(minutes=10)


class FanOut:
    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings, self.engine = settings, engine

    def run(self, stop: threading.Event) -> None:
        def idle() -> None:
            stop.wait(self.settings.webhook_poll_s)

        run_rounds(self.tick, stop, idle, log, "webhook fan-out", (SQLAlchemyError,))

    def tick(self) -> bool:
        """One round; whether there may be more to do at once."""
        now = dt.datetime.now(dt.UTC)
        with self.engine.connect() as conn:
            waiting = deliveries.waiting_events(conn, BATCH)
            subscribers = deliveries.subscribers(conn) if waiting else []
            # Keys created, rescoped or revoked at runtime: read each round.
            scopes = producer_keys.scopes(conn) if waiting else {}
        if not waiting:  # no write transaction for nothing: on SQLite it takes the one lock
            return False
        # Rendered before the transaction that writes them: a SQLite
        # transaction holds the one write lock, which a read here would wait on.
        decided = [self._decide(event, subscribers, now, scopes) for event in waiting]
        with self.engine.begin() as conn:
            for event, (targets, data) in zip(waiting, decided, strict=True):
                if targets is not None:
                    deliveries.fan_out(conn, event.id, data, targets, now)
        # A full batch of events that all wait for their jobs is no reason to
        # read them again at once.
        fanned = any(targets is not None for targets, _ in decided)
        return len(waiting) == BATCH and fanned

    def _decide(
        self, event: Waiting, subscribers: list[Subscriber], now: dt.datetime, scopes: Scopes
    ) -> tuple[list[str] | None, str | None]:
        """The endpoints that get the event and its data; no endpoints (None)
        while its subject cannot be read yet."""
        targets = self.targets(event, subscribers, scopes)
        data = data_of(self.engine, event) if targets else None
        if targets and data is None:
            if now - event.created_at < SUBJECT_WAIT:
                return None, None  # its job is still being accepted: next round
            log.warning("webhook event %s: its subject never became readable", event.id)
            return [], None
        return targets, data

    def targets(
        self, event: Waiting, subscribers: list[Subscriber], scopes: Scopes | None = None
    ) -> list[str]:
        """The endpoints that get ``event``: a ping its own; any other event the
        endpoints subscribed to its type whose key may submit for every
        partition it tells of (a ``*`` key for all). A key's scope is the
        database's (``scopes``), else SETTLEQ_PRODUCER_KEYS'."""
        if event.partition_keys is None:
            return [s.id for s in subscribers if s.id == event.endpoint_id]
        found = []
        for s in subscribers:
            key = self._key(s.key_id, scopes or {})
            if key is None or event.type not in s.events:
                continue
            partitions = event.partition_keys
            if ("*" in key.partitions) or (
                partitions and all(key.may_submit_for(p) for p in partitions)
            ):
                found.append(s.id)
        return found

    def _key(self, key_id: str, scopes: Scopes) -> ProducerKey | None:
        """A key's scope: the database's over the environment's (as the API's
        keyring decides, shared/adapters/db/operators/producer_keys.py); None: revoked
        or unknown."""
        if key_id not in scopes:
            return self.settings.producer_key(key_id)
        partitions = scopes[key_id]
        if partitions is None:
            return None
        # Only its scope is asked here: no secret is read.
        return ProducerKey.model_construct(key_id=key_id, secrets=[], partitions=list(partitions))
