"""Producer keys managed at runtime (docs/api.md#producer-keys), over HTTP in
process on each ledger backend: an operator creates, scopes, rotates and
revokes them (audited, the secret shown once and never stored or logged in
the clear); the API honours each change within seconds, without a restart."""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from services.api.app import create_app
from services.commands.client import Client
from services.relay.fanout import FanOut
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.engine import make_engine
from shared.adapters.db.operators import producer_keys as keys_db
from shared.adapters.db.tables import audit_log, producer_keys, webhook_deliveries
from shared.config.settings import Settings
from shared.domain.synthetic import promo_contract
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
)

pytestmark = pytest.mark.both_backends
PATH = "/admin/producer-keys"
WITHIN_S = 5.0


@pytest.fixture(scope="module")
def settings(backend_env: ServiceEnv) -> Settings:
    return backend_env.settings(webhook_allow_private=True)


@pytest.fixture(scope="module")
def http(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


@pytest.fixture(scope="module")
def viewer(http: TestClient) -> Client:
    return Client("http://testserver", token=VIEWER_TOKEN, http=http)


def signer(http: TestClient, key_id: str, secret: str) -> Client:
    return Client("http://testserver", key_id=key_id, secret=secret, http=http)


def until(check: Callable[[], bool], within: float = WITHIN_S) -> float:
    """Seconds until ``check()`` holds (polled); fails past ``within``."""
    start = time.monotonic()
    while not check():
        assert time.monotonic() - start < within, f"not so within {within} s"
        time.sleep(0.05)
    return time.monotonic() - start


def code(response: httpx.Response) -> str:
    return str(response.json()["error"]["code"])


def batch(partition: str) -> bytes:
    doc = promo_doc(partition, [promo_line(1, "8", "1.00")])
    return json.dumps({"kind": "promo_accrual", "documents": [doc]}).encode()


def create(operator: Client, partitions: list[str], **extra: Any) -> dict[str, Any]:
    response = operator.bearer("POST", PATH, {"partitions": partitions, **extra})
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created


def audit_rows(env: ServiceEnv, key_id: str) -> list[Any]:
    engine = make_engine(env.database_url)
    with engine.connect() as conn:
        rows = conn.execute(
            select(audit_log).where(audit_log.c.target == key_id).order_by(audit_log.c.id)
        ).all()
    engine.dispose()
    return list(rows)


@pytest.mark.regression
def test_a_key_created_at_runtime_signs_within_seconds_and_a_revoked_one_is_refused(
    operator: Client, http: TestClient
) -> None:
    """Issue 42 #15: a new key needed SETTLEQ_PRODUCER_KEYS edited and the stack
    restarted. Created through the route, it signs a read within 5 s; revoked,
    it is refused (401 key_revoked) within 5 s; no restart in between."""
    created = create(operator, ["V-RT,1", "V-RT-2"])
    key = signer(http, created["key_id"], created["secret"])
    assert until(lambda: key.signed("GET", "/v1/jobs").status_code == 200) < WITHIN_S
    revoked = operator.bearer("POST", f"{PATH}/{created['key_id']}/revoke")
    assert revoked.status_code == 200 and revoked.json()["status"] == "revoked"
    assert until(lambda: key.signed("GET", "/v1/jobs").status_code == 401) < WITHIN_S
    assert code(key.signed("GET", "/v1/jobs")) == "key_revoked"


@pytest.mark.regression
def test_a_revoked_key_is_told_key_revoked_everywhere_and_an_unknown_one_unknown_key(
    operator: Client, http: TestClient
) -> None:
    """Issue 52: a revoked key got 401 unknown_key, as if it had never been: its
    holder could not tell a typo from a revocation. The refusal names nothing
    secret: no partition, no date, no secret."""
    created = create(operator, ["V-REVOKED-SCOPE"])
    key = signer(http, created["key_id"], created["secret"])
    until(lambda: key.signed("GET", "/v1/jobs").status_code == 200)
    assert operator.bearer("POST", f"{PATH}/{created['key_id']}/revoke").status_code == 200
    until(lambda: key.signed("GET", "/v1/jobs").status_code == 401)
    endpoint = {"url": "http://127.0.0.1:9/h", "events": ["job.completed"]}
    for refused in (
        key.signed("GET", "/v1/jobs"),  # a signed read
        key.submit(batch("V-REVOKED-SCOPE")),  # the front door
        key.signed_json("POST", "/v1/webhook-endpoints", endpoint),  # a body, checked first
    ):
        assert refused.status_code == 401, refused.text
        error = refused.json()["error"]
        assert error["code"] == "key_revoked" and error["details"] == []
        for secret_or_scope in (created["secret"], "V-REVOKED-SCOPE"):
            assert secret_or_scope not in refused.text
    stranger = signer(http, uid("never-made-"), created["secret"])
    assert code(stranger.signed("GET", "/v1/jobs")) == "unknown_key"


@pytest.mark.regression
def test_a_runtime_keys_scope_decides_its_submissions_and_changes_without_a_restart(
    operator: Client, http: TestClient
) -> None:
    """A partition key holding a comma is one partition, not two."""
    created = create(operator, ["V-A,B"])
    key = signer(http, created["key_id"], created["secret"])
    until(lambda: key.signed("GET", "/v1/jobs").status_code == 200)
    assert key.submit(batch("V-A,B")).status_code == 202
    refused = key.submit(batch("V-A"))
    assert refused.status_code == 403 and code(refused) == "partition_not_allowed"
    scoped = operator.bearer(
        "PUT", f"{PATH}/{created['key_id']}/partitions", {"partitions": ["V-A"]}
    )
    assert scoped.status_code == 200, scoped.text
    assert scoped.json()["partitions"] == ["V-A"] and "secret" not in scoped.json()
    until(lambda: key.submit(batch("V-A")).status_code == 202)
    assert code(key.submit(batch("V-A,B"))) == "partition_not_allowed"


@pytest.mark.regression
def test_a_rotated_key_signs_with_both_secrets_until_the_old_one_expires(
    operator: Client, http: TestClient
) -> None:
    created = create(operator, ["*"])
    key_id = created["key_id"]
    old = signer(http, key_id, created["secret"])
    until(lambda: old.signed("GET", "/v1/jobs").status_code == 200)
    rotated = operator.bearer("POST", f"{PATH}/{key_id}/rotate", {"previous_valid_for_s": 3600})
    assert rotated.status_code == 200, rotated.text
    new_secret = rotated.json()["secret"]
    assert new_secret != created["secret"] and rotated.json()["previous_until"]
    new = signer(http, key_id, new_secret)
    until(lambda: new.signed("GET", "/v1/jobs").status_code == 200)
    assert old.signed("GET", "/v1/jobs").status_code == 200  # still within its hour
    at_once = operator.bearer("POST", f"{PATH}/{key_id}/rotate", {"previous_valid_for_s": 0})
    newest = signer(http, key_id, at_once.json()["secret"])
    until(lambda: newest.signed("GET", "/v1/jobs").status_code == 200)
    assert new.signed("GET", "/v1/jobs").status_code == 401
    assert old.signed("GET", "/v1/jobs").status_code == 401
    # A rotated-out secret stops when its time is up, with no write in between.
    brief = operator.bearer("POST", f"{PATH}/{key_id}/rotate", {"previous_valid_for_s": 3})
    latest = signer(http, key_id, brief.json()["secret"])
    assert newest.signed("GET", "/v1/jobs").status_code == 200
    until(lambda: newest.signed("GET", "/v1/jobs").status_code == 401)
    assert latest.signed("GET", "/v1/jobs").status_code == 200


@pytest.mark.regression
def test_every_write_is_audited_and_no_secret_is_stored_shown_again_or_audited(
    operator: Client, backend_env: ServiceEnv
) -> None:
    key_id = uid("k-audit-")
    created = create(operator, ["V-1"], key_id=key_id)
    assert created["key_id"] == key_id and created["partitions"] == ["V-1"]
    assert created["status"] == "active" and created["source"] == "database"
    rotated = operator.bearer("POST", f"{PATH}/{key_id}/rotate", {})
    operator.bearer("PUT", f"{PATH}/{key_id}/partitions", {"partitions": ["V-2", "V-3"]})
    operator.bearer("POST", f"{PATH}/{key_id}/revoke")
    secrets = [created["secret"], rotated.json()["secret"]]
    shown = operator.bearer("GET", f"{PATH}/{key_id}").json()
    assert shown["status"] == "revoked" and shown["revoked_at"]
    assert shown["partitions"] == ["V-2", "V-3"] and "secret" not in shown
    listed = operator.bearer("GET", PATH).json()["items"]
    assert key_id in {k["key_id"] for k in listed}
    rows = audit_rows(backend_env, key_id)
    assert [r.action for r in rows] == [
        "producer_key.create",
        "producer_key.rotate",
        "producer_key.scope",
        "producer_key.revoke",
    ]
    assert all(r.actor.startswith("operator:") for r in rows)
    engine = make_engine(backend_env.database_url)
    with engine.connect() as conn:
        stored = conn.execute(select(producer_keys).where(producer_keys.c.key_id == key_id)).one()
    engine.dispose()
    assert json.loads(stored.partitions) == ["V-2", "V-3"]
    everything = " ".join(
        [json.dumps(listed), json.dumps(shown), *(r.details for r in rows), *map(str, stored)]
    )
    for secret in secrets:
        assert secret not in everything


@pytest.mark.regression
def test_the_routes_refuse_viewers_producers_and_bad_requests(
    operator: Client, viewer: Client, http: TestClient
) -> None:
    created = create(operator, ["V-1"])
    one = f"{PATH}/{created['key_id']}"
    writes = [
        ("POST", PATH, {"partitions": ["V-1"]}),
        ("PUT", f"{one}/partitions", {"partitions": ["V-2"]}),
        ("POST", f"{one}/rotate", {}),
        ("POST", f"{one}/revoke", None),
    ]
    for method, path, body in [*writes, ("GET", PATH, None), ("GET", one, None)]:
        assert viewer.bearer(method, path, body).status_code == 403, (method, path)
        assert http.request(method, path).status_code == 401, (method, path)
        # A producer's signature is no operator's token, whatever key signs.
        for key_id, secret in ((PRODUCER_ID, PRODUCER_SECRET), (SCOPED_ID, SCOPED_SECRET)):
            signed = signer(http, key_id, secret)
            payload = b"" if body is None else json.dumps(body).encode()
            answer = signed.signed(method, path, payload, {"Content-Type": "application/json"})
            assert answer.status_code in (401, 403), (method, path, answer.text)
    assert code(operator.bearer("GET", f"{PATH}/no-such-key")) == "producer_key_not_found"
    duplicate = operator.bearer("POST", PATH, {"key_id": created["key_id"], "partitions": ["*"]})
    assert duplicate.status_code == 409 and code(duplicate) == "producer_key_exists"
    # An id the environment's keys hold is refused too: two keys, one id.
    env_id = operator.bearer("POST", PATH, {"key_id": PRODUCER_ID, "partitions": ["*"]})
    assert env_id.status_code == 409 and code(env_id) == "producer_key_exists"
    for body in (
        {"partitions": []},
        {"partitions": ["V|1"]},
        {"partitions": ["V-1"], "key_id": "bad id"},
        {"partitions": "V-1"},
        {"partitions": ["V-1"], "secret": "mine"},
    ):
        answer = operator.bearer("POST", PATH, body)
        assert answer.status_code == 422, (body, answer.text)
    revoked = create(operator, ["V-1"])
    operator.bearer("POST", f"{PATH}/{revoked['key_id']}/revoke")
    for path, body in (
        (f"{PATH}/{revoked['key_id']}/rotate", {}),
        (f"{PATH}/{revoked['key_id']}/partitions", {"partitions": ["V-1"]}),
    ):
        method = "PUT" if path.endswith("partitions") else "POST"
        answer = operator.bearer(method, path, body)
        assert answer.status_code == 409 and code(answer) == "producer_key_revoked"
    env_key = operator.bearer("POST", f"{PATH}/{PRODUCER_ID}/revoke")
    assert env_key.status_code == 409 and code(env_key) == "producer_key_from_environment"
    listed = {k["key_id"]: k for k in operator.bearer("GET", PATH).json()["items"]}
    assert listed[PRODUCER_ID]["source"] == "environment"


@pytest.mark.regression
def test_a_runtime_keys_webhook_endpoint_hears_of_the_jobs_of_its_partitions(
    operator: Client, http: TestClient, settings: Settings, ctx: WorkerContext
) -> None:
    """The webhooks component asked only SETTLEQ_PRODUCER_KEYS for a key's
    scope: an endpoint of a key created at runtime heard of nothing."""
    vendor = uid("V-WH-")
    created = create(operator, [vendor])
    key = signer(http, created["key_id"], created["secret"])
    until(lambda: key.signed("GET", "/v1/jobs").status_code == 200)
    body = {"url": "http://127.0.0.1:9/hook", "events": ["job.completed"]}
    registered = key.signed_json("POST", "/v1/webhook-endpoints", body)
    assert registered.status_code == 201, registered.text
    endpoint_id = registered.json()["id"]
    path = f"/v1/contracts/promo_accrual/{vendor}/1"
    assert operator.bearer("PUT", path, promo_contract()).status_code == 201
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")])]
    _, messages = store_job(ctx.engine, settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    scheduler = FanOut(settings, ctx.engine)
    query = select(webhook_deliveries).where(webhook_deliveries.c.endpoint_id == endpoint_id)

    def delivered() -> bool:
        scheduler.tick()
        with ctx.engine.connect() as conn:
            return conn.execute(query).first() is not None

    until(delivered, within=10)


@pytest.mark.regression
def test_a_signed_body_meets_a_503_not_a_500_while_the_database_is_down(
    test_env: ServiceEnv,
) -> None:
    """The keys are read before a signed body (webhook endpoints) is: with the
    database down that read was an unhandled error in the body guard, a 500."""
    down = test_env.settings(database_url="postgresql+psycopg://postgres@127.0.0.1:1/none")
    with TestClient(create_app(down), raise_server_exceptions=False) as client:
        key = signer(client, PRODUCER_ID, PRODUCER_SECRET)
        body = {"url": "https://example.com/hook", "events": ["job.completed"]}
        answer = key.signed_json("POST", "/v1/webhook-endpoints", body)
        assert answer.status_code == 503 and code(answer) == "database_unavailable"
        assert key.signed("GET", "/v1/jobs").status_code == 503


@pytest.mark.regression
def test_a_key_another_api_process_writes_counts_here_within_seconds(
    http: TestClient, ctx: WorkerContext
) -> None:
    """No message between processes: each re-reads the table within a second
    or so. Written here as another API process writes it (same table, same
    internal key), never through this app."""
    key_id, secret = uid("k-other-"), "another-process-secret-0123456789"
    now = dt.datetime.now(dt.UTC)
    keys_db.create(ctx.engine, key_id, ["*"], secret, ctx.internal_key, "operator:other", now)
    key = signer(http, key_id, secret)
    assert until(lambda: key.signed("GET", "/v1/jobs").status_code == 200) < WITHIN_S
    keys_db.revoke(ctx.engine, key_id, "operator:other", now)
    assert until(lambda: key.signed("GET", "/v1/jobs").status_code == 401) < WITHIN_S
