"""``POST /v1/batches`` against real PostgreSQL and RabbitMQ, in process.

Every refusal is checked for its SPEC code and for leaving no trace: no job
stored, no message on the broker.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from services.api.app import create_app
from services.commands.client import Client
from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.adapters.db.jobs.queries import job_status
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.infra import (
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_PARTITIONS,
    SCOPED_SECRET,
    ServiceEnv,
    queue_depth,
)


@pytest.fixture(scope="module")
def api(test_env: ServiceEnv) -> Iterator[Client]:
    with TestClient(create_app(test_env.settings(max_body_bytes=64 * 1024))) as http:
        yield Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)


def batch(*docs: dict[str, Any]) -> bytes:
    return json.dumps({"kind": "promo_accrual", "documents": list(docs)}).encode()


def good_batch() -> bytes:
    return batch(promo_doc(uid("V-"), [promo_line(1, "8", "1.00"), promo_line(2, "4", "0.50")]))


class Trace:
    """Counts jobs stored and messages queued, to prove a refusal left none."""

    def __init__(self, env: ServiceEnv) -> None:
        self.env = env
        self.engine = make_engine(env.database_url)
        self.before = self.snapshot()

    def snapshot(self) -> tuple[int, int, int]:
        with self.engine.connect() as conn:
            jobs = conn.execute(select(func.count()).select_from(tables.jobs)).scalar_one()
            chunks = conn.execute(select(func.count()).select_from(tables.chunks)).scalar_one()
        return jobs, chunks, queue_depth(self.env.queue_prefix, "fast_path")

    def unchanged(self) -> bool:
        after = self.snapshot()
        self.engine.dispose()
        return after == self.before


@pytest.fixture
def trace(test_env: ServiceEnv) -> Trace:
    return Trace(test_env)


def error_code(response: Any) -> str:
    return str(response.json()["error"]["code"])


def test_accepted_batch_is_stored_and_enqueued(api: Client, test_env: ServiceEnv) -> None:
    depth = queue_depth(test_env.queue_prefix, "fast_path")
    response = api.submit(good_batch())
    assert response.status_code == 202, response.text
    body = response.json()
    assert (body["documents"], body["lines"], body["chunks"]) == (1, 2, 1)
    assert body["status_url"] == f"/v1/jobs/{body['job_id']}"
    assert queue_depth(test_env.queue_prefix, "fast_path") == depth + 1


def test_same_batch_twice_returns_the_same_job(api: Client, test_env: ServiceEnv) -> None:
    body = good_batch()
    first = api.submit(body)
    depth = queue_depth(test_env.queue_prefix, "fast_path")
    second = api.submit(body)
    assert (first.status_code, second.status_code) == (202, 200)
    assert first.json() == second.json()
    assert queue_depth(test_env.queue_prefix, "fast_path") == depth


def test_retry_of_a_half_enqueued_submission_finishes_it(api: Client, test_env: ServiceEnv) -> None:
    """The API died after storing the job and before enqueueing all of it: the
    producer's retry (no 202 was seen) enqueues every chunk and accepts it."""
    vendor = uid("V-")
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")]) for _ in range(3)]
    body = batch(*docs)
    settings = test_env.settings(max_chunk_documents=1)
    engine = make_engine(test_env.database_url)
    try:
        job_id, messages = store_job(engine, settings, b"unused", docs, accept=False, body=body)
        viewer_sees = job_status(engine, job_id)
    finally:
        engine.dispose()
    assert viewer_sees is None  # not accepted: invisible
    depth = queue_depth(test_env.queue_prefix, "fast_path")
    response = api.submit(body)
    assert response.status_code == 200 and response.json()["job_id"] == job_id
    assert response.json()["chunks"] == len(messages) == 3
    assert queue_depth(test_env.queue_prefix, "fast_path") == depth + 3


def test_idempotency_key_reused_with_another_body_is_409(api: Client) -> None:
    key = uid("idem-")
    assert api.submit(good_batch(), idempotency_key=key).status_code == 202
    again = api.submit(good_batch(), idempotency_key=key)
    assert again.status_code == 409 and error_code(again) == "idempotency_key_reused"


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (promo_line(1, "8", 1.00), "decimal_must_be_string"),  # a JSON number
        (promo_line(1, 8, "1.00"), "decimal_must_be_string"),
        (promo_line(1, "8", "NaN"), "decimal_invalid"),
        (promo_line(1, "8", "Infinity"), "decimal_invalid"),
        (promo_line(1, "1e999999", "1.00"), "decimal_out_of_range"),
        (promo_line(1, "8", "1.00001"), "decimal_out_of_range"),  # five places
        (promo_line(1, "8", "1000000000000"), "decimal_out_of_range"),
        (promo_line(1, "8", "1.00", colour="red"), "extra_forbidden"),
    ],
)
def test_bad_money_and_unknown_fields_are_422(
    api: Client, trace: Trace, line: dict[str, Any], code: str
) -> None:
    response = api.submit(batch(promo_doc("V-1", [line])))
    assert response.status_code == 422 and error_code(response) == code, response.text
    assert trace.unchanged()


def test_contract_version_zero_is_422(api: Client, trace: Trace) -> None:
    response = api.submit(batch(promo_doc("V-1", [promo_line(1, "8", "1.00")], version=0)))
    assert response.status_code == 422 and error_code(response) == "greater_than_equal"
    assert response.json()["error"]["details"][0]["loc"][-1] == "contract_version"
    assert trace.unchanged()


def test_invalid_json_is_422(api: Client, trace: Trace) -> None:
    response = api.submit(b'{"kind": "promo_accrual", "documents": [')
    assert response.status_code == 422 and error_code(response) == "json_invalid"
    assert trace.unchanged()


