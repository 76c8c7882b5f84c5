"""The dashboard in a real headless Chromium, and /metrics of the API and of
each worker process, after a batch through the whole stack (docs/operations.md#metrics).

The browser is Debian's ``chromium`` (``.ci/run`` installs it), driven by
Playwright; a missing browser fails the test, it never skips. The screenshot
is saved at 1400 and 800 px wide as ``tests/artifacts/dashboard-1400.png`` and
``dashboard-800.png``, a job's page as ``dashboard-job.png`` and the
open-disputes panel alone as ``dashboard-disputes.png``. The last test requeues
a dead letter from the page (it runs last: it changes the counts above).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, select

from services.api.metrics import API_METRICS
from services.worker.metrics import WORKER_METRICS
from shared.adapters.db import tables
from shared.domain.x12.synthetic import freight_210_file
from tests.e2e.conftest import ARTIFACTS
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN
from tests.support.stack import Stack
from tests.support.x12_files import Freight, freight_contract, freight_file

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


def signed_in(browser: Any, stack: Stack, width: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 1000}, accept_downloads=True)
    page.goto(f"{stack.url}/dashboard")
    page.fill("#token", VIEWER_TOKEN)
    page.click("#sign-in button[type=submit]")
    return page


def test_dashboard_shows_the_completed_job_in_chromium(stack: Stack, settled: Settled) -> None:
    from playwright.sync_api import expect, sync_playwright

    job_id = settled.job["job_id"]
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = signed_in(browser, stack, 1400)
            row = page.locator(f'#jobs tr[data-job-id="{job_id}"]')
            expect(row).to_have_attribute("data-state", "completed", timeout=20_000)
            expect(row.locator("td.state")).to_have_text("completed, 1 line dead-lettered")
            expect(row.locator("td").nth(5)).to_have_text("9")  # posted
            check_formatting(page, row)
            # Finance's view first: money, at each kind's quantum, grouped.
            posted = page.locator('#money-cards [data-kind="promo_accrual"][data-money="posted"]')
            expect(posted.locator(".value")).to_have_text(re.compile(r"^\d{1,3}(,\d{3})*\.\d\d$"))
            expect(page.locator("#ops-view")).to_be_hidden()
            # The operations view: outcomes, throughput, queues, relay, dead letters.
            page.click("#view-ops")
            expect(page.locator("#finance-view")).to_be_hidden()
            expect(page.locator("#dead-letters")).to_contain_text("unknown_promo_tier")
            expect(page.locator("#queues")).to_contain_text(f"{stack.env.queue_prefix}.fast_path")
            expect(page.locator("#chart polyline")).to_have_count(1)
            # Not under settleq up here: the processes table says there is no supervisor.
            expect(page.locator("#processes")).to_contain_text("no supervisor reporting")
            assert page.evaluate("sessionStorage.getItem('settleq.token')") == VIEWER_TOKEN
            check_chart_and_relay(page)

            # A dead-letter reason links to its list, which needs an operator token.
            page.click("#dead-letters a")
            expect(page.locator("#letters-error")).to_contain_text("operator token")
            expect(page.locator("#operator-form")).to_be_visible()
            page.goto(f"{stack.url}/dashboard#")
            expect(row).to_have_attribute("data-state", "completed")
            check_disputes_panel(page, stack, settled)
            page.screenshot(path=str(ARTIFACTS / "dashboard-1400.png"), full_page=True)
            page.locator("#disputes").screenshot(path=str(ARTIFACTS / "dashboard-disputes.png"))
            check_job_page(page, stack, settled)

            narrow = signed_in(browser, stack, 800)
            expect(narrow.locator(f'#jobs tr[data-job-id="{job_id}"]')).to_have_count(1)
            # Usable at 800 px: the page itself never scrolls sideways (a wide
            # table scrolls inside its own container).
            assert narrow.evaluate("document.documentElement.scrollWidth") <= 800
            narrow.screenshot(path=str(ARTIFACTS / "dashboard-800.png"), full_page=True)
        finally:
            browser.close()
    for name in ("dashboard-1400.png", "dashboard-800.png", "dashboard-job.png"):
        assert (ARTIFACTS / name).stat().st_size > 10_000


FORMAT_CASES = [
    ("money", "1234567.005", "promo_accrual", "1,234,567.01"),  # half up, at 0.01
    ("money", "-1234.5", "recipe_cost", "-1,234.5000"),  # 0.0001 for recipes
    ("money", "999999999999999999.995", "freight_audit", "1,000,000,000,000,000,000.00"),
    ("money", "-0.001", "promo_accrual", "0.00"),  # never a negative zero
    ("decimal", "1234.5678", None, "1,234.5678"),
    # A sum over kinds: at the finest quantum among them, so nothing is cut.
    ("moneyOfKinds", "1234.5", ["promo_accrual", "recipe_cost"], "1,234.5000"),
    ("moneyOfKinds", "1234.567", ["promo_accrual"], "1,234.57"),
]


def check_formatting(page: Any, row: Any) -> None:
    """One formatter for every figure: money at its kind's quantum, with
    separators, from the strings alone (digits a float would lose survive)."""
    from playwright.sync_api import expect

    for function, value, kind, shown in FORMAT_CASES:
        got = page.evaluate(
            "async ([f, v, k]) => (await import('/dashboard/assets/format.js'))[f](v, k)",
            [function, value, kind],
        )
        assert got == shown, (function, value, kind)
    when = page.evaluate(
        "async () => (await import('/dashboard/assets/format.js')).when('2026-12-01T12:00:05Z')"
    )
    assert re.fullmatch(r"2026-12-01 12:00:05 (UTC|GMT)", when), when  # the browser runs in UTC
    tick = page.evaluate(
        "async () => (await import('/dashboard/assets/format.js'))"
        ".clock(Date.UTC(2026, 11, 1, 12, 0, 5, 470), true, true)"
    )
    assert tick == "12:00:05.4", tick
    expect(row.locator("td").nth(11)).to_have_text(
        re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \S+$")
    )
    # The job's posted amount (9 lines of promo money) at 0.01, as sent by the API.
    expect(row.locator("td").nth(9)).to_have_text(re.compile(r"^\d{1,3}(,\d{3})*\.\d\d$"))


def check_chart_and_relay(page: Any) -> None:
    """Labelled axes, the three ranges, "lines/s now" as the chart's marked
    point, and the relay's lag and outbox backlog."""
    from playwright.sync_api import expect

    expect(page.locator("#chart .y-title")).to_have_text("lines/s")
    expect(page.locator("#chart .x-title")).to_have_text(re.compile(r"^time \((UTC|GMT)\)$"))
    for span, label, ticks in (
        ("1h", "hour", r"^\d\d:\d\d$"),
        ("24h", "24 hours", r"^\d\d:\d\d$"),
        ("10m", "10 minutes", r"^\d\d:\d\d$"),
    ):
        page.select_option("#range", span)
        expect(page.locator("#window-note")).to_contain_text(f"last {label}")
        expect(page.locator("#chart text.tick").last).to_have_text(re.compile(ticks))
    now = page.locator("#rate-now").inner_text()
    expect(page.locator("#chart circle.now title")).to_have_text(f"{now} lines/s")
    expect(page.locator("#relay-backlog")).to_have_text(re.compile(r"^\d[\d,]*$"))
    expect(page.locator("#relay-lag")).to_have_text(re.compile(r"^(none waiting|\d+ s|\d+ min)$"))


