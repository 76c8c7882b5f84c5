"""A resolution reaches the events exchange as ``settlement.resolved.<kind>``,
published at its commit or, left in the outbox, by the relay: the same
message (real PostgreSQL and RabbitMQ; docs/architecture.md#outcome-events)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from decimal import Decimal

import pika
import pytest
from sqlalchemy import Engine, func, select

from services.relay.relay import Relay
from shared.adapters.db import tables
from shared.adapters.db.disputes import queue as disputes
from shared.adapters.rabbitmq.broker import make_broker
from shared.adapters.rabbitmq.publisher import EventPublisher
from shared.domain.disputes import ResolveRequest
from shared.domain.pipeline.events import event_id, message_id
from tests.support.disputes import ACTOR, disputed_doc, job_disputes, new_vendor, row, settle
from tests.support.events import drain
from tests.support.infra import BROKER_URL, ServiceEnv


@pytest.fixture
def resolved_events(
    backend_env: ServiceEnv,
) -> Iterator[pika.adapters.blocking_connection.BlockingChannel]:
    """A consumer's queue bound to resolution events only."""
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    channel = connection.channel()
    exchange = f"{backend_env.queue_prefix}.events"
    queue = f"{backend_env.queue_prefix}.test-resolutions"
    channel.exchange_declare(exchange, exchange_type="topic", durable=True)
    channel.queue_declare(queue, durable=True)
    channel.queue_bind(queue, exchange, routing_key="settlement.resolved.#")
    try:
        yield channel
    finally:
        channel.queue_delete(queue)
        channel.exchange_delete(exchange)
        connection.close()


def unpublished(engine: Engine) -> int:
    outbox = tables.outbox
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count()).where(
                    outbox.c.published_at.is_(None), outbox.c.type == tables.OUTCOME
                )
            ).scalar_one()
        )


def test_the_relay_publishes_a_resolution_with_its_decision_note_and_dispute(
    engine: Engine,
    backend_env: ServiceEnv,
    resolved_events: pika.adapters.blocking_connection.BlockingChannel,
) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["1.50", "1.70"])]
    first, second = job_disputes(engine, settle(engine, docs), docs)
    disputes.resolve(engine, first, ResolveRequest("accept_claim", "proof of delivery"), ACTOR)
    bulk = disputes.Filter(partition_key=vendor)
    assert (
        disputes.resolve_bulk(engine, bulk, ResolveRequest("accept_model", "bulk"), 10, ACTOR) == 1
    )

    relay = Relay(backend_env.settings(relay_poll_s=0.05), engine)
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while unpublished(engine):
            assert time.monotonic() < deadline, "the relay did not publish the outbox"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(timeout=10)

    queue = f"{backend_env.queue_prefix}.test-resolutions"
    messages = drain(resolved_events, queue)
    # This vendor's two resolutions (other tests' resolutions share the
    # database); the settlement's events have other routing keys. Each
    # resolution is its own unit, so its own message.
    events = {}
    for message in messages:
        assert message.routing_key.startswith("settlement.resolved.")
        assert message.headers["x-event-count"] == len(message.events)
        assert message.message_id == message_id(e["event_id"] for e in message.events)
        for event in message.events:
            if event["partition_key"] == vendor:
                assert message.routing_key == "settlement.resolved.promo_accrual"
                events[event["supersedes_id"]] = event
    assert sorted(events) == sorted([first, second])
    for dispute_id, decision, note, amount in (
        (first, "accept_claim", "proof of delivery", "1.50"),
        (second, "accept_model", "bulk", "1.00"),
    ):
        disputed = row(engine, dispute_id)
        event = events[dispute_id]
        assert event["type"] == "settlement.resolved"
        assert (event["decision"], event["note"]) == (decision, note)
        assert Decimal(event["amount"]) == Decimal(amount)
        assert Decimal(event["delta"]) == Decimal(amount) - disputed.amount
        # Stable, and not the disputed row's event id: a consumer deduplicating
        # by event id keeps both.
        key, version = disputed.reconciliation_key, disputed.contract_version
        assert event["event_id"] == event_id(key, version, "resolved")
        assert event["event_id"] != event_id(key, version)


def test_a_resolution_is_published_at_its_commit_as_the_relay_would_publish_it(
    engine: Engine,
    backend_env: ServiceEnv,
    resolved_events: pika.adapters.blocking_connection.BlockingChannel,
) -> None:
    """docs/architecture.md#events-at-commit-and-the-relay: the API publishes a
    resolution's event right after its commit, from the row it wrote, and marks
    its outbox row; the relay, made to publish it again, sends the same message."""
    settings = backend_env.settings(relay_poll_s=0.05, relay_grace_s=0)
    broker = make_broker(settings)
    publisher = EventPublisher(broker, engine, settings.queue_prefix, settings.event_batch_max)
    queue = f"{backend_env.queue_prefix}.test-resolutions"
    outbox = tables.outbox
    try:
        vendor = new_vendor(engine)
        docs = [disputed_doc(vendor, ["1.50", "1.70"])]
        first, _ = job_disputes(engine, settle(engine, docs), docs)
        drain(resolved_events, queue)
        with engine.connect() as conn:
            before = conn.execute(select(func.coalesce(func.max(outbox.c.id), 0))).scalar_one()
        request = ResolveRequest("accept_claim", "proof of delivery")
        disputes.resolve(engine, first, request, ACTOR, publisher.publish_messages)
        bulk = disputes.Filter(partition_key=vendor)
        resolved = disputes.resolve_bulk(
            engine,
            bulk,
            ResolveRequest("accept_model", "bulk"),
            10,
            ACTOR,
            publisher.publish_messages,
        )
        assert resolved == 1
        ours = (outbox.c.id > before) & (outbox.c.type == tables.OUTCOME)
        with engine.connect() as conn:
            left = conn.execute(select(func.count()).where(ours, outbox.c.published_at.is_(None)))
            assert left.scalar_one() == 0  # marked by the publisher, not left to the relay
        at_commit = drain(resolved_events, queue)
        assert len(at_commit) == 2
        assert {e["partition_key"] for m in at_commit for e in m.events} == {vendor}

        with engine.begin() as conn:
            conn.execute(outbox.update().where(ours).values(published_at=None))
        relay = Relay(settings, engine)
        stop = threading.Event()
        thread = threading.Thread(target=relay.run, args=(stop,))
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while unpublished(engine):
                assert time.monotonic() < deadline, "the relay did not publish the outbox"
                time.sleep(0.05)
        finally:
            stop.set()
            thread.join(timeout=10)
        by_relay = drain(resolved_events, queue)
        assert sorted(by_relay, key=lambda m: m.message_id) == sorted(
            at_commit, key=lambda m: m.message_id
        )
    finally:
        broker.close()
