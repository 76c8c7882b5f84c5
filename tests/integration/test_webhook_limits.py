"""Issue 42's webhook edges through the API, on each ledger: a malformed URL
is refused by name, a key's endpoints and an endpoint's manual sends are
limited, every secret rotated out signs for 24 h from its own rotation, and a
job.completed names an acknowledgement only when there is one
(docs/api.md#webhooks)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine, insert, select, update

from services.api.app import create_app
from services.commands.client import Client
from services.relay.payloads import data_of
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.edi.tables import edi_acknowledgements
from shared.adapters.db.tables import jobs, outbox, webhook_deliveries, webhook_endpoints
from shared.adapters.db.webhooks import deliveries, endpoints
from shared.adapters.db.webhooks.deliveries import Waiting
from shared.adapters.db.webhooks.events import new_event_id
from shared.config.settings import ProducerKey, Settings
from shared.domain import webhooks
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import ServiceEnv

pytestmark = pytest.mark.both_backends
LIMIT = 3


@pytest.fixture(scope="module")
def key() -> ProducerKey:
    """A key of this module's own: the endpoint limit counts a key's endpoints."""
    return ProducerKey(key_id=uid("K-"), secrets=[uid("s-")], partitions=["*"])


@pytest.fixture(scope="module")
def settings(backend_env: ServiceEnv, key: ProducerKey) -> Settings:
    base = backend_env.settings(webhook_allow_private=True, webhook_max_endpoints=LIMIT)
    return base.model_copy(update={"producer_keys": [*base.producer_keys, key]})


@pytest.fixture(scope="module")
def producer(settings: Settings, key: ProducerKey) -> Iterator[Client]:
    with TestClient(create_app(settings)) as http:
        yield Client("http://testserver", key_id=key.key_id, secret=key.secrets[0], http=http)


def register(producer: Client, url: str = "http://127.0.0.1:9/h") -> dict[str, str]:
    answer = producer.signed_json(
        "POST", "/v1/webhook-endpoints", {"url": url, "events": ["job.completed"]}
    )
    assert answer.status_code == 201, answer.text
    found: dict[str, str] = answer.json()
    return found


@pytest.mark.regression
@pytest.mark.parametrize(
    "url",
    [
        "https://[127.0.0.1]/",
        "https://[::1:8420/",
        "https://a]b/",
        "https://[]/",
        # Brackets that are not the whole host were 201 (issue 52 item 6).
        "https://[2606:4700:4700::1111]x/",
        "https://[::ffff:1.1.1.1]x/",
        "http://[::1]]/x",
        "http://x[::1]:8080/h",
        "http://[::1]x:8080/h",
        "http://[v1.fe]/h",
    ],
)
def test_a_malformed_url_is_422_webhook_url_invalid(producer: Client, url: str) -> None:
    """urlsplit's ValueError was a 500; brackets it read part of were 201."""
    answer = producer.signed_json(
        "POST", "/v1/webhook-endpoints", {"url": url, "events": ["job.completed"]}
    )
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"] == "webhook_url_invalid"
    assert error["details"][0]["loc"] == ["body", "url"]


