"""A settled job's outcome events reach a consumer batched, one message per
committed unit, outcome and kind, at most ``event_batch_max`` events each,
whether the committing worker publishes them
(docs/architecture.md#events-at-commit-and-the-relay) or the relay does:
the same messages, ids and bodies; a relay that stops after publishing but
before marking its units is followed by one that publishes the same messages
again, with the same message ids (real PostgreSQL and RabbitMQ;
docs/architecture.md#outcome-events)."""

from __future__ import annotations

import math
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pika
import pytest
from sqlalchemy import Engine, func, select
from sqlalchemy import exc as sa_exc

from services.relay.relay import Relay
from services.worker import stages
from services.worker.actors import build_broker
from services.worker.context import make_context
from shared.adapters.db import outbox, tables
from shared.adapters.db.ledger.read.events import event_rows
from shared.adapters.db.periods import close, reads
from shared.config.settings import Settings
from shared.domain.pipeline.events import PERIOD_CLOSED, event_id, message_id
from shared.domain.synthetic import promo_batch
from tests.support.events import Delivery, distinct, drain
from tests.support.factories import publish_promo_contracts, store_job
from tests.support.infra import BROKER_URL, isolated_env

BATCH_MAX = 7  # small, so that a unit's 32 posted and 8 disputed events split


def _settle_job(settings: Settings, publish_at_commit: bool) -> Engine:
    """200 lines in 5 units of 40 (one in five disputed) settled by a worker
    whose events are published at commit, or left in the outbox for the relay."""
    broker = build_broker(settings)
    ctx = make_context(settings, broker)
    if not publish_at_commit:
        ctx.events = None
    try:
        batch = promo_batch(200, vendors=2, disputed_every=5, seed=11, document_prefix="BAT")
        publish_promo_contracts(
            ctx.engine, sorted({d["partition_key"] for d in batch["documents"]})
        )
        _, messages = store_job(ctx.engine, settings, ctx.internal_key, batch["documents"])
        for message in messages:
            stages.settle_chunk(ctx, message, 1)
    finally:
        broker.close()
    return ctx.engine


@pytest.fixture
def env() -> Iterator[tuple[Settings, Any]]:
    with isolated_env("batches") as env:
        settings = env.settings(
            event_batch_max=BATCH_MAX,
            relay_batch=2,
            relay_poll_s=0.05,
            relay_grace_s=0,
            max_chunk_documents=4,
        )
        yield settings, env


@pytest.fixture
def settled(env: tuple[Settings, Any]) -> Iterator[tuple[Settings, Engine]]:
    """Its own ledger holding one settled job, its outcome events waiting in the outbox."""
    settings, _ = env
    engine = _settle_job(settings, publish_at_commit=False)
    try:
        yield settings, engine
    finally:
        engine.dispose()


@pytest.fixture
def consumer(env: tuple[Settings, Any]) -> Iterator[tuple[Any, str]]:
    """A consumer's durable queue bound to every settlement event."""
    settings, _ = env
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    channel = connection.channel()
    exchange, queue = f"{settings.queue_prefix}.events", f"{settings.queue_prefix}.test-consumer"
    channel.exchange_declare(exchange, exchange_type="topic", durable=True)
    channel.queue_declare(queue, durable=True)
    channel.queue_bind(queue, exchange, routing_key="settlement.#")
    try:
        yield channel, queue
    finally:
        channel.queue_delete(queue)
        connection.close()


def unpublished(engine: Engine, kind: str = tables.OUTCOME) -> int:
    o = tables.outbox
    with engine.connect() as conn:
        return int(
            conn.execute(
                select(func.count())
                .select_from(o)
                .where(o.c.published_at.is_(None), o.c.type == kind)
            ).scalar_one()
        )


def run_relay(settings: Settings, engine: Engine, until: Any, timeout: float = 30) -> None:
    """A relay of its own in a thread until ``until()`` holds (or it stops itself)."""
    stop = threading.Event()
    relay = Relay(settings, engine)
    thread = threading.Thread(target=relay.run, args=(stop,))
    thread.start()
    try:
        deadline = time.monotonic() + timeout
        while not (until() or stop.is_set()):
            assert time.monotonic() < deadline, "the relay did not get there"
            time.sleep(0.02)
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not thread.is_alive()


