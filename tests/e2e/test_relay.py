"""Outcome events reach the events exchange at least once, batched per unit, in
commit order, even when the relay is killed mid-stream; the messages it
publishes again keep their message ids (docs/architecture.md#outcome-events)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from decimal import Decimal

import pika
import pytest
from sqlalchemy import Connection, Engine, select, text

from shared.adapters.db import tables
from shared.domain.pipeline.events import event_id, message_id
from shared.domain.synthetic import promo_batch, promo_contract
from tests.support.events import distinct, drain
from tests.support.infra import BROKER_URL, ServiceEnv
from tests.support.stack import Stack

# Many small units, each one outbox row, one per relay transaction, each in
# several messages: the relay can be killed between them. Its workers leave
# every unit to the relay (worker_publishes_events off: as though each died right
# after its commit, docs/architecture.md#events-at-commit-and-the-relay), and
# the relay takes them at once.
STACK_SETTINGS = {
    "relay_batch": 1,
    "max_chunk_documents": 5,
    "event_batch_max": 5,
    "relay_grace_s": 0,
    "worker_publishes_events": False,
}
_HOLD_OUTBOX = text("LOCK TABLE outbox IN EXCLUSIVE MODE")


def let_one_batch_through(conn: Connection) -> None:
    """The test holds the outbox locked (reads go on, a relay's locking read
    waits): let the waiting relay take one batch, then lock again, which waits
    until that batch's transaction ends, and holds the relay's next one back."""
    conn.commit()
    conn.begin()
    conn.execute(_HOLD_OUTBOX)


@pytest.fixture
def events_queue(stack_env: ServiceEnv) -> Iterator[tuple[pika.BlockingConnection, str]]:
    """A consumer's durable queue bound to every settlement event."""
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    channel = connection.channel()
    exchange = f"{stack_env.queue_prefix}.events"
    queue = f"{stack_env.queue_prefix}.test-consumer"
    channel.exchange_declare(exchange, exchange_type="topic", durable=True)
    channel.queue_declare(queue, durable=True)
    channel.queue_bind(queue, exchange, routing_key="settlement.#")
    try:
        yield connection, queue
    finally:
        channel.queue_delete(queue)
        channel.exchange_delete(exchange)
        connection.close()


def unpublished(engine: Engine, job_id: str) -> int:
    """Events of the job not yet published."""
    o, L = tables.outbox, tables.ledger_entries
    with engine.connect() as conn:
        lists = conn.execute(
            select(o.c.ledger_entry_ids).where(o.c.published_at.is_(None))
        ).scalars()
        ids = [i for unit in lists if unit for i in unit]
        if not ids:
            return 0
        return len(conn.execute(select(L.c.id).where(L.c.id.in_(ids), L.c.job_id == job_id)).all())


def test_relay_killed_mid_stream_delivers_every_event_at_least_once_in_order(
    stack: Stack, engine: Engine, events_queue: tuple[pika.BlockingConnection, str]
) -> None:
    connection, queue = events_queue
    batch = promo_batch(600, vendors=3, seed=4242, document_prefix="RELAY")
    for vendor in sorted({d["partition_key"] for d in batch["documents"]}):
        path = f"/v1/contracts/promo_accrual/{vendor}/1"
        assert stack.operator().bearer("PUT", path, promo_contract()).status_code == 201
    producer = stack.producer()
    response = producer.submit(json.dumps(batch).encode())
    job_id = response.json()["job_id"]
    job = producer.wait(job_id, timeout=60)
    assert job["outcomes"]["posted"] + job["outcomes"]["disputed"] == 600

    # The relay steps batch by batch, then is killed mid-stream, waiting for
    # its next batch.
    holder = engine.connect()
    try:
        holder.begin()
        holder.execute(_HOLD_OUTBOX)
        stack._spawn("relay", ["relay"])
        channel = connection.channel()
        deadline = time.monotonic() + 60
        while channel.queue_declare(queue, passive=True).method.message_count < 40:
            assert time.monotonic() < deadline, stack.log("relay")
            let_one_batch_through(holder)
        stack.kill("relay")
        # Its backend, still waiting, goes too.
        holder.execute(
            text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'relay'"
            )
        )
        holder.commit()
    finally:
        holder.close()
    assert unpublished(engine, job_id) > 0, "the relay finished before it could be killed"

    stack._spawn("relay", ["relay"])  # a new relay takes over where the old one stopped
    deadline = time.monotonic() + 60
    while unpublished(engine, job_id):
        assert time.monotonic() < deadline, stack.log("relay")
        time.sleep(0.1)

    received = drain(channel, queue)
    o, L = tables.outbox, tables.ledger_entries
    with engine.connect() as conn:
        ledger = {
            (r.reconciliation_key, r.contract_version): r
            for r in conn.execute(select(L).where(L.c.job_id == job_id)).all()
        }
        # Commit order: the outbox row of a unit, then its ledger rows in order.
        position = {
            ledger_id: (unit.id, ledger_id)
            for unit in conn.execute(select(o.c.id, o.c.ledger_entry_ids)).all()
            if unit.ledger_entry_ids
            for ledger_id in unit.ledger_entry_ids
        }
    order = {event_id(k, v): position[r.id] for (k, v), r in ledger.items()}
    unique = distinct(received)
    events = sum(len(m.events) for m in received)
    assert events >= len(unique) == len(ledger) == 600  # at least once, deduped: exact
    for message in received:
        assert message.headers["x-event-count"] == len(message.events) <= 5
        assert message.message_id == message_id(e["event_id"] for e in message.events)
        assert len({e["type"] for e in message.events}) == 1  # one outcome and kind
        assert len({order[e["event_id"]][0] for e in message.events}) == 1  # and one unit
    routing_keys = {e["event_id"]: m.routing_key for m in received for e in m.events}
    for eid, body in unique.items():
        row = ledger[(body["reconciliation_key"], body["contract_version"])]
        assert body["event_id"] == eid == event_id(row.reconciliation_key, row.contract_version)
        assert (
            routing_keys[eid]
            == f"settlement.{row.outcome}.promo_accrual"
            == f"{body['type']}.promo_accrual"
        )
        assert Decimal(body["amount"]) == row.amount and isinstance(body["amount"], str)
        assert Decimal(body["delta"]) == row.delta and body["correlation_id"] == row.correlation_id
    # A message published again (the first relay died before marking its unit)
    # is the same message: same id, same events.
    by_id: dict[str, list[list[dict]]] = {}
    for message in received:
        by_id.setdefault(message.message_id, []).append(message.events)
    assert all(copy == copies[0] for copies in by_id.values() for copy in copies)
    # First deliveries arrive in commit order: unit after unit and, within a
    # message, ledger row after ledger row.
    seen: set[str] = set()
    units: list[int] = []
    for message in received:
        fresh = [order[e["event_id"]] for e in message.events if e["event_id"] not in seen]
        seen.update(e["event_id"] for e in message.events)
        assert fresh == sorted(fresh)
        units += [unit for unit, _ in fresh[:1]]
    assert units == sorted(units)
    print(
        f"\nrelay: {len(received)} messages ({len(by_id)} distinct), {events} deliveries"
        f" for {len(unique)} events after one kill"
    )
