"""Events published by the committing worker (docs/architecture.md#events-at-commit-and-the-relay)
under the faults that can strike between a commit and its publish: the worker
killed there, the broker down there, and the relay publishing the same unit
at the same time. Delivery stays at least once, with the same message ids and
event ids whoever publishes (real stack, PostgreSQL, RabbitMQ)."""

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
from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from shared.domain.pipeline.events import event_id
from shared.domain.synthetic import promo_batch, promo_contract
from shared.faults import Faults
from tests.support.events import Delivery, delivery, distinct
from tests.support.infra import BROKER_URL, ServiceEnv
from tests.support.stack import Stack, log_events, wait_until_drained

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts" / "logs" / "test_events_at_commit"
# Two chunks: as many as the compute_heavy worker's threads, so a worker paused
# after each commit still commits the whole job.
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


def _stack(env: ServiceEnv, name: str, worker_faults: Faults, grace_s: float) -> Stack:
    """An API, a fast_path worker, a compute_heavy worker with ``worker_faults``
    and a relay sweeping after ``grace_s``."""
    logs = ARTIFACTS / name
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(
        env, logs, max_chunk_documents=DOCUMENTS_PER_CHUNK, relay_grace_s=grace_s, relay_poll_s=0.1
    )
    try:
        stack.start_api()
        stack.start_worker("fast_path")
        stack.start_worker("compute_heavy", faults=worker_faults)
        stack._spawn("relay", ["relay"], faults=Faults())
    except BaseException:
        stack.stop()
        raise
    return stack


def _submit(stack: Stack, seed: int, prefix: str) -> tuple[str, dict[str, Any]]:
    """A small batch of one vendor; its job id and the job once completed."""
    batch = promo_batch(LINES, vendors=1, seed=seed, document_prefix=prefix)
    batch["documents"] = batch["documents"][: 2 * DOCUMENTS_PER_CHUNK]
    for vendor in sorted({d["partition_key"] for d in batch["documents"]}):
        path = f"/v1/contracts/promo_accrual/{vendor}/1"
        assert stack.operator().bearer("PUT", path, promo_contract()).status_code in (200, 201)
    producer = stack.producer()
    job_id = producer.submit(json.dumps(batch).encode()).json()["job_id"]
    job = producer.wait(job_id, timeout=60)
    assert job["state"] == "completed", job
    return job_id, job


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


def test_a_worker_killed_between_commit_and_publish_leaves_its_units_to_the_relay(
    stack_env: ServiceEnv, engine: Engine, consumer: Consumer
) -> None:
    stack = _stack(stack_env, "killed", Faults(publish_pause_s=600), grace_s=1.0)
    try:
        job_id, job = _submit(stack, seed=301, prefix="KILL")
        completed = time.monotonic()
        wanted = _ledger_event_ids(engine, job_id)
        assert len(wanted) == job["outcomes"]["posted"] + job["outcomes"]["disputed"] > 0
        # The worker sleeps after each commit, before its publish: the relay
        # sweeps its units once the grace has passed.
        received = _wait_for_events(consumer, wanted, timeout=20)
        lag = time.monotonic() - completed
        assert lag < 1.0 + 5, f"events {lag:.1f} s after completion"
        stack.kill("compute_heavy")  # between commit and publish, for good
        # Its chunks go back to RabbitMQ; a new worker finds their markers.
        stack.start_worker("compute_heavy", name="compute_heavy-2", faults=Faults())
        wait_until_drained(stack_env.queue_prefix, timeout=30)
        time.sleep(1.5)  # anything the new worker would publish arrives by now
        received += consumer.drain()
        assert set(distinct(received)) == wanted == _ledger_event_ids(engine, job_id)
        assert all(n == 1 for n in _copies_agree(received).values())  # the relay's, once
        after = stack.producer().wait(job_id, timeout=10)
        assert after["outcomes"] == job["outcomes"] and _dead_letters(engine, job_id) == 0
        print(f"\nkilled between commit and publish: every event {lag:.2f} s after completion")
    finally:
        stack.stop()


@pytest.mark.serial  # stops the machine's RabbitMQ
def test_the_broker_down_at_publish_time_does_not_fail_the_unit(
    stack_env: ServiceEnv, engine: Engine, consumer: Consumer
) -> None:
    stack = _stack(stack_env, "broker_down", Faults(publish_pause_s=4), grace_s=1.0)
    try:
        job_id, job = _submit(stack, seed=302, prefix="DOWN")
        wanted = _ledger_event_ids(engine, job_id)
        # The worker committed both chunks and sleeps before publishing: the
        # broker goes away under it and comes back after its attempt.
        subprocess.run(["rabbitmqctl", "-q", "stop_app"], check=True, timeout=120)
        try:
            time.sleep(6)
        finally:
            subprocess.run(["rabbitmqctl", "-q", "start_app"], check=True, timeout=120)
            subprocess.run(["rabbitmqctl", "-q", "await_startup"], check=True, timeout=120)
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
        stack.stop()


def test_a_worker_and_the_relay_publishing_one_unit_send_the_same_messages(
    stack_env: ServiceEnv, engine: Engine, consumer: Consumer
) -> None:
    stack = _stack(stack_env, "both", Faults(publish_pause_s=2), grace_s=0.2)
    try:
        job_id, _ = _submit(stack, seed=303, prefix="BOTH")
        wanted = _ledger_event_ids(engine, job_id)
        received = _wait_for_events(consumer, wanted, timeout=20)
        time.sleep(3)  # the worker's own publish, after its pause
        received += consumer.drain()
        copies = _copies_agree(received)
        assert set(distinct(received)) == wanted
        # The relay took each unit during the worker's pause, then the worker
        # sent it too: every message twice, the same each time.
        assert sorted(set(copies.values())) == [2], copies
    finally:
        stack.stop()
