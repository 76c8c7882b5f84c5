"""Events published by the committing worker (docs/architecture.md#events-at-commit-and-the-relay)
under the faults that can strike between a commit and its publish: units the
worker leaves unpublished (as one that died right after its commit does, or
one with ``worker_publishes_events`` off), the broker down there, and a unit the
worker published and the relay publishes again. Delivery stays at least once,
with the same message ids and event ids whoever publishes (real stack,
PostgreSQL, RabbitMQ)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pika
import pytest
from sqlalchemy import Engine, func, select, update

from shared.adapters.db import tables
from shared.domain.pipeline.events import event_id
from shared.domain.synthetic import promo_batch, promo_contract
from tests.support.booking_lock import BookingLock
from tests.support.events import Delivery, delivery, distinct
from tests.support.infra import BROKER_URL, ServiceEnv
from tests.support.stack import Stack, log_events

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "logs" / "test_events_at_commit"
# Two chunks: as many as the compute_heavy worker's threads, so that both wait
# together for the booking lock a test holds.
LINES, DOCUMENTS_PER_CHUNK = 120, 3


class Consumer:
    """A durable queue bound to every settlement event, read over a connection
    of its own each time (it outlives a broker restart). Named beside the
    stack's queues, not among them, so that their drain ignores it."""

    def __init__(self, prefix: str) -> None:
        self.exchange, self.queue = f"{prefix}.events", f"{prefix}-commit-consumer"
        with _channel() as channel:
            channel.exchange_declare(self.exchange, exchange_type="topic", durable=True)
            channel.queue_declare(self.queue, durable=True)
            channel.queue_bind(self.queue, self.exchange, routing_key="settlement.#")

    def drain(self) -> list[Delivery]:
        found = []
        with _channel() as channel:
            while True:
                method, properties, body = channel.basic_get(self.queue, auto_ack=True)
                if method is None:
                    return found
                found.append(delivery(method, properties, body))

    def delete(self) -> None:
        with _channel() as channel:
            channel.queue_delete(self.queue)


@contextmanager
def _channel() -> Iterator[Any]:
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        yield connection.channel()
    finally:
        if connection.is_open:
            connection.close()


@pytest.fixture
def consumer(stack_env: ServiceEnv) -> Iterator[Consumer]:
    found = Consumer(stack_env.queue_prefix)
    try:
        yield found
    finally:
        found.delete()


def _stack(env: ServiceEnv, name: str, grace_s: float, **worker: Any) -> Stack:
    """An API, a fast_path worker, a compute_heavy worker with the settings
    ``worker`` and a relay sweeping after ``grace_s``."""
    logs = ARTIFACTS / name
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(
        env, logs, max_chunk_documents=DOCUMENTS_PER_CHUNK, relay_grace_s=grace_s, relay_poll_s=0.1
    )
    try:
        stack.start_api()
        stack.start_worker("fast_path")
        stack.start_worker("compute_heavy", **worker)
        stack._spawn("relay", ["relay"])
    except BaseException:
        stack.stop()
        raise
    return stack


def _submit(stack: Stack, seed: int, prefix: str) -> tuple[str, dict[str, Any]]:
    """A small batch of one vendor; its job id and the job once completed."""
    job_id = _post(stack, seed, prefix)
    job = stack.producer().wait(job_id, timeout=60)
    assert job["state"] == "completed", job
    return job_id, job


def _post(stack: Stack, seed: int, prefix: str) -> str:
    """A small batch of one vendor, submitted; its job id."""
    batch = promo_batch(LINES, vendors=1, seed=seed, document_prefix=prefix)
    batch["documents"] = batch["documents"][: 2 * DOCUMENTS_PER_CHUNK]
    for vendor in sorted({d["partition_key"] for d in batch["documents"]}):
        path = f"/v1/contracts/promo_accrual/{vendor}/1"
        assert stack.operator().bearer("PUT", path, promo_contract()).status_code in (200, 201)
    return str(stack.producer().submit(json.dumps(batch).encode()).json()["job_id"])


def _ledger_event_ids(engine: Engine, job_id: str) -> set[str]:
    L = tables.ledger_entries
    with engine.connect() as conn:
        rows = conn.execute(
            select(L.c.reconciliation_key, L.c.contract_version).where(L.c.job_id == job_id)
        ).all()
    assert len(rows) == len(set(rows))  # each identity once
    return {event_id(key, version) for key, version in rows}


def _dead_letters(engine: Engine, job_id: str) -> int:
    d = tables.dead_letters
    with engine.connect() as conn:
        count = conn.execute(select(func.count()).where(d.c.job_id == job_id)).scalar_one()
    return int(count)


def _wait_for_events(consumer: Consumer, wanted: set[str], timeout: float) -> list[Delivery]:
    """Deliveries until every wanted event id came (at least once)."""
    received: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while not wanted <= set(distinct(received)):
        assert time.monotonic() < deadline, f"{len(wanted - set(distinct(received)))} missing"
        time.sleep(0.05)
        received += consumer.drain()
    return received


def _copies_agree(received: list[Delivery]) -> dict[str, int]:
    """Every copy of one message id is the same message; how many came of each."""
    by_id: dict[str, list[Delivery]] = {}
    for message in received:
        by_id.setdefault(message.message_id, []).append(message)
    for copies in by_id.values():
        assert all(copy == copies[0] for copy in copies)
    return {message_id: len(copies) for message_id, copies in by_id.items()}