def check_job_page(page: Any, stack: Stack, settled: Settled) -> None:
    """Click a job: its timeline, outcomes per partition, filtered lines and their CSV."""
    from playwright.sync_api import expect

    job_id = settled.job["job_id"]
    page.click(f'#jobs tr[data-job-id="{job_id}"] a')
    expect(page.locator("#job")).to_be_visible()
    expect(page.locator("#overview")).to_be_hidden()
    expect(page.locator("#job-id")).to_have_text(job_id)
    expect(page.locator('#job-facts [data-fact="completed"] .value')).not_to_have_text("not yet")
    # Not a clean success: one of its lines was dead-lettered.
    expect(page.locator('#job-facts [data-fact="state"] .value')).to_have_text(
        "completed, 1 line dead-lettered"
    )
    # ... with the reason, linking to its dead letters.
    expect(page.locator("#job-dead")).to_contain_text("unknown_promo_tier (1)")
    reason_link = page.locator('#job-dead a[href="#dead-letters/unknown_promo_tier"]')
    expect(reason_link).to_have_count(1)
    timeline = page.locator("#job-timeline")
    expect(timeline.locator(".marker-label")).to_have_text(["accepted", "completed"])
    expect(timeline.locator(".y-title")).to_have_text("lines done")
    # A job of a few seconds: its time ticks are tenths apart, never one label twice.
    ticks = timeline.locator("text.tick:not(.marker-label)").all_text_contents()
    times = [t for t in ticks if re.fullmatch(r"\d\d:\d\d(:\d\d(\.\d)?)?", t)]
    assert times and len(times) == len(set(times)), ticks
    partitions = stack.viewer().bearer("GET", f"/v1/jobs/{job_id}/timeline").json()["partitions"]
    for partition, counts in (
        (settled.vendor, ["9", "3", "1"]),
        (settled.other_vendor, ["0", "1", "0"]),
    ):
        cells = page.locator(f'#job-partitions tr[data-partition="{partition}"] td')
        expect(cells.nth(1)).to_have_text(counts[0])
        expect(cells.nth(2)).to_have_text(counts[1])
        expect(cells.nth(3)).to_have_text(counts[2])
        [sent] = [p for p in partitions if p["partition_key"] == partition]
        assert Decimal(cells.nth(4).inner_text().replace(",", "")) == Decimal(sent["amount_posted"])
        assert re.fullmatch(r"[\d,]+\.\d\d", cells.nth(5).inner_text())
    expect(page.locator("#job-lines tbody tr")).to_have_count(14)
    page.select_option("#job-outcome", "disputed")
    expect(page.locator('#job-lines tbody tr[data-outcome="disputed"]')).to_have_count(4)
    expect(page.locator("#job-lines tbody tr")).to_have_count(4)
    with page.expect_download() as download:
        page.click("#job-csv")
    assert download.value.suggested_filename == f"job-{job_id}-disputed.csv"
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert text.splitlines()[0].startswith("document_id,line_ref,outcome")
    assert [line.split(",")[2] for line in text.splitlines()[1:]] == ["disputed"] * 4
    page.screenshot(path=str(ARTIFACTS / "dashboard-job.png"), full_page=True)
    page.click("#job a")  # back to the overview
    expect(page.locator("#overview")).to_be_visible()


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
        # The API's strings added exactly, shown at promo money's 0.01.
        assert Decimal(sent) == expected
        expect(page.locator(selector)).to_have_text(f"{expected:,.2f}")
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


