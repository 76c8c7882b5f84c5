"""Secrets never appear in logs, error bodies or responses
(docs/architecture.md#authenticity-and-least-privilege).

The stack runs with known producer secrets, bearer tokens and internal
signing key; every endpoint and the usual failures are exercised; then every
process log (JSON lines, each also decoded) and every response body, the
/metrics of the API and of each worker included, is searched for each secret.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from shared.logs import STAGE_FIELDS
from tests.e2e.conftest import ARTIFACTS
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
)
from tests.support.receiver import Receiver
from tests.support.stack import Stack


@pytest.fixture(scope="module")
def internal_key(stack_env: ServiceEnv) -> Iterator[str]:
    engine = make_engine(stack_env.database_url)
    with engine.connect() as conn:
        key = conn.execute(
            select(tables.meta.c.value).where(tables.meta.c.key == "internal_signing_key")
        ).scalar_one()
    engine.dispose()
    yield str(key)


def test_no_secret_in_any_log_or_response(stack_env: ServiceEnv, internal_key: str) -> None:
    logs = ARTIFACTS / "logs" / "secret_hygiene"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(stack_env, logs, webhook_allow_private=True)
    bodies: list[str] = []
    receiver = Receiver()
    try:
        stack.start()
        stack._spawn("relay", ["relay"])
        stack.start_worker("webhooks")
        producer, viewer, operator = stack.producer(), stack.viewer(), stack.operator()
        # The two answers that show a webhook secret, once each, are left out of the search.
        created = producer.signed_json(
            "POST", "/v1/webhook-endpoints", {"url": receiver.url, "events": ["job.completed"]}
        )
        endpoint = created.json()["id"]
        webhook_secrets = [created.json()["secret"]]
        vendor = uid("SECRET-")
        contract = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
        good = json.dumps(
            {
                "kind": "promo_accrual",
                "documents": [
                    promo_doc(
                        vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00", tier="T9")]
                    )
                ],
            }
        ).encode()
        responses = [
            operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", contract),
            operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", {"tier_rates": {}}),
            operator.bearer("GET", f"/v1/contracts/promo_accrual/{vendor}"),
            producer.submit(good),
            producer.submit(b"{not json"),
            producer.submit(good.replace(b'"8"', b"8")),
            producer.signed(
                "POST", "/v1/batches", good, {"Content-Type": "application/json"}, timestamp=1
            ),
            stack.client(key_id=PRODUCER_ID, secret=SCOPED_SECRET).submit(good),
            stack.client(key_id="nobody", secret=PRODUCER_SECRET).submit(good),
            stack.client(token="not-a-token").bearer("GET", "/v1/jobs"),
            viewer.bearer("GET", "/admin/dead-letters"),
        ]
        job_id = responses[3].json()["job_id"]
        job = producer.wait(job_id, timeout=60)
        receiver.wait_for(1)
        rotated = producer.signed("POST", f"/v1/webhook-endpoints/{endpoint}/rotate-secret")
        webhook_secrets.append(rotated.json()["secret"])
        assert producer.signed("POST", f"/v1/webhook-endpoints/{endpoint}/test").status_code == 202
        receiver.wait_for(2)
        letters = operator.bearer("GET", f"/admin/dead-letters?job_id={job_id}").json()["items"]
        responses += [
            viewer.bearer("GET", f"/v1/jobs/{job_id}"),
            viewer.bearer("GET", f"/v1/jobs/{job_id}/lines"),
            viewer.bearer("GET", "/v1/jobs?limit=5"),
            producer.signed("GET", f"/v1/jobs/{job_id}"),
            operator.bearer("GET", f"/admin/dead-letters/{letters[0]['id']}"),
            operator.bearer("GET", "/admin/dead-letters/stats"),
            operator.bearer(
                "POST", f"/admin/dead-letters/{letters[0]['id']}/discard", {"note": "test"}
            ),
            operator.bearer("POST", "/admin/dead-letters/requeue", {"job_id": job_id, "limit": 5}),
            operator.bearer("GET", "/admin/audit"),
            stack.client().bearer("GET", "/readyz"),
            stack.client().bearer("GET", "/healthz"),
            viewer.bearer("GET", "/v1/dashboard/summary"),
            stack.client().bearer("GET", "/dashboard"),
            producer.signed("GET", f"/v1/webhook-endpoints/{endpoint}"),
            producer.signed("GET", "/v1/webhook-endpoints"),
            producer.signed("GET", f"/v1/webhook-endpoints/{endpoint}/deliveries"),
            operator.bearer("GET", "/admin/webhook-endpoints"),
            operator.bearer("GET", f"/admin/webhook-endpoints/{endpoint}/deliveries"),
            operator.bearer("GET", "/admin/audit"),
        ]
        # Every /metrics (the API's and each worker's), once the batch has been counted.
        scrapes = [stack.scrape(name) for name in ("api", "fast_path", "compute_heavy", "webhooks")]
        assert [r.status_code for r in scrapes] == [200, 200, 200, 200]
        assert all("settleq_" in r.text for r in scrapes)
        responses += [*scrapes, stack.scrape("api", token=None), stack.scrape("fast_path", "x")]
        assert job["state"] == "completed"
        assert {r.status_code for r in responses} >= {200, 201, 202, 401, 403, 422}
        bodies = [r.text + json.dumps(dict(r.headers)) for r in responses]
    finally:
        stack.stop()
        receiver.close()

    secrets = {
        **{f"webhook secret {n}": s for n, s in enumerate(webhook_secrets)},
        # Its key material alone, as a log of the key bytes would show it.
        **{f"webhook key {n}": s.removeprefix("whsec_") for n, s in enumerate(webhook_secrets)},
        "producer secret": PRODUCER_SECRET,
        "other producer secret": SCOPED_SECRET,
        "viewer token": VIEWER_TOKEN,
        "operator token": OPERATOR_TOKEN,
        "internal signing key": internal_key,
    }
    texts = {f"log {p.name}": p.read_text(errors="replace") for p in Path(logs).glob("*.log")}
    events = _json_events(texts)
    # Searched decoded too: JSON escaping must not hide a secret from the search.
    texts.update({f"event {i}": json.dumps(e, ensure_ascii=False) for i, e in enumerate(events)})
    texts.update({f"response {i}": body for i, body in enumerate(bodies)})
    assert len(texts) > 15
    hits = [
        (what, where)
        for what, secret in secrets.items()
        for where, text in texts.items()
        if secret in text
    ]
    assert hits == []
    stages = {e["stage"]: e for e in events if e.get("job_id") == job_id and "stage" in e}
    assert {"accept", "validate", "settle", "publish"} <= set(stages)
    assert all(set(STAGE_FIELDS) <= set(e) for e in stages.values())
    assert stages["settle"]["partition_key"] == vendor and stages["settle"]["dead_lettered"] == 1


def _json_events(texts: dict[str, str]) -> list[dict[str, Any]]:
    """Every line the processes logged, each one JSON (their stderr is not a terminal)."""
    events = []
    for where, text in texts.items():
        for line in text.splitlines():
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                raise AssertionError(f"{where}: not a JSON log line: {line[:200]}") from None
    return events
