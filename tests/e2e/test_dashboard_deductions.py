"""The Deductions view and a remittance's page, in a real headless Chromium
(docs/api.md#remittances-and-deductions): a settled claim, then a remittance
that short-pays it with one deduction matched to it by reference and one
disputed (a shortage). The view shows the aging per partner with its totals,
the open amount by reason and the open list; the remittance's page its balance
check, lines and deductions; an operator accepts the disputed one with a note,
and it leaves the open list, written off. The decision runs last: it changes
what is open."""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pytest

from shared.domain.kinds import DEDUCTION_KIND
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_dashboard_edges import _as_operator, _browser, _submit
from tests.e2e.test_observability import CONTRACT, signed_in
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
MONEY = re.compile(r"^-?\d{1,3}(,\d{3})*\.\d\d$")
BUCKETS = ("0-30", "31-60", "61-90", "90+")
NOTE = "short-shipped, per the carrier's proof of delivery"
AGE = 40  # days since the deduction: in the 31-60 bucket, past its 30-day window


@dataclass(frozen=True)
class Remitted:
    vendor: str
    document_id: str  # settled at 100.00; 60.00 of it matched by the remittance
    remittance_id: str
    trace: str
    matched: int  # the deduction matched by reference (60.00, promotion)
    disputed: int  # the one disputed (15.00, shortage): waiting for a decision


def grouped(amount: str) -> str:
    """An amount as a person reads it: at its places, thousands grouped."""
    places = len(amount.partition(".")[2])
    return f"{Decimal(amount):,.{places}f}"


@pytest.fixture(scope="module")
def remitted(stack: Stack) -> Remitted:
    vendor = uid("DED-")
    put = stack.operator().bearer("PUT", f"/v1/contracts/{DEDUCTION_KIND}/{vendor}/1", CONTRACT)
    assert put.status_code == 201, put.text
    doc = promo_doc(vendor, [promo_line(1, "800", "100.00")])  # T1 at 0.125: 100.00 posted
    job = _submit(stack, {"kind": DEDUCTION_KIND, "documents": [doc]})
    assert job["outcomes"]["posted"] == 1, job
    trace = uid("TRN-")
    paid_on = (dt.datetime.now(dt.UTC).date() - dt.timedelta(days=AGE)).isoformat()
    body = {
        "partition_key": vendor,
        "trace": trace,
        "paid_total": "25.00",  # the line's 100.00 less 75.00 taken off: it balances
        "currency": "USD",
        "paid_at": paid_on,
        "lines": [{"reference": doc["document_id"], "paid": "100.00"}],
        "adjustments": [
            {"amount": "-60.00", "reason_code": "02", "reference": doc["document_id"]},
            {"amount": "-15.00", "reason_code": "59"},
        ],
    }
    answer = stack.producer().signed_json("POST", "/v1/remittances", body)
    assert answer.status_code == 201, answer.text
    [got] = answer.json()["remittances"]
    assert (got["matched"], got["disputed"]) == ("60.00", "15.00"), got
    shown = _read(stack, f"/v1/remittances/{got['id']}")
    by_status = {d["status"]: d["id"] for d in shown["deductions"]}
    assert set(by_status) == {"matched", "disputed"}, shown["deductions"]
    return Remitted(
        vendor, doc["document_id"], got["id"], trace, by_status["matched"], by_status["disputed"]
    )


def _read(stack: Stack, path: str) -> dict[str, Any]:
    response = stack.viewer().bearer("GET", path)
    assert response.status_code == 200, response.text
    found: dict[str, Any] = response.json()
    return found


def _shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=ARTIFACTS / name, full_page=True)