def test_a_search_leads_to_a_document_and_a_lines_story_whose_deltas_add_up(
    stack: Stack, settled: Settled
) -> None:
    """The resolved dispute's document found by its id and partition, then its
    line's history: disputed, then resolved at the model, adding up to what the
    line amounts to now; a reconciliation key typed in goes straight there."""
    from playwright.sync_api import expect, sync_playwright

    [dispute] = (
        stack.viewer()
        .bearer("GET", f"/v1/disputes?status=resolved&partition_key={settled.vendor}")
        .json()["items"]
    )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = signed_in(browser, stack, 1400)
            page.fill("#search-text", dispute["document_id"])
            page.fill("#search-partition", settled.vendor)
            page.click("#search button[type=submit]")
            lines = page.locator("#document-lines tbody tr")
            expect(lines).to_have_count(2)
            expect(page.locator("#overview")).to_be_hidden()
            disputed = page.locator('#document-lines tr[data-outcome="disputed"]')
            expect(disputed).to_contain_text("resolved")  # its dispute's status
            expect(disputed).to_contain_text("9.99")
            disputed.locator("a", has_text="story").click()

            expect(page.locator("#identity-key")).to_have_text(dispute["reconciliation_key"])
            entries = page.locator("#identity-entries tbody tr")
            expect(entries).to_have_count(2)
            expect(entries.nth(0)).to_have_attribute("data-outcome", "disputed")
            expect(entries.nth(1)).to_have_attribute("data-outcome", "resolved")
            expect(page.locator("#identity-sum")).to_have_attribute("data-adds-up", "true")
            model = dispute["model_amount"]
            expect(page.locator('#identity-facts [data-fact="amount now"]')).to_contain_text(
                f"{Decimal(model):.2f}"
            )
            expect(page.locator("#identity-dispute")).to_have_text("No open dispute.")

            page.goto(f"{stack.url}/dashboard#")
            page.fill("#search-text", dispute["reconciliation_key"])
            page.click("#search button[type=submit]")
            expect(page.locator("#identity-entries tbody tr")).to_have_count(2)
            page.screenshot(path=str(ARTIFACTS / "dashboard-identity.png"), full_page=True)
        finally:
            browser.close()


