"""A component that keeps dying never stops ``settleq up``
(docs/architecture.md#one-failure-stays-one-failure,
docs/operations.md#a-component-keeps-restarting; issue 29 item 4).

The fast_path worker is SIGKILLed six times, each right after it came back:
it is crash-looping. ``up`` goes on restarting it at the capped backoff; the
API keeps answering ``/healthz``, ``/readyz`` is 503 naming it,
``settleq_process_crash_looping{component="fast_path"}`` is 1, the other
children are the same processes as before, and a batch submitted then
settles. Once the worker stays up the reset time, the gauge is 0 again and
``/readyz`` is 200.
"""

from __future__ import annotations

import subprocess
import time
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.support.infra import ServiceEnv
from tests.support.stack import Stack, log_events, up_children
from tests.support.supervision import (
    HealthPoller,
    kill_and_wait_back,
    restarts,
    supervised_series,
    wait_for,
)
from tests.support.workload import CONTRACT, generate, ndjson

pytestmark = pytest.mark.timeout(240)

CRASH_LOOPING = "settleq_process_crash_looping"
# The capped backoff and the reset time are settings an operator tunes too;
# shortened so that the whole cycle (loop, restart, health) fits one test.
SUPERVISION: dict[str, Any] = {
    "restart_backoff_initial_s": 0.2,
    "restart_backoff_max_s": 4.0,
    "restart_reset_after_s": 15.0,
}


def readiness(stack: Stack) -> httpx.Response:
    return httpx.get(f"{stack.url}/readyz", timeout=10)


@pytest.mark.regression
def test_a_crash_looping_worker_is_reported_and_restarted_and_the_stack_goes_on(
    stack_env: ServiceEnv,
) -> None:
    logs = ARTIFACTS / "logs" / "crash_loop"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(stack_env, logs, **SUPERVISION)
    try:
        stack.start_up()
        up = stack.processes["up"]
        others = wait_for(
            "every child",
            lambda: (
                len(up_children(up)) == 5
                and {r: p for r, p in up_children(up).items() if r != "fast_path"}
            ),
        )
        ready = readiness(stack)
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"]["fast_path"] == "ok"
        assert supervised_series(stack, CRASH_LOOPING) == {
            "api": 0,
            "compute_heavy": 0,
            "fast_path": 0,
            "relay": 0,
            "webhooks": 0,
        }
        with HealthPoller(stack.url) as health:
            for _ in range(5):
                kill_and_wait_back(stack, "fast_path")
            # The sixth death within a minute: crash-looping.
            [worker] = up_children(up)["fast_path"]
            subprocess.run(["kill", "-KILL", str(worker)], check=True)
            killed_at = time.monotonic()

            def named() -> httpx.Response | None:
                response = readiness(stack)
                looping = response.json()["checks"].get("fast_path") == "crash_looping"
                return response if looping else None

            ready = wait_for("/readyz to name fast_path", named, timeout=30)
            assert ready.status_code == 503
            body = ready.json()
            assert body["status"] == "unavailable"
            assert {k: v for k, v in body["checks"].items() if k != "fast_path"} == {
                "database": "ok",
                "redis": "ok",
                "broker": "ok",
                "api": "ok",
                "compute_heavy": "ok",
                "relay": "ok",
                "webhooks": "ok",
            }
            looping = supervised_series(stack, CRASH_LOOPING)
            assert looping == {
                "api": 0,
                "compute_heavy": 0,
                "fast_path": 1,
                "relay": 0,
                "webhooks": 0,
            }

            # Restarted again at the capped backoff, and `up` never stopped.
            [back] = wait_for(
                "fast_path to be restarted once more",
                lambda: [p for p in up_children(up).get("fast_path", []) if p != worker],
                timeout=30,
            )
            restarted_after = time.monotonic() - killed_at
            assert up.poll() is None, stack.log("up")
            assert restarts(stack)["fast_path"] == 6
            assert {r: p for r, p in up_children(up).items() if r != "fast_path"} == others

            # The pipeline still works: a batch submitted now settles.
            data = generate(200, vendors=2, seed=2904)
            operator = stack.operator()
            for vendor in sorted({d["partition_key"] for d in data.documents + data.earlier}):
                put = operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
                assert put.status_code in (200, 201), put.text
            producer = stack.producer()
            documents = data.earlier + data.documents
            response = producer.submit(ndjson(documents), content_type="application/x-ndjson")
            assert response.status_code == 202, response.text
            job = producer.wait(response.json()["job_id"], timeout=120)
            assert job["state"] == "completed", job
            assert job["outcomes"]["dead_lettered"] == 0, job
            lines = sum(len(d["lines"]) for d in documents)
            assert job["lines"] == sum(job["outcomes"].values()) == lines, job

            # Up for the reset time: no longer crash-looping.
            wait_for(
                "the crash-looping gauge to be 0 again",
                lambda: supervised_series(stack, CRASH_LOOPING)["fast_path"] == 0,
                timeout=SUPERVISION["restart_reset_after_s"] + 30,
            )
            assert up_children(up)["fast_path"] == [back]
            ready = readiness(stack)
            assert ready.status_code == 200 and ready.json()["checks"]["fast_path"] == "ok"
        assert health.failures == [], "/healthz failed while fast_path was crash-looping"
        print(
            f"\ncrash loop: restarted {restarted_after:.1f} s after the sixth kill;"
            f" {health.polls} /healthz polls, none failed"
        )
        events = log_events(stack.log("up", tail=None))
        supervisor = [e for e in events if e.get("logger") == "settleq.supervisor"]
        [loop] = [e for e in supervisor if e["level"] == "error"]
        assert loop["component"] == "fast_path" and loop["signal"] == "SIGKILL"
        assert loop["deaths"] == 6
    finally:
        stack.stop()
    assert up.returncode == 0, stack.log("up")  # SIGTERM alone stopped it, cleanly
