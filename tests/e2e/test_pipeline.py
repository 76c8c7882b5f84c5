"""The whole stack over HTTP: API, fast_path and compute_heavy workers as
processes on the real PostgreSQL, RabbitMQ and Redis (docs/architecture.md#guarantees,
docs/architecture.md#how-a-batch-flows)."""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import Engine, select

from shared.adapters.db import tables
from shared.adapters.db.migrate import load_internal_key
from shared.adapters.rabbitmq.broker import enqueue, make_broker
from shared.domain.pipeline.messages import FAST_PATH, VALIDATE_ACTOR, ChunkMessage
from tests.support.factories import uid
from tests.support.infra import ServiceEnv
from tests.support.ledger import max_rows_per_identity
from tests.support.stack import Stack, wait_until_drained

RATES = {"T1": Decimal("0.125"), "T2": Decimal("0.45"), "T3": Decimal("1.10")}
TOLERANCE = Decimal("0.05")
CENT = Decimal("0.01")


# Small chunks so that one batch is settled by several chunks in parallel.
STACK_SETTINGS = {"max_chunk_documents": 40}


def make_documents(
    rng: random.Random, vendors: list[str], count: int, tag: str
) -> list[dict[str, Any]]:
    documents = []
    for n in range(count):
        lines = []
        for line_no in range(1, 11):
            tier = rng.choice(sorted(RATES))
            units = rng.randint(1, 400)
            model = (units * RATES[tier]).quantize(CENT, rounding=ROUND_HALF_UP)
            # Mostly exact claims; some at the tolerance boundary (posted), some past it.
            claimed = model + rng.choice(
                [Decimal(0)] * 12 + [TOLERANCE, Decimal("0.06"), Decimal("-7.50")]
            )
            lines.append(
                {
                    "line_no": line_no,
                    "sku": f"SKU-{rng.randint(1000, 9999)}",
                    "promo_tier": tier,
                    "qualifying_units": str(units),
                    "claimed_amount": str(claimed),
                    "store_id": f"S{rng.randint(1, 40)}",
                }
            )
        documents.append(
            {
                "document_id": f"{tag}-{n:05d}",
                "partition_key": vendors[n % len(vendors)],
                "contract_version": 1,
                "period": "2026-Q3",
                "lines": lines,
            }
        )
    return documents


def expected_outcomes(
    documents: list[dict[str, Any]], published: set[tuple[str, int]], seen: set[tuple[Any, ...]]
) -> tuple[Counter[str], Decimal, Decimal]:
    """An independent model of docs/architecture.md#settlement-kinds, without the product's keys or
    code."""
    outcomes: Counter[str] = Counter()
    posted = disputed = Decimal(0)
    for doc in documents:
        for line in doc["lines"]:
            units = Decimal(line["qualifying_units"])
            claimed = Decimal(line["claimed_amount"])
            identity = (
                doc["document_id"],
                line["line_no"],
                line["sku"],
                line.get("store_id"),
                line["promo_tier"],
                doc["period"],
                doc["contract_version"],
            )
            if (
                (doc["partition_key"], doc["contract_version"]) not in published
                or line["promo_tier"] not in RATES
                or units < 0
            ):
                outcomes["dead_lettered"] += 1
            elif identity in seen:
                outcomes["duplicate"] += 1
            else:
                seen.add(identity)
                model = (units * RATES[line["promo_tier"]]).quantize(CENT, rounding=ROUND_HALF_UP)
                if abs(claimed - model) <= TOLERANCE:
                    outcomes["posted"] += 1
                    posted += model
                else:
                    outcomes["disputed"] += 1
                    disputed += claimed
    return outcomes, posted, disputed


def submit_and_wait(stack: Stack, documents: list[dict[str, Any]]) -> tuple[dict[str, Any], float]:
    producer = stack.producer()
    body = json.dumps({"kind": "promo_accrual", "documents": documents}).encode()
    started = time.monotonic()
    response = producer.submit(body)
    assert response.status_code == 202, response.text
    job = producer.wait(response.json()["job_id"], timeout=120)
    elapsed = time.monotonic() - started
    assert job["state"] == "completed", (job, stack.log("compute_heavy"))
    return job, elapsed