def test_the_token_is_shared_by_the_sessions_tabs_and_remembered_only_when_asked(
    stack: Stack, settled: Settled
) -> None:
    from playwright.sync_api import expect, sync_playwright

    job_row = f'#jobs tr[data-job-id="{settled.job["job_id"]}"]'
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            session = browser.new_context()
            first = session.new_page()
            first.goto(f"{stack.url}/dashboard")
            first.fill("#token", VIEWER_TOKEN)
            first.click("#sign-in button[type=submit]")
            expect(first.locator(job_row)).to_have_count(1)
            second = session.new_page()  # another tab: asks the first for the token
            second.goto(f"{stack.url}/dashboard")
            expect(second.locator(job_row)).to_have_count(1)
            expect(second.locator("#sign-in")).to_be_hidden()
            assert second.evaluate("localStorage.getItem('settleq.token')") is None
            assert VIEWER_TOKEN not in second.url
            first.click("#sign-out")  # every tab forgets it
            expect(second.locator("#sign-in")).to_be_visible()
            expect(second.locator("#sign-in-error")).to_have_text("Signed out in another tab.")
            second.close()
            first.close()

            device = browser.new_context()
            page = device.new_page()
            page.goto(f"{stack.url}/dashboard")
            page.fill("#token", VIEWER_TOKEN)
            page.check("#remember")
            page.click("#sign-in button[type=submit]")
            expect(page.locator(job_row)).to_have_count(1)
            page.close()  # no tab left: only the remembered token can open the next
            later = device.new_page()
            later.goto(f"{stack.url}/dashboard")
            expect(later.locator(job_row)).to_have_count(1)
            later.click("#sign-out")
            assert later.evaluate("localStorage.getItem('settleq.token')") is None
        finally:
            browser.close()


def test_an_operator_requeues_a_dead_letter_from_the_page(stack: Stack, settled: Settled) -> None:
    """Runs last (it changes the counts the tests above read): the list shows
    what failed, asks for an operator token, and requeues after a confirmation
    (here refused, naming the cause: the line's pinned contract has no tier T9,
    so a requeue could only fail again, issue 42 item 13)."""
    from playwright.sync_api import expect, sync_playwright

    operator = stack.operator()
    letters = operator.bearer("GET", f"/admin/dead-letters?job_id={settled.job['job_id']}").json()[
        "items"
    ]
    [letter] = letters
    lid = letter["id"]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = signed_in(browser, stack, 1400)
            page.click("#view-ops")
            expect(page.locator("#dead-letters")).to_contain_text("unknown_promo_tier")
            page.click('#dead-letters tr[data-reason="unknown_promo_tier"] a')
            expect(page.locator("#operator-form")).to_be_visible()
            page.fill("#operator-token", OPERATOR_TOKEN)
            page.click("#operator-form button[type=submit]")
            shown = page.locator(f'#letters-table tr[data-letter-id="{letter["id"]}"]')
            expect(shown).to_contain_text(letter["message"])
            # An X12 payload reads one segment a line.
            x12 = freight_210_file(1, seed=1, carriers=1).decode()
            shown_x12 = page.evaluate(
                "async (t) => (await import('/dashboard/assets/letters.js')).readable(t)", x12
            )
            segments = shown_x12.splitlines()
            assert segments[0].startswith("ISA*") and segments[0].endswith("~")
            assert [s[:3] for s in segments[1:3]] == ["GS*", "ST*"]
            assert "".join(segments) == x12.replace("\n", "")
            # The failed line, indented to be read; the whole payload on demand.
            expect(shown.locator("pre.excerpt")).to_contain_text('"promo_tier": "T9"')
            shown.locator("details summary").click()
            expect(shown.locator("pre.payload")).to_contain_text('"lines": [')
            job_link = shown.locator(f'a[href="#jobs/{settled.job["job_id"]}"]')
            expect(job_link).to_have_count(1)
            assert page.evaluate("sessionStorage.getItem('settleq.operator')") == OPERATOR_TOKEN

            dialogs: list[str] = []

            def answer(dialog: Any) -> None:
                dialogs.append(dialog.message)
                dialog.dismiss() if len(dialogs) == 1 else dialog.accept()

            page.on("dialog", answer)
            shown.locator("button.requeue").click()  # first dismissed: nothing happens
            expect(shown).to_be_visible()
            assert operator.bearer("GET", f"/admin/dead-letters/{lid}").json()["requeues"] == 0
            shown.locator("button.requeue").click()
            expect(page.locator("#letters-error")).to_contain_text(
                "would be dead-lettered again: unknown_promo_tier"
            )
            assert len(dialogs) == 2 and all(f"dead letter {lid}" in d for d in dialogs)
        finally:
            browser.close()
    after = operator.bearer("GET", f"/admin/dead-letters/{lid}").json()
    assert (after["status"], after["requeues"]) == ("dead", 0)
    audit = operator.bearer("GET", "/admin/audit").json()["items"]
    assert not any(
        a["action"] == "dead_letter.requeue" and a["target"] == f"dead_letter:{lid}" for a in audit
    )


