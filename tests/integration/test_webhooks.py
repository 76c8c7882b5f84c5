"""Webhooks from the API to a receiver, in process (docs/api.md#webhooks), on
each ledger backend: endpoints registered over HTTP, events written by
settlement's own transactions, fanned out by the scheduler and delivered by
the actor's attempt to a real HTTP receiver on 127.0.0.1.
(tests/e2e/test_webhooks.py runs the same through the real processes.)"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, select, update
from standardwebhooks.webhooks import Webhook

from services.api.app import create_app
from services.commands.client import Client
from services.relay.fanout import FanOut
from services.webhooks.delivery import attempt
from services.webhooks.metrics import WebhookMetrics
from services.webhooks.scheduler import Scheduler
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.tables import audit_log, webhook_deliveries, webhook_endpoints
from shared.adapters.db.tables import outbox as webhook_events
from shared.adapters.db.webhooks import deliveries
from shared.config.settings import Settings
from shared.domain import webhooks
from shared.domain.synthetic import promo_contract
from tests.support.disputes import disputed_doc, job_disputes, new_vendor, settle
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_PARTITIONS,
    SCOPED_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
)
from tests.support.receiver import Answer, Receiver

pytestmark = pytest.mark.both_backends
SCALE = 0.001  # the retry schedule a thousand times shorter: 5 ms, 60 ms, 0.6 s, ...


@pytest.fixture(scope="module")
def settings(backend_env: ServiceEnv) -> Settings:
    return backend_env.settings(webhook_allow_private=True, webhook_schedule_scale=SCALE)


@pytest.fixture(scope="module")
def http(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture(scope="module")
def producer(http: TestClient) -> Client:
    return Client("http://testserver", key_id=PRODUCER_ID, secret=PRODUCER_SECRET, http=http)


@pytest.fixture(scope="module")
def scoped(http: TestClient) -> Client:
    return Client("http://testserver", key_id=SCOPED_ID, secret=SCOPED_SECRET, http=http)


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver()
    yield found
    found.close()


class Deliverer:
    """The relay's fan-out and the webhooks component's two halves, run in
    this process by hand."""

    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings, self.engine = settings, engine
        self.handed: list[tuple[str, int]] = []
        self.fan_out = FanOut(settings, engine)
        self.scheduler = Scheduler(settings, engine, lambda d, n: self.handed.append((d, n)))
        self.metrics = WebhookMetrics()

    def round(self) -> int:
        """One fan-out round and one scheduler round, then every attempt it
        handed out; how many."""
        self.fan_out.tick()
        self.scheduler.tick()
        handed, self.handed = self.handed, []
        for delivery_id, attempts in handed:
            attempt(self.settings, self.engine, self.metrics, delivery_id, attempts)
        return len(handed)

    def until(self, receiver: Receiver, count: int, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while len(receiver.received) < count:
            assert time.monotonic() < deadline, f"{len(receiver.received)} of {count} requests"
            if not self.round():
                time.sleep(0.02)


@pytest.fixture
def deliverer(settings: Settings, engine: Engine) -> Deliverer:
    found = Deliverer(settings, engine)
    while found.round():  # what earlier tests left due
        pass
    return found


def register(client: Client, url: str, events: list[str], **extra: Any) -> dict[str, Any]:
    response = client.signed_json(
        "POST", "/v1/webhook-endpoints", {"url": url, "events": events, **extra}
    )
    assert response.status_code == 201, response.text
    found: dict[str, Any] = response.json()
    return found


def settled_job(ctx: WorkerContext, settings: Settings, vendor: str, operator: Client) -> str:
    """A job of two lines for ``vendor``, settled: one posted, one dead-lettered."""
    path = f"/v1/contracts/promo_accrual/{vendor}/1"
    assert operator.bearer("PUT", path, promo_contract()).status_code == 201
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00", tier="T9")])]
    job_id, messages = store_job(ctx.engine, settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    return job_id


def test_job_completed_reaches_the_receiver_signed_with_the_final_job(
    ctx: WorkerContext,
    settings: Settings,
    producer: Client,
    operator: Client,
    receiver: Receiver,
    deliverer: Deliverer,
) -> None:
    endpoint = register(producer, receiver.url, ["job.completed", "dead_letters.created"])
    assert endpoint["secret"].startswith("whsec_") and endpoint["status"] == "enabled"
    job_id = settled_job(ctx, settings, uid("WH-"), operator)
    deliverer.until(receiver, 2)
    completed = [r for r in receiver.of_type("job.completed") if job_id in r.body.decode()]
    assert len(completed) == 1
    got = completed[0]
    # The reference verifier accepts it; so does ours.
    Webhook(endpoint["secret"]).verify(got.body, got.headers)
    assert webhooks.verify(endpoint["secret"], got.headers, got.body, time.time()).ok
    event = json.loads(got.body)
    assert event["id"] == got.webhook_id and event["type"] == "job.completed"
    job = producer.job(job_id)
    assert {k: event["data"][k] for k in job} == job
    assert job["state"] == "completed" and job["outcomes"]["posted"] == 1
    assert event["data"]["lines_url"] == f"/v1/jobs/{job_id}/lines"
    [letters] = [r for r in receiver.of_type("dead_letters.created") if job_id in r.body.decode()]
    data = json.loads(letters.body)["data"]
    assert data["dead_lettered"] == 1 and data["reasons"] == {"unknown_promo_tier": 1}
    # The log shows one delivered attempt of each.
    log = producer.signed("GET", f"/v1/webhook-endpoints/{endpoint['id']}/deliveries").json()
    mine = [d for d in log["items"] if d["event_id"] == got.webhook_id]
    assert mine[0]["status"] == "delivered" and len(mine[0]["attempt_log"]) == 1
    assert mine[0]["attempt_log"][0]["status_code"] == 200


def test_one_event_per_job_however_its_chunks_commit(
    ctx: WorkerContext, settings: Settings, engine: Engine, operator: Client
) -> None:
    vendor = uid("WH-")
    operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", promo_contract())
    small = settings.model_copy(update={"max_chunk_documents": 1})
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")]) for _ in range(3)]
    job_id, messages = store_job(ctx.engine, small, ctx.internal_key, docs)
    assert len(messages) == 3
    for message in [*messages, messages[0]]:  # a redelivery commits nothing
        settle_chunk(ctx, message, 1)
    with engine.connect() as conn:
        types = conn.execute(
            select(webhook_events.c.type).where(webhook_events.c.subject == job_id)
        ).scalars()
        assert list(types) == ["job.completed"]


def test_a_failing_receiver_gets_the_same_webhook_id_until_it_answers(
    ctx: WorkerContext,
    settings: Settings,
    producer: Client,
    operator: Client,
    receiver: Receiver,
    deliverer: Deliverer,
) -> None:
    endpoint = register(producer, receiver.url, ["job.completed"])
    receiver.script.extend([Answer(500), Answer(500), Answer(200)])
    settled_job(ctx, settings, uid("WH-"), operator)
    deliverer.until(receiver, 3)
    ids = {r.webhook_id for r in receiver.received}
    assert len(ids) == 1
    [delivery] = producer.signed(
        "GET", f"/v1/webhook-endpoints/{endpoint['id']}/deliveries"
    ).json()["items"]
    assert delivery["status"] == "delivered" and delivery["attempts"] == 3
    assert [a["status_code"] for a in delivery["attempt_log"]] == [500, 500, 200]
    assert delivery["attempt_log"][0]["answer"] == "ok"
    # A manual retry sends it once more, same id.
    path = f"/v1/webhook-endpoints/{endpoint['id']}/deliveries/{delivery['id']}/retry"
    retried = producer.signed("POST", path)
    assert retried.status_code == 202 and retried.json()["status"] == "pending"
    deliverer.until(receiver, 4)
    assert receiver.received[3].webhook_id in ids


def test_a_delivery_that_keeps_failing_is_failed_and_its_endpoint_disabled(
    ctx: WorkerContext,
    settings: Settings,
    engine: Engine,
    producer: Client,
    operator: Client,
    receiver: Receiver,
    deliverer: Deliverer,
) -> None:
    receiver.default = Answer(503)
    endpoint = register(producer, receiver.url, ["job.completed"])
    settled_job(ctx, settings, uid("WH-"), operator)
    # At SCALE the 3 days before giving up are 259 s: move the first attempt back instead.
    deliverer.until(receiver, 1)
    with engine.begin() as conn:
        conn.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.id == endpoint["id"])
            .values(failing_since=dt.datetime.now(dt.UTC) - dt.timedelta(days=6))
        )
    path = f"/v1/webhook-endpoints/{endpoint['id']}/deliveries"
    with engine.begin() as conn:
        conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.endpoint_id == endpoint["id"])
            .values(first_attempt_at=dt.datetime.now(dt.UTC) - dt.timedelta(days=4))
        )
    deliverer.until(receiver, 2)
    [delivery] = producer.signed("GET", path).json()["items"]
    assert delivery["status"] == "failed" and delivery["attempts"] == 2
    shown = producer.signed("GET", f"/v1/webhook-endpoints/{endpoint['id']}").json()
    assert shown["status"] == "disabled" and shown["disabled_reason"] == "failing"
    assert deliverer.metrics.disabled._value.get() == 1
    metrics = operator.bearer("GET", "/metrics").text
    assert 'settleq_webhook_endpoints{reason="failing",status="disabled"}' in metrics


def test_a_scoped_key_hears_only_its_partitions(
    ctx: WorkerContext,
    settings: Settings,
    scoped: Client,
    operator: Client,
    receiver: Receiver,
    deliverer: Deliverer,
) -> None:
    register(scoped, receiver.url, ["job.completed"])
    theirs = settled_job(ctx, settings, uid("VENDOR-B-"), operator)
    mine = settled_job(ctx, settings, SCOPED_PARTITIONS[0], operator)
    deliverer.until(receiver, 1)
    for _ in range(5):
        deliverer.round()
    bodies = [r.body.decode() for r in receiver.received]
    assert len(bodies) == 1 and mine in bodies[0] and theirs not in bodies[0]


def test_rotation_signs_with_both_secrets_for_a_day_then_the_new_one(
    settings: Settings,
    engine: Engine,
    producer: Client,
    receiver: Receiver,
    deliverer: Deliverer,
) -> None:
    endpoint = register(producer, receiver.url, ["job.completed"])
    old = endpoint["secret"]
    rotated = producer.signed("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")
    assert rotated.status_code == 200
    new = rotated.json()["secret"]
    assert new != old and new.startswith("whsec_")
    ping = f"/v1/webhook-endpoints/{endpoint['id']}/test"
    assert producer.signed("POST", ping).status_code == 202
    deliverer.until(receiver, 1)
    first = receiver.received[0]
    assert json.loads(first.body)["type"] == "ping"
    assert len(first.headers["webhook-signature"].split()) == 2
    for secret in (old, new):
        assert webhooks.verify(secret, first.headers, first.body, time.time()).ok
    # The clock moved a day on: the old secret's grace is over.
    with engine.begin() as conn:
        conn.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.id == endpoint["id"])
            .values(previous_until=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
        )
    assert producer.signed("POST", ping).status_code == 202
    deliverer.until(receiver, 2)
    second = receiver.received[1]
    assert len(second.headers["webhook-signature"].split()) == 1
    assert webhooks.verify(new, second.headers, second.body, time.time()).ok
    assert not webhooks.verify(old, second.headers, second.body, time.time()).ok


def test_endpoints_belong_to_their_key_and_changes_are_audited(
    engine: Engine, producer: Client, scoped: Client, operator: Client, http: TestClient
) -> None:
    endpoint = register(producer, "http://127.0.0.1:9/x", ["job.completed"])
    assert "secret" not in producer.signed("GET", f"/v1/webhook-endpoints/{endpoint['id']}").json()
    listed = producer.signed("GET", "/v1/webhook-endpoints").json()["items"]
    assert endpoint["id"] in {e["id"] for e in listed}
    # Another key: no such endpoint, whatever the verb.
    for method, suffix in [
        ("GET", ""),
        ("DELETE", ""),
        ("POST", "/test"),
        ("POST", "/rotate-secret"),
    ]:
        answer = scoped.signed(method, f"/v1/webhook-endpoints/{endpoint['id']}{suffix}")
        assert answer.status_code == 404, (method, suffix)
        assert answer.json()["error"]["code"] == "webhook_endpoint_not_found"
    # Bearer tokens: not a producer's route; the operator's own list and disable.
    viewer = Client("http://testserver", token=VIEWER_TOKEN, http=http)
    assert viewer.bearer("GET", "/v1/webhook-endpoints").status_code == 403
    assert viewer.bearer("GET", "/admin/webhook-endpoints").status_code == 403
    everyone = operator.bearer("GET", "/admin/webhook-endpoints").json()["items"]
    assert endpoint["id"] in {e["id"] for e in everyone}
    log = operator.bearer("GET", f"/admin/webhook-endpoints/{endpoint['id']}/deliveries")
    assert log.status_code == 200 and log.json()["items"] == []
    assert (
        viewer.bearer("GET", f"/admin/webhook-endpoints/{endpoint['id']}/deliveries").status_code
        == 403
    )
    missing = operator.bearer(
        "GET", "/admin/webhook-endpoints/we_000000000000000000000000/deliveries"
    )
    assert missing.status_code == 404
    disabled = operator.bearer("POST", f"/admin/webhook-endpoints/{endpoint['id']}/disable")
    assert disabled.json()["status"] == "disabled"
    test = producer.signed("POST", f"/v1/webhook-endpoints/{endpoint['id']}/test")
    assert test.status_code == 409
    producer.signed("POST", f"/v1/webhook-endpoints/{endpoint['id']}/rotate-secret")
    assert producer.signed("DELETE", f"/v1/webhook-endpoints/{endpoint['id']}").status_code == 204
    assert producer.signed("GET", f"/v1/webhook-endpoints/{endpoint['id']}").status_code == 404
    with engine.connect() as conn:
        rows = conn.execute(
            select(audit_log.c.action, audit_log.c.actor, audit_log.c.details)
            .where(audit_log.c.target == endpoint["id"])
            .order_by(audit_log.c.id)
        ).all()
    assert [r.action for r in rows] == [
        "webhook_endpoint.create",
        "webhook_endpoint.disable",
        "webhook_endpoint.rotate",
        "webhook_endpoint.delete",
    ]
    assert rows[0].actor == f"producer:{PRODUCER_ID}" and rows[1].actor.startswith("operator:")
    assert not any("whsec_" in (r.details or "") for r in rows)


def test_bad_registrations_are_refused_by_name(producer: Client) -> None:
    cases = [
        ({"url": "ftp://x.example/h", "events": ["job.completed"]}, "webhook_url_refused"),
        ({"url": "http://127.0.0.1:1/h", "events": ["job.started"]}, "literal_error"),
        ({"url": "http://127.0.0.1:1/h", "events": []}, "too_short"),
        ({"url": "http://127.0.0.1:1/h", "events": ["job.completed"], "x": 1}, "extra_forbidden"),
        (
            {"url": "https://no-such-host.invalid/h", "events": ["job.completed"]},
            "webhook_url_refused",
        ),
    ]
    for body, code in cases:
        answer = producer.signed_json("POST", "/v1/webhook-endpoints", body)
        assert answer.status_code == 422, body
        assert answer.json()["error"]["code"] == code, answer.text
    assert producer.signed("POST", "/v1/webhook-endpoints", b"{").status_code == 422


def test_private_addresses_are_refused_at_registration_and_delivery(
    backend_env: ServiceEnv, engine: Engine, receiver: Receiver
) -> None:
    strict = backend_env.settings(webhook_allow_private=False)
    with TestClient(create_app(strict)) as http:
        client = Client("http://testserver", key_id=PRODUCER_ID, secret=PRODUCER_SECRET, http=http)
        for url in (
            receiver.url,
            "https://127.0.0.1/h",
            "https://localhost/h",
            "https://10.0.0.8/h",
        ):
            body = {"url": url, "events": ["job.completed"]}
            answer = client.signed_json("POST", "/v1/webhook-endpoints", body)
            assert answer.status_code == 422, url
            assert answer.json()["error"]["code"] == "webhook_url_refused"
    # Registered while private addresses were allowed, delivered when they are not.
    loose = backend_env.settings(webhook_allow_private=True)
    with TestClient(create_app(loose)) as http:
        client = Client("http://testserver", key_id=PRODUCER_ID, secret=PRODUCER_SECRET, http=http)
        endpoint = register(client, receiver.url, ["job.completed"])
        assert (
            client.signed("POST", f"/v1/webhook-endpoints/{endpoint['id']}/test").status_code == 202
        )
        strict_deliverer = Deliverer(strict, engine)
        for _ in range(3):
            strict_deliverer.round()
        log = client.signed("GET", f"/v1/webhook-endpoints/{endpoint['id']}/deliveries").json()
    assert receiver.received == []
    [delivery] = log["items"]
    assert delivery["attempt_log"][0]["error"] == "url_refused"  # http:// is refused too


def test_a_redirect_is_a_failed_attempt(
    producer: Client, receiver: Receiver, deliverer: Deliverer
) -> None:
    internal = Receiver()
    try:
        receiver.default = Answer(302, location=internal.url)
        endpoint = register(producer, receiver.url, ["job.completed"])
        producer.signed("POST", f"/v1/webhook-endpoints/{endpoint['id']}/test")
        deliverer.until(receiver, 1)
        time.sleep(0.2)
        assert internal.received == []
        log = producer.signed("GET", f"/v1/webhook-endpoints/{endpoint['id']}/deliveries").json()
        [delivery] = log["items"]
        assert delivery["status"] == "pending"
        assert delivery["attempt_log"][0]["status_code"] == 302
    finally:
        internal.close()


def test_a_resolved_dispute_is_told_with_its_resolution(
    engine: Engine,
    producer: Client,
    operator: Client,
    receiver: Receiver,
    deliverer: Deliverer,
) -> None:
    vendor = new_vendor(engine)
    docs = [disputed_doc(vendor, ["3.00"])]
    job_id = settle(engine, docs)
    [dispute_id] = job_disputes(engine, job_id, docs)
    register(producer, receiver.url, ["dispute.resolved"])
    decision = {"decision": "accept_model", "note": "model stands"}
    answer = operator.bearer("POST", f"/admin/disputes/{dispute_id}/resolve", decision)
    assert answer.status_code in (200, 201), answer.text
    with engine.connect() as conn:
        [event] = conn.execute(
            select(webhook_events).where(
                webhook_events.c.type == "dispute.resolved",
                webhook_events.c.subject == str(dispute_id),
            )
        ).all()
    assert event.partitions == [vendor]
    deliverer.until(receiver, 1)
    data = json.loads(receiver.received[0].body)["data"]
    shown = operator.bearer("GET", f"/v1/disputes/{dispute_id}").json()
    assert data == shown
    assert data["status"] == "resolved" and data["resolution"]["decision"] == "accept_model"


@pytest.mark.regression
def test_an_endpoint_deleted_during_an_attempt_records_nothing(
    settings: Settings, engine: Engine, producer: Client, receiver: Receiver
) -> None:
    """Seen in the e2e run: the attempt's log row met a foreign key violation
    (its delivery deleted with the endpoint while the request was out)."""
    endpoint = register(producer, receiver.url, ["job.completed"])
    assert (
        producer.signed("POST", f"/v1/webhook-endpoints/{endpoint['id']}/test").status_code == 202
    )
    handed: list[tuple[str, int]] = []
    FanOut(settings, engine).tick()
    Scheduler(settings, engine, lambda d, n: handed.append((d, n))).tick()
    [mine] = deliveries.page(engine, endpoint["id"], status=None, before=None, limit=5)
    assert (mine.id, 0) in handed
    now = dt.datetime.now(dt.UTC)
    claimed = deliveries.claim(engine, mine.id, 0, now, dt.timedelta(seconds=60))
    assert claimed is not None
    assert producer.signed("DELETE", f"/v1/webhook-endpoints/{endpoint['id']}").status_code == 204
    tried = deliveries.Tried(now, 200, None, "HTTP 200", 5, "ok")
    recorded = deliveries.record(engine, claimed, tried, "delivered", None, dt.timedelta(days=5))
    assert not recorded.counted