@pytest.mark.regression
def test_the_deductions_view_shows_the_aging_by_reason_and_the_open_list(
    stack: Stack, remitted: Remitted
) -> None:
    from playwright.sync_api import expect, sync_playwright

    aging = _read(stack, "/v1/deductions/aging")
    [partition] = [p for p in aging["partitions"] if p["partition_key"] == remitted.vendor]
    assert (partition["open_count"], partition["open_amount"]) == (1, "15.00"), partition
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            asked: list[str] = []
            page.on("request", lambda request: asked.append(request.url))
            page.click("#view-deductions")
            expect(page.locator("#deductions-page")).to_be_visible()
            expect(page.locator("#overview")).to_be_hidden()

            # The aging per partner: its open amount in the buckets, past its window.
            row = page.locator(f'#ded-aging tbody tr[data-partition="{remitted.vendor}"]')
            expect(row.locator("td.open-count")).to_have_text("1")
            expect(row.locator("td.open-amount")).to_have_text("15.00")
            buckets = row.locator("td.bucket")
            for n, bucket in enumerate(BUCKETS):
                expect(buckets.nth(n)).to_have_text(grouped(partition["buckets"][bucket]))
            assert partition["buckets"]["31-60"] == "15.00", partition
            expect(row.locator("td.past-window")).to_have_text(grouped(partition["past_window"]))
            whole = Decimal(partition["days_outstanding"]).to_integral_value(ROUND_HALF_UP)
            expect(row.locator("td.days")).to_have_text(f"{whole} d")
            # Its totals: the cards and the table's foot.
            totals = aging["totals"]
            open_amount = page.locator('#ded-cards [data-figure="open_amount"] .value')
            expect(open_amount).to_have_text(grouped(totals["open_amount"]))
            expect(open_amount).to_have_text(MONEY)
            foot = page.locator("#ded-aging tfoot tr")
            expect(foot.locator("td.open-amount")).to_have_text(grouped(totals["open_amount"]))
            # By reason class: the shortage is open, the promotion matched.
            reason = page.locator('#ded-reasons tbody tr[data-reason-class="shortage"]')
            expect(reason.locator("td.open-amount")).to_have_text("15.00")
            expect(page.locator('#ded-reasons tr[data-reason-class="promotion"]')).to_have_count(0)

            # The open list: the disputed deduction, not the matched one; no buttons
            # for a viewer, who is asked for an operator token to decide.
            listed = page.locator("#ded-table tbody tr[data-deduction-id]")
            mine = page.locator(f'#ded-table tr[data-deduction-id="{remitted.disputed}"]')
            expect(mine).to_have_attribute("data-status", "disputed")
            expect(mine.locator("td.amount")).to_have_text("15.00")
            expect(mine.locator("td.reason")).to_have_text("shortage (59)")
            expect(listed).to_have_count(1)
            expect(page.locator("#ded-table th.decide")).to_be_hidden()
            expect(page.locator("#ded-operator")).to_be_visible()
            _shot(page, "deductions-view.png")
            # The matched one, with the status filter.
            page.select_option("#ded-status", "matched")
            page.click("#ded-filters button[type=submit]")
            matched = page.locator(f'#ded-table tr[data-deduction-id="{remitted.matched}"]')
            expect(matched).to_have_attribute("data-status", "matched")
            expect(matched.locator("ul.matches")).to_contain_text(remitted.document_id)
            expect(matched.locator("ul.matches")).to_contain_text("60.00")

            # The recent remittances, linked to their pages.
            rem = page.locator(f'#rem-table tr[data-remittance-id="{remitted.remittance_id}"]')
            expect(rem).to_contain_text(remitted.trace)
            expect(rem).to_contain_text("balances")
            sizes = page.evaluate("[document.documentElement.scrollWidth, innerWidth]")
            assert sizes[0] <= sizes[1], sizes  # nothing wider than the window
            # At 1,400 px the list fits its box: no column out of sight.
            fits = page.evaluate(
                """() => { const box = document.getElementById("ded-table").parentElement;
                           return box.scrollWidth <= box.clientWidth; }"""
            )
            assert fits
            expect(page.locator("#ded-scroll-hint")).to_be_hidden()
            rem.locator("a").click()
            expect(page.locator("#remittance-page")).to_be_visible()
            expect(page.locator("#rem-id")).to_have_text(remitted.trace)
            expect(page.locator("#rem-operator")).to_be_visible()
            # A viewer's pages ask no operator endpoint (a 403 in the console).
            assert not [url for url in asked if "/admin/" in url], asked
        finally:
            browser.close()


@pytest.mark.regression
def test_an_operator_accepts_the_disputed_deduction_on_the_remittance_page(
    stack: Stack, remitted: Remitted
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = _as_operator(browser, stack)
            expect(page.locator("#overview")).to_be_visible()
            page.evaluate(f"location.hash = '#remittance/{remitted.remittance_id}'")
            expect(page.locator("#rem-id")).to_have_text(remitted.trace)
            # The balance check, its figures, its line and both deductions.
            expect(page.locator("#rem-balance")).to_have_attribute("data-balanced", "true")
            paid = page.locator('#rem-facts [data-figure="paid_total"] .value')
            expect(paid).to_have_text("25.00 USD")
            expect(page.locator('#rem-facts [data-figure="matched"] .value')).to_have_text("60.00")
            expect(page.locator("#rem-lines tbody tr")).to_contain_text(remitted.document_id)
            expect(page.locator("#rem-adjustments tbody tr")).to_have_count(2)
            matched = page.locator(f'#rem-deductions tr[data-deduction-id="{remitted.matched}"]')
            expect(matched).to_have_attribute("data-status", "matched")
            expect(matched.locator("ul.matches")).to_contain_text("deducted 60.00")
            expect(matched.locator("button")).to_have_count(0)
            row = page.locator(f'#rem-deductions tr[data-deduction-id="{remitted.disputed}"]')
            expect(row).to_have_attribute("data-status", "disputed")
            expect(row.locator("td.due")).to_have_class(re.compile(r"\berror\b"))  # past window

            # A decision without a note is not sent.
            row.locator("button.accept").click()
            expect(page.locator("#rem-error")).to_contain_text("needs a note")
            dialogs: list[str] = []

            def confirm(dialog: Any) -> None:
                dialogs.append(dialog.message)
                dialog.accept()

            page.on("dialog", confirm)
            row.locator("input.note").fill(NOTE)
            row.locator("button.accept").click()
            expect(page.locator("#rem-done")).to_contain_text(f"deduction {remitted.disputed}")
            expect(row).to_have_attribute("data-status", "written_off")
            expect(row.locator("td .decision")).to_contain_text(NOTE)
            assert dialogs and "write off 15.00" in dialogs[0], dialogs
            _shot(page, "remittance-page.png")

            decided = _read(stack, f"/v1/deductions/{remitted.disputed}")
            assert (decided["status"], decided["decision"]) == ("written_off", "accept"), decided
            assert decided["decision_note"] == NOTE

            # It has left the open list and the aging.
            page.click("#remittance-page a[href='#deductions']")
            expect(page.locator("#deductions-page")).to_be_visible()
            expect(page.locator("#ded-table tbody")).to_contain_text("no deduction matches")
            expect(
                page.locator(f'#ded-table tr[data-deduction-id="{remitted.disputed}"]')
            ).to_have_count(0)
            expect(
                page.locator(f'#ded-aging tbody tr[data-partition="{remitted.vendor}"]')
            ).to_have_count(0)
        finally:
            browser.close()
