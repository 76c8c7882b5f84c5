"""Who hears an event when partition keys hold the characters a list would be
joined on (docs/api.md#partition-keys-and-document-ids: a comma is data;
docs/api.md#who-receives-what: an endpoint hears only events of
partitions its key may submit for). The review's leak (C1, M1): a key scoped
to ``VENDOR-A`` heard the jobs and the resolved disputes of partition
``VENDOR-A,VENDOR-A``, and a key scoped to ``CX-1,CX-2`` never heard its own.

Each hostile partition is settled by the ``*`` key's producer and fanned out by
the real scheduler to real receivers on 127.0.0.1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from services.api.app import create_app
from services.commands.client import Client
from services.worker.context import WorkerContext
from shared.config.settings import ProducerKey, Settings
from tests.integration.test_webhooks import Deliverer, register, settled_job
from tests.support.disputes import disputed_doc, job_disputes, settle
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
)
from tests.support.receiver import Receiver

pytestmark = [pytest.mark.both_backends, pytest.mark.regression]

VENDOR = uid("VENDOR-A-")
PAIR = f"{uid('CX-1-')},{uid('CX-2-')}"  # one partition, with a comma in its name
HOSTILE = [f"{VENDOR},{VENDOR}", f",{VENDOR}", f"{VENDOR},", f'{VENDOR}","x', f"{VENDOR}\\,"]


@pytest.fixture(scope="module")
def settings(backend_env: ServiceEnv) -> Settings:
    base = backend_env.settings()
    keys = [
        *base.producer_keys,
        ProducerKey(key_id="only-a", secrets=["secret-only-a-0001"], partitions=[VENDOR]),
        ProducerKey(key_id="the-pair", secrets=["secret-the-pair-01"], partitions=[PAIR]),
    ]
    return backend_env.settings(
        webhook_allow_private=True, webhook_schedule_scale=0.001, producer_keys=keys
    )


@pytest.fixture(scope="module")
def http(settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings)) as client:
        yield client


@pytest.fixture
def receivers() -> Iterator[dict[str, Receiver]]:
    found = {"only-a": Receiver(), "the-pair": Receiver(), PRODUCER_ID: Receiver()}
    yield found
    for receiver in found.values():
        receiver.close()


def client(http: TestClient, key_id: str, secret: str) -> Client:
    return Client("http://testserver", key_id=key_id, secret=secret, http=http)


def test_no_event_crosses_a_partition_whatever_its_name_holds(
    ctx: WorkerContext,
    settings: Settings,
    engine: Engine,
    http: TestClient,
    receivers: dict[str, Receiver],
) -> None:
    operator = Client("http://testserver", token=OPERATOR_TOKEN, http=http)
    deliverer = Deliverer(settings, engine)
    while deliverer.round():  # what earlier tests left due
        pass
    events = ["job.completed", "dead_letters.created", "dispute.resolved"]
    register(client(http, "only-a", "secret-only-a-0001"), receivers["only-a"].url, events)
    register(client(http, "the-pair", "secret-the-pair-01"), receivers["the-pair"].url, events)
    everyone = client(http, PRODUCER_ID, PRODUCER_SECRET)
    register(everyone, receivers[PRODUCER_ID].url, events)

    hostile_jobs = [settled_job(ctx, settings, p, operator) for p in HOSTILE]
    own_job = settled_job(ctx, settings, VENDOR, operator)
    pair_job = settled_job(ctx, settings, PAIR, operator)
    # A resolved dispute of a hostile partition: the full claim, model and note.
    hostile = HOSTILE[0]
    docs = [disputed_doc(hostile, ["999.00"])]  # settled_job published its contract
    [dispute_id] = job_disputes(engine, settle(engine, docs), docs)
    answer = operator.bearer(
        "POST",
        f"/admin/disputes/{dispute_id}/resolve",
        {"decision": "accept_model", "note": "secret to VENDOR-A,VENDOR-A"},
    )
    assert answer.status_code in (200, 201), answer.text

    # The `*` key hears everything: 7 jobs x 2 events, and the resolution.
    deliverer.until(receivers[PRODUCER_ID], 2 * (len(HOSTILE) + 2) + 1)
    for _ in range(5):
        deliverer.round()

    def heard(key: str) -> list[tuple[str, str]]:
        bodies = [json.loads(r.body) for r in receivers[key].received]
        return sorted((b["type"], json.dumps(b["data"])) for b in bodies)

    only_a = heard("only-a")
    assert {t for t, _ in only_a} == {"job.completed", "dead_letters.created"}, only_a
    assert len(only_a) == 2 and all(own_job in data for _, data in only_a), only_a
    for job_id in hostile_jobs:
        assert not any(job_id in data for _, data in only_a)
    assert not any("secret to" in data for _, data in only_a)

    pair = heard("the-pair")
    assert len(pair) == 2 and all(pair_job in data for _, data in pair), pair


def test_a_keys_scope_is_matched_whole_at_the_front_door_and_in_reads(
    settings: Settings, http: TestClient
) -> None:
    """The same names at submission and in the job list: a key scoped to
    ``VENDOR-A`` may not submit for ``VENDOR-A,VENDOR-A``, one scoped to the
    single partition ``CX-1,CX-2`` may submit for it and not for ``CX-1``, and
    a job list filtered by ``VENDOR-A`` shows no job of a name that holds it."""

    def body(partition: str) -> bytes:
        doc = promo_doc(partition, [promo_line(1, "8", "1.00")])
        return json.dumps({"kind": "promo_accrual", "documents": [doc]}).encode()

    only_a = client(http, "only-a", "secret-only-a-0001")
    for hostile in HOSTILE:
        answer = only_a.submit(body(hostile))
        assert answer.status_code == 403, (hostile, answer.text)
        assert answer.json()["error"]["code"] == "partition_not_allowed"
    assert only_a.submit(body(VENDOR)).status_code == 202

    pair = client(http, "the-pair", "secret-the-pair-01")
    assert pair.submit(body(PAIR)).status_code == 202
    for part in PAIR.split(","):
        assert pair.submit(body(part)).status_code == 403

    everyone = client(http, PRODUCER_ID, PRODUCER_SECRET)
    hostile_job = everyone.submit(body(HOSTILE[0])).json()["job_id"]
    viewer = Client("http://testserver", token=VIEWER_TOKEN, http=http)
    query = urlencode({"partition_key": VENDOR, "limit": 200})
    listed = viewer.bearer("GET", f"/v1/jobs?{query}")
    assert listed.status_code == 200, listed.text
    shown = {j["job_id"] for j in listed.json()["items"]}
    assert shown and hostile_job not in shown
