"""The API's wiring: engine, broker and keys, made in the app's lifespan."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from dramatiq.brokers.rabbitmq import RabbitmqBroker
from fastapi import Request
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from services.api.feed_watch import FeedWatch
from services.api.intake.publishers import Publishers
from services.api.queue_stats import QueueStats
from shared.adapters.db.migrate import InternalKey
from shared.adapters.db.operators.producer_keys import Keyring
from shared.adapters.rabbitmq.publisher import EventPublisher
from shared.config.settings import Settings
from shared.domain.pipeline.events import Message

log = logging.getLogger("settleq.api")


@dataclass
class ApiContext:
    settings: Settings
    engine: Engine
    broker: RabbitmqBroker
    queue_depth: QueueStats  # backpressure, the dashboard and /metrics read it
    publishers: Publishers  # every publish runs here: their connections stay alive
    # A resolution's events, published at its commit
    # (docs/architecture.md#events-at-commit-and-the-relay).
    events: EventPublisher
    # SETTLEQ_READ_DATABASE_URL's replica, or None: reads that may lag
    # (docs/operations.md#reads-from-a-replica); ``reader`` picks the engine.
    replica: Engine | None = None
    # Read when first needed, so the API starts (and answers 503) while the
    # database is down.
    _key: InternalKey = field(init=False)
    # Producer keys, the environment's and the database's (re-read every second
    # or so: docs/api.md#producer-keys); the latter's secrets are sealed with
    # the internal key.
    keys: Keyring = field(init=False)
    # Where the ledger feed ends, read once for every consumer waiting on it.
    feed_watch: FeedWatch = field(init=False)

    def __post_init__(self) -> None:
        self._key = InternalKey(self.engine, self.settings.internal_signing_key)
        self.keys = Keyring(self.engine, self.settings.producer_keys, lambda: self.internal_key)
        self.feed_watch = FeedWatch(self.engine)

    @property
    def reader(self) -> Engine:
        """The engine of reads that may lag: the replica's if there is one."""
        return self.replica or self.engine

    async def settled_reader(self, settled: Callable[[Engine], bool], what: str) -> Engine:
        """Where a read of something that no longer changes is made: the replica
        once it shows it ``settled`` (a closed period, a completed job), since a
        standby replays commits in their WAL order and so has every row that
        committed before it; else (not settled there yet, or a replica that does
        not answer) the primary (docs/operations.md#reads-from-a-replica)."""
        if self.replica is None:
            return self.engine
        try:
            there = await run_in_threadpool(settled, self.replica)
        except SQLAlchemyError:
            log.warning("the read replica did not answer; reading %s from the primary", what)
            there = False
        return self.replica if there else self.engine

    def publish_events(self, outbox_ids: Sequence[int], messages: Sequence[Message]) -> bool:
        """Publish committed units' events on a publishing thread (its connection
        kept alive); whether they went out (else the relay sends them)."""
        return self.publishers.submit(self.events.publish_messages, outbox_ids, messages).result()

    @property
    def internal_key(self) -> bytes:
        return self._key.get()


def get_context(request: Request) -> ApiContext:
    ctx: ApiContext = request.app.state.ctx
    return ctx