def ledger_events(engine: Engine) -> dict[str, Any]:
    """The ledger's rows by the event id each is published under."""
    L = tables.ledger_entries
    with engine.connect() as conn:
        rows = conn.execute(select(L)).all()
    return {event_id(r.reconciliation_key, r.contract_version, r.outcome): r for r in rows}


def expected_messages(engine: Engine) -> int:
    """One message per unit, outcome and kind, split after every BATCH_MAX."""
    o, L = tables.outbox, tables.ledger_entries
    with engine.connect() as conn:
        units = (
            conn.execute(select(o.c.ledger_entry_ids).where(o.c.type == tables.OUTCOME))
            .scalars()
            .all()
        )
        outcome = dict(conn.execute(select(L.c.id, L.c.outcome)).all())
    total = 0
    for unit in units:
        groups = Counter(outcome[i] for i in unit)
        total += sum(math.ceil(n / BATCH_MAX) for n in groups.values())
    return total


def check_message(message: Delivery, ledger: dict[str, Any]) -> None:
    assert message.content_type == "application/json"
    assert message.headers["x-event-count"] == len(message.events)
    assert 1 <= len(message.events) <= BATCH_MAX
    assert message.message_id == message_id(e["event_id"] for e in message.events)
    ids = [ledger[e["event_id"]].id for e in message.events]
    assert ids == sorted(ids)  # commit order within the message
    for event in message.events:
        row = ledger[event["event_id"]]
        assert message.routing_key == f"settlement.{row.outcome}.{row.kind}"
        assert event["type"] == f"settlement.{row.outcome}"
        assert (event["amount"], event["delta"]) == (f"{row.amount:f}", f"{row.delta:f}")


def test_a_settled_jobs_events_arrive_batched_each_once(
    settled: tuple[Settings, Engine], consumer: tuple[Any, str]
) -> None:
    settings, engine = settled
    channel, queue = consumer
    run_relay(settings, engine, lambda: unpublished(engine) == 0)

    messages = drain(channel, queue)
    ledger = ledger_events(engine)
    assert len(ledger) == 200
    assert len(messages) == expected_messages(engine) == 5 * (5 + 2)
    for message in messages:
        check_message(message, ledger)
    delivered = [e["event_id"] for m in messages for e in m.events]
    assert sorted(delivered) == sorted(ledger)  # every event once, no more
    assert len({m.message_id for m in messages}) == len(messages)


def test_the_committing_worker_publishes_what_the_relay_would(
    env: tuple[Settings, Any], consumer: tuple[Any, str]
) -> None:
    """docs/architecture.md#events-at-commit-and-the-relay:
    each unit's events leave with its commit, from what the writer wrote, as
    the very messages the relay makes from the ledger: same ids,
    routing keys, headers and bodies."""
    settings, _ = env
    channel, queue = consumer
    engine = _settle_job(settings, publish_at_commit=True)
    try:
        at_commit = drain(channel, queue)
        assert unpublished(engine) == 0  # each unit marked by its worker
        ledger = ledger_events(engine)
        assert len(at_commit) == expected_messages(engine) == 5 * (5 + 2)
        for message in at_commit:
            check_message(message, ledger)
        assert sorted(e["event_id"] for m in at_commit for e in m.events) == sorted(ledger)
        # The relay, made to publish the same units again, sends the same messages.
        with engine.begin() as conn:
            o = tables.outbox
            conn.execute(o.update().where(o.c.type == tables.OUTCOME).values(published_at=None))
        run_relay(settings, engine, lambda: unpublished(engine) == 0)
        by_relay = drain(channel, queue)
        assert {m.message_id: m for m in by_relay} == {m.message_id: m for m in at_commit}
    finally:
        engine.dispose()


def test_a_relay_leaves_a_unit_to_its_worker_for_the_grace(
    env: tuple[Settings, Any], consumer: tuple[Any, str]
) -> None:
    settings, _ = env
    channel, queue = consumer
    engine = _settle_job(settings, publish_at_commit=False)
    try:
        with engine.connect() as conn:
            o = tables.outbox
            oldest = conn.execute(
                select(func.min(o.c.created_at)).where(o.c.type == tables.OUTCOME)
            ).scalar_one()
            now = conn.execute(select(func.now())).scalar_one()
        grace = (now - oldest).total_seconds() + 3600
        with engine.begin() as conn:
            assert outbox.next_batch(conn, 100, BATCH_MAX, grace).outbox_ids == []
        with engine.begin() as conn:
            assert len(outbox.next_batch(conn, 100, BATCH_MAX, 0).outbox_ids) == 5
    finally:
        engine.dispose()


