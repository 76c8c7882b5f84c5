"""A 60 MB invoice is accepted, travels alone in its own chunk, and only a
reference to it crosses the broker (docs/architecture.md#chunking: claim check)."""

from __future__ import annotations

import base64
import json

import pika
from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from tests.e2e.conftest import ARTIFACTS
from tests.support.factories import uid
from tests.support.infra import BROKER_URL, ServiceEnv
from tests.support.stack import Stack

MiB = 1024 * 1024
CONTRACT = {"rate_per_mile": "2.150", "fuel_surcharge": "0.25", "tolerance": "1.00"}


def invoice(carrier: str, raw: bytes | None, leg_no: int = 1) -> dict:
    doc = {
        "document_id": uid("PRO-"),
        "partition_key": carrier,
        "contract_version": 1,
        "document_type": "PDF",
        # 100 miles at 2.150 plus 25% fuel: 268.75
        "legs": [{"leg_no": leg_no, "miles": "100", "accessorials": [], "billed_amount": "268.75"}],
    }
    if raw is not None:
        doc["raw_payload"] = base64.b64encode(raw).decode()
    return doc


def test_sixty_megabyte_invoice_travels_alone_and_by_reference(
    stack_env: ServiceEnv, engine: Engine
) -> None:
    logs = ARTIFACTS / "logs" / "test_large_document"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(stack_env, logs)
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        stack.start_api()
        carrier = uid("BIG-")
        path = f"/v1/contracts/freight_audit/{carrier}/1"
        assert stack.operator().bearer("PUT", path, CONTRACT).status_code == 201
        big = invoice(carrier, b"%PDF-1.7\n" + b"\x00" * (45 * MiB))  # 60 MB once in base64
        docs = [invoice(carrier, None), big, invoice(carrier, None)]
        body = json.dumps({"kind": "freight_audit", "documents": docs}).encode()
        assert len(body) > 60 * 1000 * 1000
        response = stack.producer().submit(body)
        assert response.status_code == 202, response.text
        job_id = response.json()["job_id"]
        assert response.json()["chunks"] == 3

        stored_chunks = tables.chunks
        with engine.connect() as conn:
            chunks = conn.execute(
                select(stored_chunks.c.documents, func.length(stored_chunks.c.payload))
                .where(stored_chunks.c.job_id == job_id)
                .order_by(stored_chunks.c.seq)
            ).all()
        assert [c.documents for c in chunks] == [1, 1, 1]
        assert chunks[1][1] > stack_env.settings().max_chunk_bytes  # it had to travel alone

        # Nothing consumes yet: look at every message the front door enqueued.
        channel = connection.channel()
        queue = f"{stack_env.queue_prefix}.fast_path"
        sizes = []
        while True:
            method, _, message = channel.basic_get(queue)
            if method is None:
                break
            sizes.append(len(message))
        channel.close()  # unacknowledged: RabbitMQ puts them back
        assert len(sizes) == 3 and max(sizes) < 16 * MiB  # RabbitMQ 4.x's default limit
        print(f"\nlargest broker message: {max(sizes)} bytes for a {len(body)} byte batch")

        stack.start_worker("fast_path")
        stack.start_worker("compute_heavy")
        job = stack.producer().wait(job_id, timeout=120)
        assert job["outcomes"] == {"posted": 3, "disputed": 0, "duplicate": 0, "dead_lettered": 0}
    finally:
        connection.close()
        stack.stop()
