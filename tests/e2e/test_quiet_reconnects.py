"""Idle broker connections and routine shutdowns log no error (issue 12, item 8).

RabbitMQ drops a connection that missed its heartbeats. The API's publishing
connections sat idle between batches, so the first batch after a quiet
minute met a dead socket and pika logged an error with a traceback (the batch
was still accepted); workers logged the same at every SIGTERM, closing
connections that had died while idle. The heartbeat is 2 s here (the broker
URL's ``heartbeat=``), so "idle past the heartbeat" takes seconds, not a minute.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import BROKER_URL
from tests.support.stack import Stack, log_events

pytestmark = pytest.mark.e2e

HEARTBEAT_S = 2
STACK_SETTINGS = {
    "broker_url": BROKER_URL + ("&" if "?" in BROKER_URL else "?") + f"heartbeat={HEARTBEAT_S}"
}
IDLE_S = 4 * HEARTBEAT_S  # RabbitMQ gives up on a silent peer after about two heartbeats


def submit_and_settle(stack: Stack) -> None:
    vendor = uid("IDLE-")
    body = {"kind": "promo_accrual", "documents": [promo_doc(vendor, [promo_line(1, "8", "1.00")])]}
    producer = stack.producer()
    response = producer.submit(json.dumps(body).encode())
    assert response.status_code == 202, response.text
    job = producer.wait(response.json()["job_id"], timeout=60)
    assert job["state"] == "completed", stack.log("compute_heavy")


def loud_lines(stack: Stack, name: str) -> list[str]:
    """A process's error-level events and tracebacks."""
    text = stack.log(name, tail=None)
    loud = [e["event"] for e in log_events(text) if e.get("level") in ("error", "critical")]
    return loud + (["Traceback"] if "Traceback" in text else [])


@pytest.mark.regression
def test_batches_after_an_idle_spell_and_a_sigterm_log_no_error(stack: Stack) -> None:
    submit_and_settle(stack)  # every process now holds its broker connections
    time.sleep(IDLE_S)
    submit_and_settle(stack)  # the API publishes, the fast_path hands over, after the idle spell
    time.sleep(IDLE_S)
    for worker in ("fast_path", "compute_heavy"):
        stack.stop_one(worker)
    loud = {name: loud_lines(stack, name) for name in ("api", "fast_path", "compute_heavy")}
    assert loud == {"api": [], "fast_path": [], "compute_heavy": []}