def test_a_relay_stopped_before_marking_is_followed_by_the_same_messages(
    settled: tuple[Settings, Engine],
    consumer: tuple[Any, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings, engine = settled
    channel, queue = consumer
    # The first relay publishes its first batch (two units), the broker confirms
    # it, and the relay dies before the mark is committed.
    mark = outbox.mark_published
    died = threading.Event()

    def die_before_marking(conn: Any, ids: Any) -> None:
        died.set()
        raise sa_exc.OperationalError("UPDATE outbox", {}, Exception("relay killed"))

    monkeypatch.setattr(outbox, "mark_published", die_before_marking)
    run_relay(settings, engine, died.is_set)
    first = drain(channel, queue)
    assert unpublished(engine) == 5  # nothing was marked
    assert len(first) == 2 * (5 + 2)

    monkeypatch.setattr(outbox, "mark_published", mark)
    run_relay(settings, engine, lambda: unpublished(engine) == 0)  # a new relay takes over
    second = drain(channel, queue)

    ledger = ledger_events(engine)
    for message in first + second:
        check_message(message, ledger)
    # The first two units went out again as the same messages, with the same ids.
    again = {m.message_id: m.events for m in second}
    assert {m.message_id for m in first} <= set(again)
    assert all(again[m.message_id] == m.events for m in first)
    # A consumer deduplicating by event id holds exactly the ledger's rows.
    assert len(first) + len(second) == expected_messages(engine) + len(first)
    assert set(distinct(first + second)) == set(ledger)
    assert len(ledger) == 200


def test_a_connection_lost_in_the_relays_ledger_read_is_an_error_the_relay_pauses_on(
    settled: tuple[Settings, Engine],
) -> None:
    # The read is fetched as the driver's tuples; a lost connection must still
    # reach the relay as SQLAlchemy's error, which it pauses and retries on.
    from services.relay.session import _DB_ERRORS

    _, engine = settled
    with engine.connect() as conn:
        pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
        with engine.connect() as other:
            other.exec_driver_sql(f"SELECT pg_terminate_backend({int(pid)})")
        with pytest.raises(_DB_ERRORS):
            event_rows(conn, [1, 2, 3])


def test_every_event_carries_its_period_and_a_close_publishes_period_closed_once(
    settled: tuple[Settings, Engine], consumer: tuple[Any, str]
) -> None:
    """docs/api.md#periods-and-the-close: an outcome event names the row's
    booking period; the close publishes one ``period.closed`` message, whose
    id names the period, and a republish keeps it."""
    settings, engine = settled
    channel, queue = consumer
    channel.queue_bind(queue, f"{settings.queue_prefix}.events", routing_key=PERIOD_CLOSED)
    name = reads.open_name(engine)
    close.close(
        engine, name, "NEXT", None, "operator:test", settings.journaling(), settings.close_wait_s
    )
    run_relay(settings, engine, lambda: unpublished(engine, PERIOD_CLOSED) == 0)
    messages = drain(channel, queue)
    closes = [m for m in messages if m.routing_key == PERIOD_CLOSED]
    settlement = [m for m in messages if m.routing_key != PERIOD_CLOSED]
    assert {e["period"] for m in settlement for e in m.events} == {name}
    [closed] = closes
    assert closed.message_id == f"period.closed:{name}" and closed.headers["x-event-count"] == 1
    body = closed.body
    summary = reads.summary(engine, name, settings.journaling())
    assert body["type"] == PERIOD_CLOSED and body["period"] == name and body["next"] == "NEXT"
    assert body["rows"] == 200 == summary.rows
    assert body["journal_sha256"] == summary.journal_sha256
    assert body["totals"] == [
        {k: t[k] for k in ("kind", "outcome", "currency", "delta")} for t in summary.totals
    ]
    # Published again (a relay that died before marking it): the same message id.
    with engine.begin() as conn:
        o = tables.outbox
        conn.execute(o.update().where(o.c.type == PERIOD_CLOSED).values(published_at=None))
    run_relay(settings, engine, lambda: unpublished(engine, PERIOD_CLOSED) == 0)
    [again] = drain(channel, queue)
    assert (again.message_id, again.body) == (closed.message_id, closed.body)