def test_missing_bad_stale_and_unknown_signatures_are_401(api: Client, trace: Trace) -> None:
    body = good_batch()
    assert api.http is not None
    missing = api.http.post(
        "/v1/batches", content=body, headers={"Content-Type": "application/json"}
    )
    assert (missing.status_code, error_code(missing)) == (401, "signature_missing")
    wrong = Client("http://testserver", PRODUCER_ID, "not-the-secret", http=api.http).submit(body)
    assert (wrong.status_code, error_code(wrong)) == (401, "signature_invalid")
    stale = api.signed(
        "POST",
        "/v1/batches",
        body,
        {"Content-Type": "application/json"},
        timestamp=int(time.time()) - 301,
    )
    assert (stale.status_code, error_code(stale)) == (401, "timestamp_outside_tolerance")
    stranger = Client("http://testserver", "nobody", PRODUCER_SECRET, http=api.http).submit(body)
    assert (stranger.status_code, error_code(stranger)) == (401, "unknown_key")
    # A signature for another endpoint cannot be replayed here.
    replay = api.signed("POST", "/v1/contracts", body, {"Content-Type": "application/json"})
    assert replay.status_code in (401, 404, 405)
    assert trace.unchanged()
    for response in (missing, wrong, stale, stranger):
        assert PRODUCER_SECRET not in response.text


def test_another_vendors_partition_is_403(api: Client, trace: Trace) -> None:
    scoped = Client("http://testserver", SCOPED_ID, SCOPED_SECRET, http=api.http)
    mine = promo_doc(SCOPED_PARTITIONS[0], [promo_line(1, "8", "1.00")])
    theirs = promo_doc("VENDOR-9999", [promo_line(1, "8", "1.00")])
    response = scoped.submit(batch(mine, theirs))
    assert response.status_code == 403 and error_code(response) == "partition_not_allowed"
    assert trace.unchanged()


def test_wrong_content_type_is_415_and_oversize_is_413(api: Client, trace: Trace) -> None:
    wrong = api.submit(good_batch(), content_type="text/csv")
    assert (wrong.status_code, error_code(wrong)) == (415, "unsupported_media_type")
    huge = api.submit(b" " * (64 * 1024 + 1))
    assert (huge.status_code, error_code(huge)) == (413, "payload_too_large")
    assert trace.unchanged()


def test_ndjson_batch_is_accepted(api: Client) -> None:
    docs = [promo_doc(uid("V-"), [promo_line(1, "8", "1.00")]) for _ in range(3)]
    body = b"\n".join(json.dumps(x).encode() for x in [{"kind": "promo_accrual"}, *docs])
    response = api.submit(body, content_type="application/x-ndjson")
    assert response.status_code == 202, response.text
    assert response.json()["lines"] == 3


def test_broker_unreachable_is_503_and_nothing_is_accepted(test_env: ServiceEnv) -> None:
    trace = Trace(test_env)
    settings = test_env.settings(broker_url="amqp://guest:guest@127.0.0.1:1/")
    with TestClient(create_app(settings)) as http:
        client = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
        body = good_batch()
        response = client.submit(body)
        assert response.status_code == 503 and error_code(response) == "broker_unavailable"
        # The producer's retry is not mistaken for a duplicate of a withdrawn job.
        assert client.submit(body).status_code == 503
    assert trace.unchanged()


def test_database_unreachable_is_503(test_env: ServiceEnv) -> None:
    settings = test_env.settings(database_url="postgresql://postgres@127.0.0.1:1/none")
    with TestClient(create_app(settings)) as http:
        client = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
        response = client.submit(good_batch())
    assert response.status_code == 503 and error_code(response) == "database_unavailable"


def test_chunks_hold_at_most_max_chunk_lines(test_env: ServiceEnv) -> None:
    settings = test_env.settings(max_chunk_lines=5)
    with TestClient(create_app(settings)) as http:
        client = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
        vendor = uid("V-")
        docs = [promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, 4)])] * 4
        response = client.submit(batch(*docs))
    assert response.status_code == 202
    assert response.json()["chunks"] == 4  # 3 + 3 > 5: one 3-line document per chunk


def test_chunk_payloads_are_stored_whole_with_lz4_where_the_server_has_it(
    api: Client, test_env: ServiceEnv
) -> None:
    """Chunk payloads are large and compress well: PostgreSQL stores them with
    lz4 (far cheaper than its default pglz: migration 0009) and they read back
    byte for byte."""
    vendor = uid("V-")
    docs = [promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, 200)])]
    response = api.submit(batch(*docs))
    assert response.status_code == 202, response.text
    engine = make_engine(test_env.database_url)
    try:
        with engine.connect() as conn:
            lz4 = conn.exec_driver_sql(
                "SELECT 'lz4' = ANY(enumvals) FROM pg_settings"
                " WHERE name = 'default_toast_compression'"
            ).scalar()
            payload, method = conn.exec_driver_sql(
                "SELECT payload, pg_column_compression(payload) FROM chunks WHERE job_id = %s",
                (response.json()["job_id"],),
            ).one()
    finally:
        engine.dispose()
    stored = json.loads(bytes(payload))
    assert [(d["document_id"], len(d["lines"])) for d in stored] == [(docs[0]["document_id"], 199)]
    assert method == ("lz4" if lz4 else "pglz")


@pytest.mark.parametrize("target", ["/healthz?x=%00", "/v1/jobs/a%01b", "/v1/batches?q=%7F"])
def test_control_characters_in_the_url_are_422(test_env: ServiceEnv, target: str) -> None:
    with TestClient(create_app(test_env.settings())) as http:
        response = http.post(target, content=good_batch())
    assert response.status_code == 422 and error_code(response) == "invalid_characters"