def test_partners_are_listed_and_a_partners_page_shows_its_files(stack: Stack) -> None:
    """A partner with one accepted and one refused file: 50% refused in the
    list, and its page lists both files (the refused one with its code)."""
    from playwright.sync_api import expect, sync_playwright

    carrier, sender = uid("C").upper()[:8], uid("PT")[:15].upper()
    operator, producer = stack.operator(), stack.producer()
    contract = f"/v1/contracts/freight_audit/{carrier}/1"
    assert operator.bearer("PUT", contract, freight_contract()).status_code == 201
    body = {"name": "Browser carrier", "contract_version": 1}
    assert operator.bearer("PUT", f"/v1/partners/ZZ/{sender}", body).status_code == 201
    good = freight_file(Freight(uid("F"), carrier), sender=sender)
    assert producer.submit(good, "application/edi-x12").status_code == 202
    broken = freight_file(Freight(uid("F"), carrier), sender=sender)
    broken = broken.replace(b"SE*9*0001", b"SE*8*0001")
    refused = producer.submit(broken, "application/edi-x12")
    assert refused.status_code == 422
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            page = signed_in(browser, stack, 1400)
            page.click("#view-partners")
            mine = page.locator(f'#partners-table tr[data-partner="ZZ/{sender}"]')
            expect(mine).to_contain_text("Browser carrier")
            expect(mine).to_contain_text("50%")
            mine.locator("a").click()
            expect(page.locator("#partner-name")).to_contain_text(f"ZZ/{sender}")
            expect(page.locator("#partner-files tbody tr")).to_have_count(2)
            expect(page.locator("#partner-files")).to_contain_text("edi_count_mismatch")
            # Issue 42: the refusal's message and the 997 it carried, not its code alone.
            # The accepted file's row has an empty refusal cell: the refused one's.
            shown = page.locator("#partner-files td.refusal").filter(has_text="edi_")
            expect(shown).to_contain_text(refused.json()["error"]["message"])
            shown.locator("summary").click()
            expect(shown.locator("pre")).to_contain_text("AK5*R")
            expect(page.locator("#partner-files-summary")).to_have_attribute("data-refused", "1")
            expect(page.locator("#overview")).to_be_hidden()
            page.screenshot(path=str(ARTIFACTS / "dashboard-partner.png"), full_page=True)
        finally:
            browser.close()