@pytest.mark.regression
def test_a_key_registers_at_most_its_limit_of_endpoints(producer: Client) -> None:
    """One key registered 200 endpoints: one job fanned out to 200 POSTs."""
    for e in producer.signed("GET", "/v1/webhook-endpoints").json()["items"]:
        producer.signed("DELETE", f"/v1/webhook-endpoints/{e['id']}")
    made = [register(producer) for _ in range(LIMIT)]
    answer = producer.signed_json(
        "POST",
        "/v1/webhook-endpoints",
        {"url": "http://127.0.0.1:9/h", "events": ["job.completed"]},
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"]["code"] == "webhook_endpoint_limit"
    assert len(producer.signed("GET", "/v1/webhook-endpoints").json()["items"]) == LIMIT
    # A deleted one frees its place.
    assert producer.signed("DELETE", f"/v1/webhook-endpoints/{made[0]['id']}").status_code == 204
    register(producer)


@pytest.mark.regression
def test_pings_and_retries_are_limited_to_ten_a_minute_per_endpoint(
    producer: Client, engine: Engine
) -> None:
    """100 pings in a row were all accepted."""
    for e in producer.signed("GET", "/v1/webhook-endpoints").json()["items"]:
        producer.signed("DELETE", f"/v1/webhook-endpoints/{e['id']}")
    endpoint, other = register(producer), register(producer)
    ping = f"/v1/webhook-endpoints/{endpoint['id']}/test"
    for _ in range(10):
        assert producer.signed("POST", ping).status_code == 202
    refused = producer.signed("POST", ping)
    assert refused.status_code == 429, refused.text
    assert refused.json()["error"]["code"] == "rate_limited"
    assert 1 <= int(refused.headers["Retry-After"]) <= 60
    # A manual retry counts against the same budget, and is refused the same way.
    retry = f"/v1/webhook-endpoints/{endpoint['id']}/deliveries/dlv_{'0' * 24}/retry"
    assert producer.signed("POST", retry).status_code == 429
    # Another endpoint has its own budget.
    assert producer.signed("POST", f"/v1/webhook-endpoints/{other['id']}/test").status_code == 202
    # A minute later (the clock moved in the row), the endpoint may send again.
    with engine.begin() as conn:
        row = conn.execute(
            webhook_endpoints.select().where(webhook_endpoints.c.id == endpoint["id"])
        ).one()
        earlier = [
            (dt.datetime.fromisoformat(t) - dt.timedelta(seconds=61)).isoformat()
            for t in json.loads(row.manual_sends)
        ]
        conn.execute(
            update(webhook_endpoints)
            .where(webhook_endpoints.c.id == endpoint["id"])
            .values(manual_sends=json.dumps(earlier))
        )
    assert producer.signed("POST", ping).status_code == 202


NOW = dt.datetime(2026, 12, 4, 12, 0, tzinfo=dt.UTC)


def _event(conn: Connection, now: dt.datetime) -> str:
    event_id = new_event_id()
    conn.execute(
        insert(outbox).values(
            event_id=event_id, type="job.completed", subject=uid("J-"), created_at=now
        )
    )
    return event_id


def _endpoint_of(engine: Engine, delivery_id: str) -> str:
    with engine.connect() as conn:
        found: str = conn.execute(
            select(webhook_deliveries.c.endpoint_id).where(webhook_deliveries.c.id == delivery_id)
        ).scalar_one()
    return found


@pytest.mark.regression
def test_each_rotated_secret_signs_for_24_hours_from_its_own_rotation(engine: Engine) -> None:
    """A second rotation within 24 h dropped the first rotated secret."""
    endpoint, first = endpoints.create(
        engine, uid("K-"), "https://a.example/h", ["job.completed"], None, NOW
    )
    second = endpoints.rotate(engine, endpoint.id, endpoint.key_id, NOW)
    third = endpoints.rotate(engine, endpoint.id, endpoint.key_id, NOW + dt.timedelta(hours=1))
    fourth = endpoints.rotate(engine, endpoint.id, endpoint.key_id, NOW + dt.timedelta(hours=2))
    assert second and third and fourth
    found = endpoints.get(engine, endpoint.id, None)
    assert found is not None

    def signing(hours: float) -> set[str]:
        return set(found.signing_secrets(NOW + dt.timedelta(hours=hours)))

    assert signing(3) == {fourth, third, second, first}
    assert signing(24) == {fourth, third, second}  # the first rotated out at NOW
    assert signing(25) == {fourth, third}
    assert signing(26) == {fourth}
    body = b"{}"
    at = NOW + dt.timedelta(hours=3)
    headers = webhooks.headers(found.signing_secrets(at), "msg_1", int(at.timestamp()), body)
    assert len(headers["webhook-signature"].split()) == 4
    for secret in (first, second, third, fourth):
        assert webhooks.verify(secret, headers, body, at.timestamp()).ok


@pytest.mark.regression
def test_job_completed_names_an_acknowledgement_only_when_one_is_stored(
    ctx: WorkerContext, settings: Settings, engine: Engine
) -> None:
    """Under a partner's ``acknowledge: errors_only`` the URL answered 404."""
    vendor = uid("WH-")
    publish_promo_contracts(engine, [vendor])
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")])]
    job_id, messages = store_job(ctx.engine, settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    with engine.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(source_format="x12"))
    event = Waiting("evt_1", "job.completed", job_id, (vendor,), None, NOW)
    data = json.loads(data_of(engine, event) or "{}")
    assert data["job_id"] == job_id and data["acknowledgement_url"] is None
    with engine.begin() as conn:
        conn.execute(
            insert(edi_acknowledgements).values(job_id=job_id, body=b"ISA*...~", created_at=NOW)
        )
    data = json.loads(data_of(engine, event) or "{}")
    assert data["acknowledgement_url"] == f"/v1/jobs/{job_id}/acknowledgement"


@pytest.mark.regression
def test_an_endpoint_has_at_most_two_deliveries_in_flight(engine: Engine) -> None:
    """Every due delivery was handed out at once: a hanging endpoint's took
    every delivery thread."""
    slow, _ = endpoints.create(
        engine, uid("K-"), "https://a.example/h", ["job.completed"], None, NOW
    )
    quick, _ = endpoints.create(
        engine, uid("K-"), "https://b.example/h", ["job.completed"], None, NOW
    )
    now = dt.datetime.now(dt.UTC)
    lease = dt.timedelta(seconds=60)
    with engine.begin() as conn:
        for _ in range(5):
            deliveries.fan_out(conn, _event(conn, now), None, [slow.id], now)
        deliveries.fan_out(conn, _event(conn, now), None, [quick.id], now)
    mine = {slow.id, quick.id}

    def hand_out() -> list[str]:
        with engine.begin() as conn:
            handed = deliveries.hand_out_due(conn, now, lease, 1000)
        return [d for d, _ in handed if _endpoint_of(engine, d) in mine]

    first = hand_out()
    assert len(first) == 3  # two of the slow endpoint's, the quick one's
    assert [_endpoint_of(engine, d) for d in first].count(slow.id) == 2
    assert hand_out() == []  # both slots taken, however long it hangs
    claimed = deliveries.claim(engine, first[0], 0, now, lease)
    assert claimed is not None
    tried = deliveries.Tried(now, None, "timeout", "no answer within 10 s", 10_000, "")
    deliveries.record(engine, claimed, tried, "pending", now, dt.timedelta(days=5))
    assert len(hand_out()) == 1  # a slot freed by the recorded attempt
