"""The API with its broker unreachable logs one line per failure it meets, no
traceback (issue 42, item 17): pika logged four error records and a traceback
for each connection attempt (a readiness probe, a batch answered 503), on top
of the API's own line."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import ServiceEnv
from tests.support.stack import Stack, log_events

pytestmark = pytest.mark.e2e
UNREACHABLE = "amqp://guest:guest@127.0.0.1:1/"


@pytest.mark.regression
def test_an_unreachable_broker_is_one_line_per_failure_without_traceback(
    stack_env: ServiceEnv,
) -> None:
    logs = ARTIFACTS / "logs" / "broker_down"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(stack_env, logs, broker_url=UNREACHABLE)
    try:
        # --checked: past the start-up check that refuses a missing broker, as a
        # supervised API restarted during an outage is.
        stack._spawn("api", ["api", "--port", str(stack.port), "--checked"])
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{stack.url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, stack.log("api")
            time.sleep(0.2)
        for _ in range(2):
            ready = httpx.get(f"{stack.url}/readyz", timeout=30)
            assert ready.status_code == 503 and "unavailable" in ready.json()["checks"]["broker"]
        doc = promo_doc(uid("BRK-"), [promo_line(1, "8", "1.00")])
        body = {"kind": "promo_accrual", "documents": [doc]}
        refused = stack.producer().submit(json.dumps(body).encode())
        assert refused.status_code == 503, refused.text
        time.sleep(1)  # the log is written
    finally:
        stack.stop()
    text = stack.log("api", tail=None)
    assert "Traceback" not in text, text
    events = log_events(text)
    loud = [e for e in events if e.get("level") in ("error", "critical") or "exception" in e]
    assert loud == [], loud
    broker = [e["event"] for e in events if "broker" in str(e.get("event", "")).lower()]
    assert len(broker) == 3, broker  # two probes and one batch: a line each
