"""The dashboard in a real headless Chromium, and /metrics of the API and of
each worker process, after a batch through the whole stack (docs/operations.md#metrics).

The browser is Debian's ``chromium`` (``.ci/run`` installs it), driven by
Playwright; a missing browser fails the test, it never skips. The screenshot
is saved as ``tests/artifacts/dashboard.png``.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from services.api.metrics import API_METRICS
from services.worker.metrics import WORKER_METRICS
from tests.e2e.conftest import ARTIFACTS
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import VIEWER_TOKEN
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
CONTRACT = {"tier_rates": {"T1": "0.125", "T2": "0.45"}, "tolerance": "0.05"}


@dataclass(frozen=True)
class Settled:
    job: dict[str, Any]
    vendor: str


@pytest.fixture(scope="module")
def settled(stack: Stack) -> Settled:
    """One small batch through the stack: posted, disputed and dead-lettered lines."""
    vendor = uid("DASH-")
    put = stack.operator().bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
    assert put.status_code == 201, put.text
    documents = [
        promo_doc(vendor, [promo_line(n, "8", "1.00", tier="T1") for n in range(1, 9)]),
        promo_doc(vendor, [promo_line(1, "10", "4.50", tier="T2"), promo_line(2, "3", "9.99")]),
        promo_doc(vendor, [promo_line(1, "4", "0.50", tier="T9")]),  # unknown tier
    ]
    producer = stack.producer()
    response = producer.submit(
        json.dumps({"kind": "promo_accrual", "documents": documents}).encode()
    )
    assert response.status_code == 202, response.text
    job = producer.wait(response.json()["job_id"], timeout=60)
    assert job["state"] == "completed", stack.log("compute_heavy")
    assert job["outcomes"] == {"posted": 9, "disputed": 1, "duplicate": 0, "dead_lettered": 1}
    return Settled(job, vendor)


def chromium() -> str:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not os.path.exists(path):
        pytest.fail("Debian's chromium is missing (.ci/run installs it: apt-get install chromium)")
    return path


def test_dashboard_shows_the_completed_job_in_chromium(stack: Stack, settled: Settled) -> None:
    from playwright.sync_api import expect, sync_playwright

    job_id = settled.job["job_id"]
    shot = ARTIFACTS / "dashboard.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{stack.url}/dashboard")
            page.fill("#token", VIEWER_TOKEN)
            page.click("#sign-in button[type=submit]")
            row = page.locator(f'#jobs tr[data-job-id="{job_id}"]')
            expect(row).to_have_attribute("data-state", "completed", timeout=20_000)
            expect(row.locator("td.state")).to_have_text("completed")
            expect(row.locator("td").nth(5)).to_have_text("9")  # posted
            expect(page.locator("#dead-letters")).to_contain_text("unknown_promo_tier")
            expect(page.locator("#queues")).to_contain_text(f"{stack.env.queue_prefix}.fast_path")
            expect(page.locator("#chart polyline")).to_have_count(1)
            assert page.evaluate("sessionStorage.getItem('settleq.token')") == VIEWER_TOKEN

            # A dead-letter reason links to its list, which needs an operator token.
            page.click("#dead-letters a")
            expect(page.locator("#letters-error")).to_contain_text("operator token")
            page.goto(f"{stack.url}/dashboard#")
            expect(row).to_have_attribute("data-state", "completed")
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000


def names(text: str) -> set[str]:
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def samples(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    """Every sample of one series name: (labels, value)."""
    return [
        (sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    ]


def value(text: str, name: str, **labels: str) -> float | None:
    """The one sample of ``name`` with exactly these labels, or None."""
    found = [v for got, v in samples(text, name) if got == labels]
    assert len(found) <= 1
    return found[0] if found else None


def test_every_metric_is_served_after_a_batch(stack: Stack, settled: Settled) -> None:
    api = stack.scrape("api")
    workers = {name: stack.scrape(name) for name in ("fast_path", "compute_heavy")}
    assert api.status_code == 200 and all(w.status_code == 200 for w in workers.values())
    assert stack.scrape("api", token=None).status_code == 401
    assert stack.scrape("compute_heavy", token="not-a-token").status_code == 401

    # Each endpoint lists its metrics; together they list every one of issue 7.
    assert set(API_METRICS) <= names(api.text)
    for worker in workers.values():
        assert set(WORKER_METRICS) <= names(worker.text)
    issue = {
        "lines by kind and outcome": "settleq_lines_total",
        "dead letters by reason": "settleq_dead_letters_total",
        "dead letters stored by reason": "settleq_dead_letters_stored",
        "queue depth": "settleq_queue_depth",
        "oldest-message age": "settleq_queue_oldest_message_age_seconds",
        "settle latency": "settleq_settle_duration_seconds",
        "task duration": "settleq_task_duration_seconds",
        "HTTP requests": "settleq_http_request_duration_seconds",
    }
    served = names(api.text) | names(workers["compute_heavy"].text)
    assert {what: name for what, name in issue.items() if name not in served} == {}

    # ...with values from the batch, each line counted once.
    heavy = workers["compute_heavy"].text
    job = settled.job
    for outcome, count in job["outcomes"].items():
        assert value(heavy, "settleq_lines_total", kind="promo_accrual", outcome=outcome) == count
    dead = samples(heavy, "settleq_dead_letters_total")
    assert dead == [({"kind": "promo_accrual", "reason": "unknown_promo_tier"}, 1)]
    chunks = job["chunks"]["total"]
    assert value(heavy, "settleq_settle_duration_seconds_count", result="committed") == chunks
    fast = workers["fast_path"].text
    assert (
        value(fast, "settleq_task_duration_seconds_count", actor="validate", result="ok") == chunks
    )

    prefix = stack.env.queue_prefix
    heavy_queue = {"queue": f"{prefix}.compute_heavy", "family": "compute_heavy"}
    assert value(api.text, "settleq_queue_depth", **heavy_queue) == 0
    assert len(samples(api.text, "settleq_queue_depth")) == 4
    assert value(api.text, "settleq_queue_oldest_message_age_seconds", **heavy_queue) == 0
    stored = value(
        api.text, "settleq_dead_letters_stored", reason="unknown_promo_tier", status="dead"
    )
    assert stored == 1
    requests = samples(api.text, "settleq_http_request_duration_seconds_count")
    posted = {"method": "POST", "route": "/v1/batches", "status": "202"}
    assert [v for labels, v in requests if labels == posted] == [1]
    assert any(labels["route"] == "/v1/jobs/{job_id}" for labels, _ in requests)
    assert not any(job["job_id"] in labels["route"] for labels, _ in requests)
