"""A settle worker SIGKILLed after claiming its keys and before committing:
RabbitMQ redelivers the chunk, the dead worker's leases expire, and another
worker settles every line exactly once (docs/architecture.md#exactly-once-effect,
docs/architecture.md#the-settlement-transaction).

The worker is held at that point from outside: the test holds the booking
lock, as a period close does, and its settle transaction waits for it with
the claims leased (tests/support/booking_lock.py)."""

from __future__ import annotations

import json
import time

import pytest
import redis
from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from shared.adapters.leases import ClaimStore
from tests.support.booking_lock import BookingLock
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import REDIS_URL, ServiceEnv
from tests.support.ledger import chunk_results
from tests.support.stack import Stack

STACK_SETTINGS = {"claim_lease_ms": 2000}


def leased_claims(client: redis.Redis, prefix: str) -> int:
    """Keys leased by an attempt that has not committed yet."""
    keys = [k.decode() for k in client.scan_iter(match=f"{prefix}:claim:*", count=1000)]
    return len(ClaimStore(client, prefix, lease_ms=1000).live_leases(keys))


def test_worker_killed_between_claim_and_commit_loses_and_doubles_nothing(
    stack_env: ServiceEnv, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> None:
    logs = tmp_path_factory.mktemp("crash-logs")
    stack = Stack(stack_env, logs, **STACK_SETTINGS)
    client = redis.Redis.from_url(REDIS_URL)
    lock = BookingLock(stack_env.database_url)
    try:
        stack.start_api()
        stack.start_worker("fast_path")
        # This worker claims, then waits for the booking lock before its commit.
        lock.hold()
        stack.start_worker("compute_heavy", name="doomed")
        vendor = uid("CRASH-")
        assert (
            stack.operator()
            .bearer(
                "PUT",
                f"/v1/contracts/promo_accrual/{vendor}/1",
                {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"},
            )
            .status_code
            == 201
        )
        docs = [
            promo_doc(vendor, [promo_line(n, str(8 * n), f"{n}.00") for n in range(1, 11)])
            for _ in range(3)
        ]
        producer = stack.producer()
        response = producer.submit(
            json.dumps({"kind": "promo_accrual", "documents": docs}).encode()
        )
        assert response.status_code == 202
        job_id = response.json()["job_id"]

        deadline = time.monotonic() + 30
        # One lease per document: a promo line's key names its document
        # (shared/domain/pipeline/leasing.py).
        while leased_claims(client, stack_env.queue_prefix) < len(docs):
            assert time.monotonic() < deadline, stack.log("doomed")
            time.sleep(0.1)
        lock.wait_for("doomed")  # inside its settle transaction, nothing written
        stack.kill("doomed")
        assert chunk_results(engine, job_id) == []  # nothing committed before the kill
        lock.release()

        stack.start_worker("compute_heavy", name="survivor")
        job = producer.wait(job_id, timeout=60)
        assert job["state"] == "completed", stack.log("survivor")
        assert job["outcomes"] == {"posted": 30, "disputed": 0, "duplicate": 0, "dead_lettered": 0}
        ledger = tables.ledger_entries
        with engine.connect() as conn:
            rows = conn.execute(
                select(func.count(), func.count(func.distinct(ledger.c.reconciliation_key))).where(
                    ledger.c.job_id == job_id
                )
            ).one()
        assert tuple(rows) == (30, 30)
        assert len(chunk_results(engine, job_id)) == 1
    finally:
        lock.close()
        client.close()
        stack.stop()
