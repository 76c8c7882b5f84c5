"""The stack on quorum queues (docs/operations.md#queue-types): it settles
exactly once as on classic queues; a chunk whose workers keep dying ends as a
dead letter an operator can requeue, not in RabbitMQ's ``.XQ`` queue; and a
stack of the other queue type under the same prefix refuses to start."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pika
import pytest
import redis
from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.e2e import test_pipeline as pipeline
from tests.e2e.test_worker_crash import leased_claims
from tests.support.booking_lock import BookingLock
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import BROKER_URL, REDIS_URL, ServiceEnv, isolated_env
from tests.support.stack import ROOT, Stack

STACK_SETTINGS = {"queue_type": "quorum", "max_chunk_documents": 40}
CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}


def test_a_quorum_stack_settles_a_batch_exactly_once_and_adds_up(
    stack: Stack, stack_env: ServiceEnv, engine: Engine
) -> None:
    pipeline.test_multi_vendor_batch_settles_exactly_once_and_adds_up(stack, stack_env, engine)


def test_a_classic_worker_beside_the_quorum_queues_refuses_to_start(
    stack: Stack, stack_env: ServiceEnv
) -> None:
    env = stack_env.environ(queue_type="classic")
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run(
        [sys.executable, "-m", "services.commands.cli", "worker", "--queues", "compute_heavy"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    line = next(x for x in done.stderr.splitlines() if x.startswith("settleq worker: "))
    assert line.startswith("settleq worker: queue_mismatch: SETTLEQ_QUEUE_TYPE=classic")
    assert f"{stack_env.queue_prefix}.compute_heavy.small (0 ready)" in line


def test_a_chunk_whose_workers_keep_dying_is_a_dead_letter_an_operator_requeues(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    limit = 2
    settings = {
        "queue_type": "quorum",
        "max_attempts": limit,
        "queue_delivery_limit": limit,
        "claim_lease_ms": 1500,
    }
    client = redis.Redis.from_url(REDIS_URL)
    with isolated_env("q") as env:
        stack = Stack(env, tmp_path_factory.mktemp("dying-logs"), **settings)
        try:
            stack.start_api()
            stack.start_worker("fast_path")
            vendor = uid("DYING-")
            path = f"/v1/contracts/promo_accrual/{vendor}/1"
            assert stack.operator().bearer("PUT", path, CONTRACT).status_code == 201
            docs = [promo_doc(vendor, [promo_line(n, str(8 * n), f"{n}.00") for n in range(1, 11)])]
            producer = stack.producer()
            response = producer.submit(
                json.dumps({"kind": "promo_accrual", "documents": docs}).encode()
            )
            assert response.status_code == 202, response.text
            job_id = response.json()["job_id"]

            # Every worker that takes the chunk dies holding it (killed while its
            # settle waits for the booking lock the test holds, as a close
            # does): RabbitMQ gets it back unacknowledged each time and counts.
            with BookingLock(env.database_url) as lock, lock.held():
                for n in range(limit):
                    name = f"doomed{n}"
                    stack.start_worker("compute_heavy", name=name)
                    deadline = time.monotonic() + 60
                    lock.wait_for(name, timeout=60)
                    assert leased_claims(client, env.queue_prefix) >= 1
                    stack.kill(name)
                    while leased_claims(client, env.queue_prefix):  # its lease runs out
                        assert time.monotonic() < deadline + 30
                        time.sleep(0.1)

            stack.start_worker("compute_heavy", name="survivor")
            job = producer.wait(job_id, timeout=60)
            assert job["state"] == "completed", stack.log("survivor")
            assert job["outcomes"] == {
                "posted": 0,
                "disputed": 0,
                "duplicate": 0,
                "dead_lettered": 10,
            }
            operator = stack.operator()
            letters = operator.bearer(
                "GET", f"/admin/dead-letters?reason=redelivery_limit&partition_key={vendor}"
            ).json()["items"]
            assert len(letters) == 1 and letters[0]["lines"] == 10
            assert dead_queue_depth(f"{env.queue_prefix}.compute_heavy.small.XQ") == 0

            body = {"reason": "redelivery_limit", "partition_key": vendor, "limit": 10}
            assert operator.bearer("POST", "/admin/dead-letters/requeue", body).json() == {
                "requeued": 1,
                "skipped": 0,
                "would_fail_again": {},
            }
            deadline = time.monotonic() + 60
            while (job := producer.job(job_id))["outcomes"]["dead_lettered"]:
                assert time.monotonic() < deadline, stack.log("survivor")
                time.sleep(0.2)
            assert job["outcomes"]["posted"] == 10
            ledger = tables.ledger_entries
            engine = make_engine(env.database_url)
            try:
                with engine.connect() as conn:
                    rows = conn.execute(
                        select(
                            func.count(), func.count(func.distinct(ledger.c.reconciliation_key))
                        ).where(ledger.c.job_id == job_id)
                    ).one()
            finally:
                engine.dispose()
            assert tuple(rows) == (10, 10)
        finally:
            client.close()
            stack.stop()


def dead_queue_depth(name: str) -> int:
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        return int(connection.channel().queue_declare(name, passive=True).method.message_count)
    finally:
        connection.close()
