"""The dashboard's edges in a real headless Chromium (issue 42, item 16): a
malformed link, select-all's reach, the recent-jobs table at narrow widths,
what the money cards hold, a resolution's decision on the dispute and identity
pages, and a document's lines in line order."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pytest

from shared.domain.synthetic import GENERATORS
from tests.e2e.test_observability import CHROMIUM_FLAGS, CONTRACT, chromium, signed_in
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import OPERATOR_TOKEN
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
NOTE = "contract rate applies [see the vendor's email]"


@dataclass(frozen=True)
class Edges:
    vendor: str
    document_id: str  # 12 lines: line 2 dead-lettered, line 5 disputed then resolved
    dispute: dict[str, Any]  # line 5's, resolved by an operator with NOTE
    open_disputes: int  # the vendor's, still open


def _submit(stack: Stack, body: dict[str, Any]) -> dict[str, Any]:
    producer = stack.producer()
    response = producer.submit(json.dumps(body).encode())
    assert response.status_code == 202, response.text
    job = producer.wait(response.json()["job_id"], timeout=90)
    assert job["state"] == "completed", stack.log("compute_heavy")
    return job


@pytest.fixture(scope="module")
def edges(stack: Stack) -> Edges:
    vendor = uid("EDGE-")
    operator = stack.operator()
    put = operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
    assert put.status_code == 201, put.text
    lines = []
    for n in range(1, 13):
        if n == 2:
            lines.append(promo_line(n, "4", "0.50", tier="T9"))  # unknown tier: dead letter
        elif n == 5:
            lines.append(promo_line(n, "2", "5.00"))  # claimed 5.00, model 0.25: disputed
        else:
            lines.append(promo_line(n, "8", "1.00"))  # posted
    ordered = promo_doc(vendor, lines)
    others = [promo_doc(vendor, [promo_line(1, "2", "5.00")]) for _ in range(3)]
    _submit(stack, {"kind": "promo_accrual", "documents": [ordered, *others]})
    # A recipe's costs settled in the range too: unit costs, not money totals.
    make_batch, make_contract = GENERATORS["recipe_cost"]
    batch = make_batch(8, seed=42)
    for partition in sorted({d["partition_key"] for d in batch["documents"]}):
        path = f"/v1/contracts/recipe_cost/{partition}/1"
        assert operator.bearer("PUT", path, make_contract()).status_code in (200, 201)
    _submit(stack, batch)

    viewer = stack.viewer()
    found = viewer.bearer("GET", f"/v1/disputes?partition_key={vendor}").json()["items"]
    [dispute] = [d for d in found if d["document_id"] == ordered["document_id"]]
    decided = operator.bearer(
        "POST",
        f"/admin/disputes/{dispute['id']}/resolve",
        {"decision": "accept_model", "note": NOTE},
    )
    assert decided.status_code in (200, 201), decided.text
    return Edges(vendor, ordered["document_id"], dispute, len(found) - 1)


def _browser(p: Any) -> Any:
    return p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)


def _as_operator(browser: Any, stack: Stack, width: int = 1400) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 1000})
    page.goto(f"{stack.url}/dashboard")
    page.fill("#token", OPERATOR_TOKEN)
    page.click("#sign-in button[type=submit]")
    return page


@pytest.mark.regression
def test_a_malformed_link_shows_a_not_found_view_not_the_previous_one(stack: Stack) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1200)
            errors: list[str] = []
            page.on("pageerror", lambda error: errors.append(str(error)))
            expect(page.locator("#overview")).to_be_visible()
            page.evaluate("location.hash = '#disputes'")
            expect(page.locator("#disputes-page")).to_be_visible()
            page.evaluate("location.hash = '#document/%E0%A4%A'")
            expect(page.locator("#not-found")).to_be_visible()
            expect(page.locator("#not-found")).to_contain_text("malformed")
            expect(page.locator("#not-found-link")).to_have_text("#document/%E0%A4%A")
            for view in ("#disputes-page", "#overview", "#document", "#job"):
                expect(page.locator(view)).to_be_hidden()
            assert errors == [], errors
            page.evaluate("location.hash = ''")  # back: the overview again
            expect(page.locator("#overview")).to_be_visible()
            expect(page.locator("#not-found")).to_be_hidden()
        finally:
            browser.close()


@pytest.mark.regression
def test_select_all_says_it_covers_this_page(stack: Stack, edges: Edges) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = _as_operator(browser, stack)
            page.goto(f"{stack.url}/dashboard#disputes")
            page.fill("#dq-partition", edges.vendor)
            page.click("#dq-filters button[type=submit]")
            rows = page.locator("#disputes-table tbody tr[data-dispute-id]")
            expect(rows).to_have_count(edges.open_disputes)
            label = f"all {edges.open_disputes} on this page"
            expect(page.locator("#dq-all-label")).to_have_text(label)
            expect(page.locator("#dq-all")).to_have_attribute("aria-label", f"select {label}")
        finally:
            browser.close()


@pytest.mark.regression
def test_a_resolution_shows_its_decision_note_and_decider(stack: Stack, edges: Edges) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            page.evaluate("location.hash = '#disputes'")
            page.select_option("#dq-status", "resolved")
            page.fill("#dq-partition", edges.vendor)
            page.click("#dq-filters button[type=submit]")
            resolved = page.locator(f'tr[data-dispute-id="{edges.dispute["id"]}"] .resolution')
            expect(resolved.locator(".decision")).to_have_text("accept_model at 0.25")
            expect(resolved.locator(".note")).to_have_text(NOTE)
            expect(resolved.locator(".decider")).to_contain_text("by ")

            page.evaluate(f"location.hash = '#identity/{edges.dispute['reconciliation_key']}'")
            row = page.locator('#identity-entries tr[data-outcome="resolved"] .resolution')
            expect(row.locator(".decision")).to_have_text("accept_model at 0.25")
            expect(row.locator(".note")).to_have_text(NOTE)
            expect(row.locator(".decider")).to_contain_text("by ")
        finally:
            browser.close()


@pytest.mark.regression
def test_money_cards_hold_money_totals_not_recipe_unit_costs(stack: Stack, edges: Edges) -> None:
    from playwright.sync_api import expect, sync_playwright

    summary = stack.viewer().bearer("GET", "/v1/dashboard/summary").json()
    assert {"promo_accrual", "recipe_cost"} <= {m["kind"] for m in summary["money"]}
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            cards = page.locator("#money-cards .card")
            expect(cards.filter(has_text="promo_accrual")).to_have_count(2)
            expect(page.locator('#money-cards .card[data-kind="recipe_cost"]')).to_have_count(0)
            expect(page.locator("#money-apart")).to_contain_text("recipe_cost")
            expect(page.locator("#money-apart")).to_contain_text("not money totals")
        finally:
            browser.close()


@pytest.mark.regression
@pytest.mark.parametrize("width", [1400, 800])
def test_the_recent_jobs_table_fits_or_scrolls_in_its_card(
    stack: Stack, edges: Edges, width: int
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, width)
            expect(page.locator("#jobs tbody tr[data-job-id]").first).to_be_visible()
            sizes = page.evaluate(
                """() => {
                  const box = document.getElementById("jobs").parentElement;
                  const table = document.getElementById("jobs").getBoundingClientRect();
                  return { page: document.documentElement.scrollWidth, view: innerWidth,
                           boxRight: box.getBoundingClientRect().right,
                           boxScroll: box.scrollWidth, boxClient: box.clientWidth,
                           overflow: getComputedStyle(box).overflowX, tableRight: table.right };
                }"""
            )
            # Nothing sticks out of the page; at 1,400 px the table is whole in
            # its card, narrower it scrolls there with a scrollbar one sees.
            assert sizes["page"] <= sizes["view"], sizes
            assert sizes["boxRight"] <= sizes["view"], sizes
            if width >= 1400:
                assert sizes["boxScroll"] <= sizes["boxClient"], sizes
                expect(page.locator("#jobs-scroll-hint")).to_be_hidden()
            else:
                # Headless Chromium hides scrollbars, as an overlay one is hidden:
                # the box is marked and the hint says to scroll.
                assert sizes["overflow"] in ("auto", "scroll"), sizes
                assert sizes["boxScroll"] > sizes["boxClient"], sizes
                expect(page.locator("#jobs").locator("xpath=..")).to_have_class(
                    re.compile(r"\boverflowing\b")
                )
                expect(page.locator("#jobs-scroll-hint")).to_be_visible()
        finally:
            browser.close()


@pytest.mark.regression
def test_a_documents_lines_are_listed_in_line_order(stack: Stack, edges: Edges) -> None:
    from playwright.sync_api import expect, sync_playwright

    api = stack.viewer().bearer("GET", f"/v1/lines?document_id={edges.document_id}").json()
    assert [line["line_ref"] for line in api["items"]] == [str(n) for n in range(1, 13)]
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            page.fill("#search-text", edges.document_id)
            page.click("#search button[type=submit]")
            rows = page.locator("#document-lines tbody tr")
            expect(rows).to_have_count(12)
            shown = [rows.nth(i).get_attribute("data-line") for i in range(12)]
            assert shown == [str(n) for n in range(1, 13)], shown
        finally:
            browser.close()
