"""A relay on a contended host holds events back, but never past
``relay_defer_max_s`` after their commit; on an idle host it publishes at once
(real PostgreSQL and RabbitMQ; only the pressure reading is fixed)."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import Engine, func, select

from services.relay.relay import Relay
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import make_context
from shared.adapters.db import tables
from shared.domain.synthetic import promo_batch
from tests.support.factories import publish_promo_contracts, store_job
from tests.support.infra import isolated_env


class FixedPressure:
    available = True

    def __init__(self, share: float) -> None:
        self.share = share

    def since_last(self) -> float:
        return self.share


def unpublished(engine: Engine) -> int:
    outbox = tables.outbox
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).select_from(outbox).where(outbox.c.published_at.is_(None))
            ).scalar_one()
        )


@pytest.mark.parametrize(("share", "held_s"), [(1.0, 1.5), (0.0, 0.0)])
def test_events_wait_while_contended_and_no_longer_than_the_bound(
    share: float, held_s: float
) -> None:
    with isolated_env("defer") as env:
        settings = env.settings(relay_defer_max_s=1.5, relay_poll_s=0.05)
        broker = build_broker(settings)
        ctx = make_context(settings, broker)
        try:
            batch = promo_batch(40, vendors=2, seed=7, document_prefix="DEFER")
            publish_promo_contracts(
                ctx.engine, sorted({d["partition_key"] for d in batch["documents"]})
            )
            _, messages = store_job(ctx.engine, settings, ctx.internal_key, batch["documents"])
            for message in messages:
                stages.settle_chunk(ctx, message, 1)
            committed = time.monotonic()
            assert unpublished(ctx.engine) > 0

            relay = Relay(settings, ctx.engine)
            relay.pressure = FixedPressure(share)  # type: ignore[assignment]
            stop = threading.Event()
            thread = threading.Thread(target=relay.run, args=(stop,))
            thread.start()
            try:
                while unpublished(ctx.engine):
                    assert time.monotonic() - committed < held_s + 10
                    time.sleep(0.02)
                published = time.monotonic() - committed
            finally:
                stop.set()
                thread.join(timeout=10)
        finally:
            ctx.engine.dispose()
            broker.close()
    if held_s:
        assert held_s - 0.1 <= published < held_s + 3
    else:
        assert published < 1.0
