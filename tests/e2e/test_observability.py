"""The dashboard in a real headless Chromium, and /metrics of the API and of
each worker process, after a batch through the whole stack (docs/operations.md#metrics).

The browser is Debian's ``chromium`` (``.ci/run`` installs it), driven by
Playwright; a missing browser fails the test, it never skips. The screenshot
is saved as ``tests/artifacts/dashboard.png`` (and the open-disputes panel
alone as ``tests/artifacts/dashboard-disputes.png``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, select

from services.api.metrics import API_METRICS
from services.worker.metrics import WORKER_METRICS
from shared.adapters.db import tables
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
    other_vendor: str  # a second partition, with one dispute


# The open disputes once the 9.99 claim is resolved: (claimed, model) per line.
OPEN_DISPUTES = {"vendor": [("5.00", "0.25"), ("1.00", "5.00")], "other": [("20.00", "1.00")]}


@pytest.fixture(scope="module")
def settled(stack: Stack, engine: Engine) -> Settled:
    """One small batch through the stack: posted, disputed and dead-lettered
    lines; one of its four disputes is then resolved by an operator."""
    vendor, other = uid("DASH-"), uid("DASH-")
    operator = stack.operator()
    for partition in (vendor, other):
        put = operator.bearer("PUT", f"/v1/contracts/promo_accrual/{partition}/1", CONTRACT)
        assert put.status_code == 201, put.text
    documents = [
        promo_doc(vendor, [promo_line(n, "8", "1.00", tier="T1") for n in range(1, 9)]),
        promo_doc(vendor, [promo_line(1, "10", "4.50", tier="T2"), promo_line(2, "3", "9.99")]),
        promo_doc(vendor, [promo_line(1, "4", "0.50", tier="T9")]),  # unknown tier
        promo_doc(vendor, [promo_line(1, "2", "5.00"), promo_line(2, "40", "1.00")]),  # disputed
        promo_doc(other, [promo_line(1, "8", "20.00")]),  # disputed
    ]
    producer = stack.producer()
    response = producer.submit(
        json.dumps({"kind": "promo_accrual", "documents": documents}).encode()
    )
    assert response.status_code == 202, response.text
    job = producer.wait(response.json()["job_id"], timeout=60)
    assert job["state"] == "completed", stack.log("compute_heavy")
    assert job["outcomes"] == {"posted": 9, "disputed": 4, "duplicate": 0, "dead_lettered": 1}

    ledger = tables.ledger_entries
    with engine.connect() as conn:
        dispute_id = conn.execute(
            select(ledger.c.id).where(
                ledger.c.partition_key == vendor,
                ledger.c.outcome == "disputed",
                ledger.c.claimed_amount == Decimal("9.99"),
            )
        ).scalar_one()
    resolved = operator.bearer(
        "POST",
        f"/admin/disputes/{dispute_id}/resolve",
        {"decision": "accept_model", "note": "contract rate applies"},
    )
    assert resolved.status_code in (200, 201), resolved.text
    return Settled(job, vendor, other)


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
            check_disputes_panel(page, stack, settled)
            page.screenshot(path=str(shot), full_page=True)
            page.locator("#disputes").screenshot(path=str(ARTIFACTS / "dashboard-disputes.png"))
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000


def check_disputes_panel(page: Any, stack: Stack, settled: Settled) -> None:
    """The open-disputes panel: the three open disputes' figures (the resolved one
    left out), shown as the API's decimal strings, and the partitions ranked."""
    from playwright.sync_api import expect

    lines = [line for group in OPEN_DISPUTES.values() for line in group]
    claimed = sum(Decimal(c) for c, _ in lines)
    variance = sum(Decimal(c) - Decimal(m) for c, m in lines)
    at_stake = sum(abs(Decimal(c) - Decimal(m)) for c, m in lines)
    assert (claimed, variance, at_stake) == (Decimal("26.00"), Decimal("19.75"), Decimal("27.75"))

    expect(page.locator("#disputes-open")).to_have_text("3", timeout=20_000)
    stats = stack.viewer().bearer("GET", "/v1/disputes/stats").json()
    [totals] = [t for t in stats["totals"] if t["status"] == "open"]
    cards = {
        "#disputes-claimed": (totals["claimed"], claimed),
        "#disputes-variance": (totals["variance"], variance),
        "#disputes-at-stake": (totals["abs_variance"], at_stake),
    }
    for selector, (sent, expected) in cards.items():
        expect(page.locator(selector)).to_have_text(sent)  # the API's string, digit for digit
        assert Decimal(page.locator(selector).inner_text()) == expected
    expect(page.locator("#disputes-oldest")).to_have_text(re.compile(r"^\d+ s$|^\d+ min$"))
    kinds = page.locator('#disputes-kinds tr[data-kind="promo_accrual"] td')
    expect(kinds.nth(1)).to_have_text("3")
    assert Decimal(kinds.nth(3).inner_text()) == sum(Decimal(m) for _, m in lines)
    ranked = page.locator("#disputes-partitions tbody tr")
    expect(ranked).to_have_count(2)
    expect(ranked.nth(0)).to_have_attribute("data-partition", settled.other_vendor)
    expect(ranked.nth(1)).to_have_attribute("data-partition", settled.vendor)
    first = ranked.nth(0).locator("td")
    expect(first.nth(2)).to_have_text("1")
    assert Decimal(first.nth(4).inner_text()) == Decimal("19.00")
    second = ranked.nth(1).locator("td")
    expect(second.nth(2)).to_have_text("2")
    assert Decimal(second.nth(3).inner_text()) == Decimal("0.75")  # 4.75 - 4.00: signed
    assert Decimal(second.nth(4).inner_text()) == Decimal("8.75")
    expect(page.locator("#disputes-error")).to_have_text("")


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
        "open disputes": "settleq_disputes_open",
        "open disputes' variance": "settleq_disputes_open_variance",
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
    # The dispute queue: three open (one resolved), every kind exported, 0 when none open.
    assert value(api.text, "settleq_disputes_open", kind="promo_accrual") == 3
    assert value(api.text, "settleq_disputes_open_variance", kind="promo_accrual") == 27.75
    for kind in ("recipe_cost", "freight_audit"):
        assert value(api.text, "settleq_disputes_open", kind=kind) == 0
        assert value(api.text, "settleq_disputes_open_variance", kind=kind) == 0
    oldest = value(api.text, "settleq_disputes_oldest_open_age_seconds")
    assert oldest is not None and 0 < oldest < 600
    requests = samples(api.text, "settleq_http_request_duration_seconds_count")
    posted = {"method": "POST", "route": "/v1/batches", "status": "202"}
    assert [v for labels, v in requests if labels == posted] == [1]
    assert any(labels["route"] == "/v1/jobs/{job_id}" for labels, _ in requests)
    assert not any(job["job_id"] in labels["route"] for labels, _ in requests)
