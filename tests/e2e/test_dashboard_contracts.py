"""The dashboard's Contracts view and a contract's page in a real headless
Chromium, over a real API and ledger (docs/api.md#previewing-a-contract-version):
the published contracts, a contract's versions and newest body, and a preview
of a pasted body over the last closed period's documents, showing what the API
answers (totals, outcome changes, digest) and publishing nothing; a refused
body shows its code. The tests before the close see no closed period."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine

from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_dashboard_edges import _as_operator, _browser
from tests.e2e.test_dashboard_periods import grouped
from tests.e2e.test_observability import signed_in
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN
from tests.support.periods import settle_promo
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
KIND = "promo_accrual"
# Tier T1 at 0.15 (published: 0.125, then 0.150): the first document's claim,
# posted under version 1, would be disputed; the second's, disputed, would post.
PASTED = {"tier_rates": {"T1": "0.15"}, "tolerance": "0.05"}
NEGATIVE = {"tier_rates": {"T1": "-0.15"}, "tolerance": "0.05"}


@dataclass(frozen=True)
class Settled:
    vendor: str
    documents: list[str]


@pytest.fixture(scope="module")
def settled(engine: Engine) -> Settled:
    """Two documents settled under version 1 (versions 1 and 2 published) and
    booked in the open period: one posted, one disputed."""
    vendor = uid("CTR-")
    docs = [
        promo_doc(vendor, [promo_line(1, "8", "1.00")]),  # 1.00 at 0.125: posted
        promo_doc(vendor, [promo_line(1, "10", "1.50")]),  # 1.25 at 0.125: disputed
    ]
    settle_promo(engine, docs)
    return Settled(vendor, [d["document_id"] for d in docs])


@pytest.fixture(scope="module")
def closed(stack: Stack, settled: Settled) -> str:
    """The open period, where the documents are booked, closed: the last closed."""
    operator = stack.operator()
    [period] = [
        p for p in operator.bearer("GET", "/v1/periods").json()["items"] if p["status"] == "open"
    ]
    done = operator.bearer(
        "POST", "/admin/periods/close", {"period": period["name"], "next": uid("P-")}
    )
    assert done.status_code == 200, done.text
    return str(period["name"])


def _versions(stack: Stack, vendor: str) -> list[int]:
    listed = stack.operator().bearer("GET", f"/v1/contracts/{KIND}/{vendor}")
    assert listed.status_code == 200, listed.text
    return [v["version"] for v in listed.json()["items"]]


def _contract_page(page: Any, vendor: str) -> None:
    from playwright.sync_api import expect

    page.evaluate("location.hash = '#contracts'")
    listed = page.locator(f'#contracts-table tr[data-partition="{vendor}"]')
    expect(listed).to_have_attribute("data-kind", KIND)
    expect(listed.locator("td.versions")).to_have_text("2")
    expect(listed.locator("td.newest")).to_have_text("2")
    listed.locator("a").click()
    # Drawn with its selection at once: typed into before, both would be replaced.
    expect(page.locator("#contract-versions tbody tr[data-version]")).to_have_count(2)


@pytest.mark.regression
def test_a_viewer_is_asked_for_an_operator_token_and_asks_no_operator_endpoint(
    stack: Stack, settled: Settled
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            refused: list[str] = []
            page.on("response", lambda r: r.status == 403 and refused.append(r.url))
            expect(page.locator("#overview")).to_be_visible()
            page.click("#view-contracts")
            expect(page.locator("#contracts-operator")).to_be_visible()
            expect(page.locator("#contracts-error")).to_contain_text("needs an operator token")
            page.evaluate(f"location.hash = '#contract/{KIND}/{settled.vendor}'")
            expect(page.locator("#contract-operator")).to_be_visible()
            assert refused == [], refused
            # Given one, the page reads the contract.
            page.fill("#contract-operator-token", OPERATOR_TOKEN)
            page.click("#contract-operator button[type=submit]")
            expect(page.locator("#contract-operator")).to_be_hidden()
            expect(page.locator("#contract-versions tbody tr[data-version]")).to_have_count(2)
        finally:
            browser.close()


@pytest.mark.regression
def test_without_a_closed_period_the_page_says_so_and_takes_document_ids(
    stack: Stack, settled: Settled
) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert not [
        p
        for p in stack.viewer().bearer("GET", "/v1/periods").json()["items"]
        if p["status"] == "closed"
    ]
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = _as_operator(browser, stack)
            _contract_page(page, settled.vendor)
            note = page.locator("#cp-select-note")
            expect(note).to_contain_text("No period is closed yet")
            expect(page.locator("#cp-select")).to_have_value("")
            page.select_option("#cp-by", "document_ids")
            page.fill("#cp-select", " ".join(settled.documents))
            page.fill("#cp-body", json.dumps(PASTED))
            page.click("#cp-run")
            expect(page.locator("#cp-result")).to_be_visible()
            expect(page.locator("#cp-largest tbody tr[data-document]")).to_have_count(2)
            expect(
                page.locator('#cp-changes tr[data-change="posted→disputed"] td').nth(1)
            ).to_have_text("1")
        finally:
            browser.close()


@pytest.mark.regression
def test_a_pasted_body_is_previewed_over_the_last_closed_period(
    stack: Stack, settled: Settled, closed: str
) -> None:
    from playwright.sync_api import expect, sync_playwright

    vendor = settled.vendor
    newest = stack.operator().bearer("GET", f"/v1/contracts/{KIND}/{vendor}/2").json()["body"]
    answered = stack.operator().bearer(
        "POST",
        f"/v1/contracts/{KIND}/{vendor}/preview",
        {"contract": PASTED, "select": {"period": closed}},
    )
    assert answered.status_code == 200, answered.text
    expected: dict[str, Any] = answered.json()
    total = expected["totals"][vendor]
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = _as_operator(browser, stack)
            _contract_page(page, vendor)
            expect(page.locator("#contract-name")).to_have_text(f"{KIND} / {vendor}")
            versions = page.locator("#contract-versions tbody tr[data-version]")
            expect(versions).to_have_count(2)
            expect(versions.first).to_have_attribute("data-version", "2")
            expect(versions.first.locator("code.sha256")).to_have_text(
                re.compile(r"^[0-9a-f]{64}$")
            )
            # The last closed period chosen (drawn last), the newest body shown
            # and pre-filled.
            expect(page.locator("#cp-select")).to_have_value(closed)
            expect(page.locator("#cp-by")).to_have_value("period")
            assert json.loads(page.locator("#contract-body").inner_text()) == newest
            assert json.loads(page.locator("#cp-body").input_value()) == newest
            expect(page.locator("#cp-select-note")).to_contain_text("last closed period")
            expect(page.locator("#contract-preview")).to_contain_text("publishes nothing")

            page.fill("#cp-body", json.dumps(PASTED, indent=1))
            page.click("#cp-run")
            expect(page.locator("#cp-result")).to_be_visible()
            expect(page.locator("#cp-digest")).to_have_text(expected["digest"])
            row = page.locator(f'#cp-totals tbody tr[data-partition="{vendor}"]')
            expect(row.locator("td.documents")).to_have_text("2")
            expect(row.locator("td.now")).to_have_text(grouped(total["amount_now"]))
            expect(row.locator("td.preview")).to_have_text(grouped(total["amount_preview"]))
            expect(row.locator("td.delta")).to_have_text(grouped(total["delta"]))
            expect(row.locator("td.currency")).to_have_text(expected["currency"])
            assert total["changes"] == {"posted→disputed": 1, "disputed→posted": 1}
            for change in total["changes"]:
                cells = page.locator(f'#cp-changes tr[data-change="{change}"] td')
                expect(cells.nth(1)).to_have_text("1")
            outcomes = expected["outcomes"]
            expect(page.locator('#cp-outcomes [data-figure="delta"] .value')).to_have_text(
                grouped(outcomes["delta"])
            )
            largest = page.locator("#cp-largest tbody tr[data-document]")
            expect(largest).to_have_count(2)
            # The largest |delta| first, each as the API answered it.
            by_size = sorted(expected["documents"], key=lambda d: -abs(Decimal(d["delta"])))
            for i, document in enumerate(by_size):
                expect(largest.nth(i)).to_have_attribute("data-document", document["document_id"])
                expect(largest.nth(i).locator("td.delta")).to_have_text(grouped(document["delta"]))
            expect(page.locator("#cp-not-stored")).to_have_attribute("data-count", "0")
            expect(page.locator("#cp-done")).to_contain_text("nothing was published")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=ARTIFACTS / "dashboard-contract-preview.png", full_page=True)

            # A body that cannot price is refused as a publication would refuse it.
            page.fill("#cp-body", json.dumps(NEGATIVE))
            page.click("#cp-run")
            error = page.locator("#cp-error")
            expect(error).to_have_attribute("data-code", "contract_invalid")
            expect(error).to_contain_text("contract_invalid")
            expect(error).to_contain_text("tier_rates")
            expect(page.locator("#cp-result")).to_be_hidden()
            # Text that is no JSON is never sent.
            page.fill("#cp-body", "{tier_rates: 1")
            page.click("#cp-run")
            expect(error).to_have_attribute("data-code", "not_json")
        finally:
            browser.close()
    assert _versions(stack, vendor) == [1, 2]  # a preview publishes nothing


@pytest.mark.regression
def test_the_largest_changes_are_ranked_by_delta_exactly(stack: Stack) -> None:
    """|delta| compared as whole numbers of the finest places, never floats: two
    deltas a double cannot tell apart are ranked; a negative delta ranks by its
    size; a document whose outcome alone changes is listed, an unchanged one not."""
    from playwright.sync_api import sync_playwright

    documents = [
        {"document_id": "same", "delta": "0.0000", "changes": {}},
        {"document_id": "outcome", "delta": "0.0000", "changes": {"posted→disputed": 1}},
        {"document_id": "small-b", "delta": "3.00", "changes": {}},
        {"document_id": "small-a", "delta": "3.0000", "changes": {}},
        {"document_id": "pos", "delta": "12.5000", "changes": {}},
        {"document_id": "neg", "delta": "-12.5000", "changes": {}},
        {"document_id": "huge-2", "delta": "99999999999999999.9998", "changes": {}},
        {"document_id": "huge-1", "delta": "99999999999999999.9999", "changes": {}},
    ]
    script = "async ([d, n]) => (await import('/dashboard/assets/contracts.js')).largest(d, n)"
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1200)
            ranked = page.evaluate(script, [documents, 20])
            order = [d["document_id"] for d in ranked["documents"]]
            assert order == ["huge-1", "huge-2", "neg", "pos", "small-a", "small-b", "outcome"]
            assert ranked["changed"] == 7
            cut = page.evaluate(script, [documents, 3])
            assert [d["document_id"] for d in cut["documents"]] == order[:3]
        finally:
            browser.close()