def test_units_a_worker_leaves_unpublished_are_the_relays_once_its_grace_passed(
    stack_env: ServiceEnv, engine: Engine, consumer: Consumer
) -> None:
    # A worker with worker_publishes_events off leaves every unit to the relay, as one
    # killed between each commit and its publish does.
    stack = _stack(stack_env, "left", grace_s=1.0, worker_publishes_events=False)
    try:
        job_id, job = _submit(stack, seed=301, prefix="LEFT")
        completed = time.monotonic()
        wanted = _ledger_event_ids(engine, job_id)
        assert len(wanted) == job["outcomes"]["posted"] + job["outcomes"]["disputed"] > 0
        # The relay sweeps its units once the grace has passed.
        received = _wait_for_events(consumer, wanted, timeout=20)
        lag = time.monotonic() - completed
        assert lag < 1.0 + 5, f"events {lag:.1f} s after completion"
        time.sleep(1.5)  # anything published twice arrives by now
        received += consumer.drain()
        assert set(distinct(received)) == wanted == _ledger_event_ids(engine, job_id)
        assert all(n == 1 for n in _copies_agree(received).values())  # the relay's, once
        records = log_events(stack.log("compute_heavy", tail=None))
        assert not [r for r in records if r.get("stage") == "publish"]  # the worker sent none
        assert _dead_letters(engine, job_id) == 0
        print(f"\nleft to the relay: every event {lag:.2f} s after completion")
    finally:
        stack.stop()


@pytest.mark.serial  # stops the machine's RabbitMQ
def test_the_broker_down_at_publish_time_does_not_fail_the_unit(
    stack_env: ServiceEnv, engine: Engine, consumer: Consumer
) -> None:
    stack = _stack(stack_env, "broker_down", grace_s=1.0)
    lock = BookingLock(stack_env.database_url)
    try:
        # Both chunks wait for the booking lock (held here, as a close holds
        # it); the broker goes away; then they commit and try to publish, and
        # the broker comes back after their attempts.
        with lock.held():
            job_id = _post(stack, seed=302, prefix="DOWN")
            lock.wait_for("compute_heavy", count=2)
            subprocess.run(["rabbitmqctl", "-q", "stop_app"], check=True, timeout=120)
        try:
            _wait_for_log(stack, "compute_heavy", "left_to_relay", count=2, timeout=60)
        finally:
            subprocess.run(["rabbitmqctl", "-q", "start_app"], check=True, timeout=120)
            subprocess.run(["rabbitmqctl", "-q", "await_startup"], check=True, timeout=120)
        job = stack.producer().wait(job_id, timeout=60)
        wanted = _ledger_event_ids(engine, job_id)
        received = _wait_for_events(consumer, wanted, timeout=60)
        time.sleep(2)
        received += consumer.drain()
        _copies_agree(received)
        assert set(distinct(received)) == wanted
        after = stack.producer().wait(job_id, timeout=30)
        assert after["outcomes"] == job["outcomes"] and _dead_letters(engine, job_id) == 0
        # The worker said, in one line each, which units it left to the relay;
        # pika's errors of its attempts are not logged; no unit failed.
        records = log_events(stack.log("compute_heavy", tail=None))
        said = [r for r in records if r.get("logger") == "settleq.events"]
        left = [r for r in said if r["level"] == "warning"]
        assert left and all("left to the relay" in r["event"] for r in left)
        assert not [r for r in said if "exception" in r]
        # Each unit's publish stage says whether its events went out or wait.
        stages = [r for r in said if r.get("stage") == "publish"]
        assert stages and {r["status"] for r in stages} <= {"ok", "left_to_relay"}
        assert "left_to_relay" in {r["status"] for r in stages}
        settled = [r for r in records if r.get("stage") == "settle"]
        assert settled and all(r["status"] == "ok" for r in settled), settled
    finally:
        lock.close()
        stack.stop()


def test_a_worker_and_the_relay_publishing_one_unit_send_the_same_messages(
    stack_env: ServiceEnv, engine: Engine, consumer: Consumer
) -> None:
    stack = _stack(stack_env, "both", grace_s=0.2)
    try:
        job_id, _ = _submit(stack, seed=303, prefix="BOTH")
        wanted = _ledger_event_ids(engine, job_id)
        received = _wait_for_events(consumer, wanted, timeout=20)  # the worker's
        # As though the worker's marks were lost after its publish (its database
        # connection gone): the relay publishes each unit again.
        _unmark(engine, job_id)
        deadline = time.monotonic() + 20
        while _copies_agree(received) and min(_copies_agree(received).values()) < 2:
            assert time.monotonic() < deadline, stack.log("relay")
            time.sleep(0.1)
            received += consumer.drain()
        time.sleep(1)
        received += consumer.drain()
        copies = _copies_agree(received)
        assert set(distinct(received)) == wanted
        # Every message twice, the same each time: the worker's and the relay's.
        assert sorted(set(copies.values())) == [2], copies
    finally:
        stack.stop()


def _unmark(engine: Engine, job_id: str) -> None:
    """Mark the outbox rows of the job's units unpublished."""
    o, L = tables.outbox, tables.ledger_entries
    with engine.begin() as conn:
        mine = set(conn.execute(select(L.c.id).where(L.c.job_id == job_id)).scalars())
        units = [
            r.id
            for r in conn.execute(select(o.c.id, o.c.ledger_entry_ids)).all()
            if mine & set(r.ledger_entry_ids or ())
        ]
        assert units
        conn.execute(update(o).where(o.c.id.in_(units)).values(published_at=None))


def _wait_for_log(stack: Stack, name: str, status: str, count: int, timeout: float) -> None:
    """Until the process ``name`` logged ``count`` publish events of ``status``."""
    deadline = time.monotonic() + timeout
    while True:
        records = log_events(stack.log(name, tail=None))
        if (
            sum(1 for r in records if r.get("stage") == "publish" and r["status"] == status)
            >= count
        ):
            return
        assert time.monotonic() < deadline, stack.log(name)
        time.sleep(0.1)