def _resolution(engine: Engine, dispute_id: int) -> Any:
    """The dispute's ``resolved`` ledger row (id, amount), once the outbox row
    holding its event (``settlement.resolved.<kind>``) is published (at its commit)."""
    ledger, outbox = tables.ledger_entries, tables.outbox
    deadline = time.monotonic() + 20
    while True:
        with engine.connect() as conn:
            resolved = conn.execute(
                select(ledger.c.id, ledger.c.amount).where(
                    ledger.c.supersedes_id == dispute_id, ledger.c.outcome == "resolved"
                )
            ).one()
            published = [
                r
                for r in conn.execute(
                    select(outbox.c.ledger_entry_ids).where(outbox.c.published_at.is_not(None))
                )
                if resolved.id in (r.ledger_entry_ids or [])
            ]
        if published:
            return resolved
        assert time.monotonic() < deadline, f"dispute {dispute_id}: its event was not published"
        time.sleep(0.2)


def test_disputes_are_decided_from_their_page_by_an_operator_only(
    stack: Stack, settled: Settled, engine: Engine
) -> None:
    """Runs after the tests that count open disputes: a viewer sees the queue
    without buttons; an operator resolves one, then the rest in bulk, each
    after a confirmation stating the count and the money."""
    from playwright.sync_api import expect, sync_playwright

    viewer_api = stack.viewer()
    open_now = viewer_api.bearer("GET", "/v1/disputes?status=open").json()["items"]
    mine = [d for d in open_now if d["partition_key"] in (settled.vendor, settled.other_vendor)]
    other = next(d for d in mine if d["partition_key"] == settled.other_vendor)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)
        try:
            viewer = signed_in(browser, stack, 1400)
            viewer.click("#disputes-link")
            rows = viewer.locator("#disputes-table tbody tr[data-dispute-id]")
            expect(rows.first).to_be_visible()
            expect(viewer.locator(f'tr[data-dispute-id="{other["id"]}"]')).to_contain_text("20.00")
            expect(viewer.locator("#dq-decide")).to_be_hidden()
            expect(viewer.locator("#disputes-table input.pick").first).to_be_hidden()

            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(f"{stack.url}/dashboard")
            page.fill("#token", OPERATOR_TOKEN)
            page.click("#sign-in button[type=submit]")
            page.goto(f"{stack.url}/dashboard#disputes")
            expect(page.locator("#dq-decide")).to_be_visible()
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.accept()))

            page.fill("#dq-partition", settled.other_vendor)
            page.click("#dq-filters button[type=submit]")
            expect(page.locator("#disputes-table tbody tr[data-dispute-id]")).to_have_count(1)
            page.check(f'tr[data-dispute-id="{other["id"]}"] input.pick')
            page.select_option("#dq-decision", "accept_model")
            page.fill("#dq-note", "the contract rate applies")
            page.click("#dq-decide button[type=submit]")
            expect(page.locator("#disputes-page-done")).to_contain_text("Resolved 1 dispute")
            assert dialogs[-1] == "Decide 1 dispute as accept_model, paying 1.00 in all?"
            assert _resolution(engine, other["id"]).amount == Decimal(other["model_amount"])

            page.fill("#dq-partition", settled.vendor)
            page.click("#dq-filters button[type=submit]")
            vendor_rows = page.locator("#disputes-table tbody tr[data-dispute-id]")
            expect(vendor_rows).to_have_count(2)
            page.check("#dq-all")
            page.select_option("#dq-decision", "accept_claim")
            page.fill("#dq-note", "claims verified with the vendor")
            page.click("#dq-decide button[type=submit]")
            expect(page.locator("#disputes-page-done")).to_contain_text("Resolved 2 disputes")
            claims = [Decimal(c) for c, _ in OPEN_DISPUTES["vendor"]]
            assert dialogs[-1] == (
                f"Decide 2 disputes as accept_claim, paying {sum(claims):.2f} in all?"
            )
            expect(page.locator("#disputes-table")).to_contain_text("no dispute matches")
            for d in mine:
                if d["partition_key"] == settled.vendor:
                    assert _resolution(engine, d["id"]).amount == Decimal(d["claimed_amount"])
        finally:
            browser.close()
    left = viewer_api.bearer("GET", "/v1/disputes?status=open").json()["items"]
    assert not [d for d in left if d["partition_key"] in (settled.vendor, settled.other_vendor)]
