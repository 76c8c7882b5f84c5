"""Everything a worker stage needs, made once per process (never at import)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import redis
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from sqlalchemy import Engine

from shared.adapters.db.contracts import load_bodies
from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import InternalKey
from shared.adapters.leases import ClaimStore
from shared.adapters.rabbitmq.publisher import EventPublisher
from shared.config.settings import Settings
from shared.domain.kinds.base import Kind
from shared.domain.pipeline.settlement import ChunkPlan
from shared.domain.pipeline.units import ChunkOutcome, ChunkRef

CommitHook = Callable[[ChunkRef, ChunkPlan, ChunkOutcome], None]


def _ignore(ref: ChunkRef, plan: ChunkPlan, outcome: ChunkOutcome) -> None:
    pass


@dataclass
class ContractCache:
    """Published contract versions are immutable, so a parsed one is kept forever."""

    engine: Engine
    _known: dict[tuple[str, str, int], Any] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def load(
        self, kind: Kind[Any, Any], wanted: Iterable[tuple[str, int]]
    ) -> dict[tuple[str, int], Any]:
        wanted = set(wanted)
        missing = [w for w in wanted if (kind.name, *w) not in self._known]
        if missing:
            with self.engine.connect() as conn:
                bodies = load_bodies(conn, kind.name, missing)
            parsed = {k: kind.contract_model.model_validate(b) for k, b in bodies.items()}
            with self._lock:
                for (partition, version), contract in parsed.items():
                    self._known[(kind.name, partition, version)] = contract
        return {w: self._known[(kind.name, *w)] for w in wanted if (kind.name, *w) in self._known}


@dataclass
class WorkerContext:
    settings: Settings
    engine: Engine
    claims: ClaimStore
    # Read when first needed: the runner waits for it before consuming, so a
    # worker that starts before its database waits instead of dying.
    key: InternalKey
    broker: RabbitmqBroker
    contracts: ContractCache
    # Called after each unit of work's transaction commits (metrics count there).
    on_commit: CommitHook = _ignore
    # Publishes each committed unit's events (None: the relay does, after its grace).
    events: EventPublisher | None = None

    @property
    def internal_key(self) -> bytes:
        return self.key.get()


def make_context(settings: Settings, broker: RabbitmqBroker) -> WorkerContext:
    engine = make_engine(
        settings.database_url, pool_size=settings.worker_threads + 1, component="settleq-worker"
    )
    client = redis.Redis.from_url(settings.redis_url, socket_timeout=5, socket_connect_timeout=5)
    return WorkerContext(
        settings=settings,
        engine=engine,
        claims=ClaimStore(client, settings.queue_prefix, settings.claim_lease_ms),
        key=InternalKey(engine, settings.internal_signing_key),
        broker=broker,
        contracts=ContractCache(engine),
        events=(
            EventPublisher(broker, engine, settings.queue_prefix, settings.event_batch_max)
            if settings.worker_publishes_events
            else None
        ),
    )