def test_multi_vendor_batch_settles_exactly_once_and_adds_up(
    stack: Stack, stack_env: ServiceEnv, engine: Engine
) -> None:
    rng = random.Random(20261129)
    tag = uid("E2E-")
    vendors = [f"{tag}-V{i}" for i in range(6)]
    operator = stack.operator()
    contract = {"tier_rates": {k: str(v) for k, v in RATES.items()}, "tolerance": str(TOLERANCE)}
    for vendor in vendors:
        assert (
            operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", contract).status_code
            == 201
        )
    published = {(v, 1) for v in vendors}
    seen: set[tuple[Any, ...]] = set()

    earlier = make_documents(rng, vendors, 20, f"{tag}-A")
    first_job, _ = submit_and_wait(stack, earlier)
    expected_outcomes(earlier, published, seen)
    assert first_job["outcomes"]["duplicate"] == 0

    documents = make_documents(rng, vendors, 210, f"{tag}-B") + earlier[:6]  # 60 repeated lines
    documents[3]["lines"][2]["promo_tier"] = "T9"  # unknown tier: that line alone
    documents[7]["lines"][0]["qualifying_units"] = "-3"  # negative quantity: that line alone
    documents[11]["contract_version"] = 9  # unknown version: the whole document
    documents.append(json.loads(json.dumps(documents[20])))  # the same document twice in one batch
    outcomes, posted, disputed = expected_outcomes(documents, published, seen)

    job, elapsed = submit_and_wait(stack, documents)
    lines = sum(len(d["lines"]) for d in documents)
    assert lines >= 2000 and job["lines"] == lines
    assert job["outcomes"] == {
        k: outcomes[k] for k in ("posted", "disputed", "duplicate", "dead_lettered")
    }
    assert sum(job["outcomes"].values()) == job["lines"]
    assert (
        outcomes["duplicate"] == 70 and outcomes["dead_lettered"] == 12 and outcomes["disputed"] > 0
    )
    assert Decimal(job["amounts"]["posted"]) == posted
    assert Decimal(job["amounts"]["disputed"]) == disputed

    ledger = tables.ledger_entries
    with engine.connect() as conn:
        rows = conn.execute(
            select(ledger.c.outcome, ledger.c.amount, ledger.c.claimed_amount).where(
                ledger.c.job_id == job["job_id"]
            )
        ).all()
    engine_rows = Counter(r.outcome for r in rows)
    assert engine_rows == Counter({"posted": outcomes["posted"], "disputed": outcomes["disputed"]})
    assert sum(r.amount for r in rows if r.outcome == "posted") == posted
    assert sum(r.claimed_amount for r in rows if r.outcome == "disputed") == disputed
    assert max_rows_per_identity(engine) == 1
    print(
        f"\ne2e: {lines} lines in {elapsed:.2f} s = {lines / elapsed:.0f} lines/s "
        f"(POST to completed, {job['chunks']['total']} chunks)"
    )


def test_same_batch_posted_twice_is_one_job_and_one_set_of_rows(
    stack: Stack, stack_env: ServiceEnv, engine: Engine
) -> None:
    rng = random.Random(7)
    tag = uid("TWICE-")
    operator = stack.operator()
    contract = {"tier_rates": {k: str(v) for k, v in RATES.items()}, "tolerance": str(TOLERANCE)}
    assert (
        operator.bearer("PUT", f"/v1/contracts/promo_accrual/{tag}/1", contract).status_code == 201
    )
    body = json.dumps(
        {"kind": "promo_accrual", "documents": make_documents(rng, [tag], 5, tag)}
    ).encode()
    producer = stack.producer()
    first = producer.submit(body)
    second = producer.submit(body)  # the producer's retry, before the job even finished
    assert (first.status_code, second.status_code) == (202, 200)
    assert first.json()["job_id"] == second.json()["job_id"]
    job = producer.wait(first.json()["job_id"], timeout=60)
    assert job["outcomes"]["posted"] + job["outcomes"]["disputed"] == 50
    third = producer.submit(body)
    assert third.status_code == 200 and third.json()["job_id"] == job["job_id"]
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        count = len(conn.execute(select(ledger.c.id).where(ledger.c.partition_key == tag)).all())
    assert count == 50


def test_redelivered_chunk_messages_change_nothing(
    stack: Stack, stack_env: ServiceEnv, engine: Engine
) -> None:
    rng = random.Random(11)
    tag = uid("REDELIVER-")
    operator = stack.operator()
    contract = {"tier_rates": {k: str(v) for k, v in RATES.items()}, "tolerance": str(TOLERANCE)}
    assert (
        operator.bearer("PUT", f"/v1/contracts/promo_accrual/{tag}/1", contract).status_code == 201
    )
    job, _ = submit_and_wait(stack, make_documents(rng, [tag], 90, tag))  # 3 chunks
    stored_chunks, ledger = tables.chunks, tables.ledger_entries
    with engine.connect() as conn:
        chunks = conn.execute(
            select(stored_chunks.c.id, stored_chunks.c.payload_sha256).where(
                stored_chunks.c.job_id == job["job_id"]
            )
        ).all()
        before = conn.execute(
            select(ledger).where(ledger.c.job_id == job["job_id"]).order_by(ledger.c.id)
        ).all()
    # RabbitMQ delivers each chunk message again, twice.
    settings = stack_env.settings()
    broker = make_broker(settings)
    key = load_internal_key(engine, None)
    for _ in range(2):
        for chunk in chunks:
            message = ChunkMessage(chunk.id, job["job_id"], "promo_accrual", chunk.payload_sha256)
            enqueue(broker, settings.queue_name(FAST_PATH), VALIDATE_ACTOR, message.signed(key))
    broker.close()
    wait_until_drained(stack_env.queue_prefix)
    with engine.connect() as conn:
        after = conn.execute(
            select(ledger).where(ledger.c.job_id == job["job_id"]).order_by(ledger.c.id)
        ).all()
    assert after == before and len(after) == 900
    assert stack.producer().job(job["job_id"]) == job
