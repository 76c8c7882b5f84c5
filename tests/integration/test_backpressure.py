"""Above SETTLEQ_MAX_QUEUE_DEPTH the front door answers 429 with Retry-After;
nothing already accepted is dropped, and a producer's retry gets in once."""

from __future__ import annotations

import json
import time

import pika
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from services.api.app import create_app
from services.commands.client import Client
from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    BROKER_URL,
    PRODUCER_ID,
    PRODUCER_SECRET,
    ServiceEnv,
    isolated_env,
    queue_depth,
)


def batch() -> bytes:
    doc = promo_doc(uid("V-"), [promo_line(1, "8", "1.00")])
    return json.dumps({"kind": "promo_accrual", "documents": [doc]}).encode()


def jobs(env: ServiceEnv) -> int:
    engine = make_engine(env.database_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(tables.jobs)).scalar_one())
    finally:
        engine.dispose()


def test_full_queues_refuse_new_batches_until_they_drain() -> None:
    with isolated_env("bp") as env, TestClient(create_app(env.settings(max_queue_depth=2))) as http:
        producer = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
        for _ in range(3):  # no workers: each accepted batch leaves a message waiting
            assert producer.submit(batch()).status_code == 202
            time.sleep(0.6)  # the depth is re-read at most every 0.5 s
        assert queue_depth(env.queue_prefix, "fast_path") == 3

        refused_body = batch()
        refused = producer.submit(refused_body)
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "backpressure"
        assert int(refused.headers["Retry-After"]) > 0
        assert jobs(env) == 3 and queue_depth(env.queue_prefix, "fast_path") == 3

        # A consumer drains the queue; the producer retries the same batch.
        connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        connection.channel().queue_purge(f"{env.queue_prefix}.fast_path")
        connection.close()
        time.sleep(0.6)
        first = producer.submit(refused_body)
        again = producer.submit(refused_body)
        assert (first.status_code, again.status_code) == (202, 200)
        assert first.json()["job_id"] == again.json()["job_id"] and jobs(env) == 4
