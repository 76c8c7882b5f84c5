"""Finance's report on the dashboard, in a real headless Chromium
(docs/api.md#periods-and-the-close): the open period, balances per partition
for a chosen period (filtered by kind and partition), recipe costs never added
up as money, and an operator's close through its confirmation. The close runs
last: it changes the open period."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from shared.domain.synthetic import GENERATORS
from tests.e2e.conftest import ARTIFACTS
from tests.e2e.test_dashboard_edges import _as_operator, _browser, _submit
from tests.e2e.test_observability import CONTRACT, signed_in
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e
MONEY = re.compile(r"^-?\d{1,3}(,\d{3})*\.\d\d$")
UNIT_COST = re.compile(r"^-?\d{1,3}(,\d{3})*\.\d{4}$")


@dataclass(frozen=True)
class Booked:
    period: str  # the open period, where everything below is booked
    vendor: str  # 1,800.00 and 1.00 posted, one dispute open (claimed 5.00, model 0.25)
    other: str  # 1.00 posted, one line dead-lettered


def grouped(amount: str) -> str:
    """An amount as a person reads it: at its places, thousands grouped."""
    places = len(amount.partition(".")[2])
    return f"{Decimal(amount):,.{places}f}"


@pytest.fixture(scope="module")
def booked(stack: Stack) -> Booked:
    vendor, other = uid("FIN-A-"), uid("FIN-B-")
    operator = stack.operator()
    for partition in (vendor, other):
        put = operator.bearer("PUT", f"/v1/contracts/promo_accrual/{partition}/1", CONTRACT)
        assert put.status_code == 201, put.text
    documents = [
        promo_doc(
            vendor,
            [
                promo_line(1, "4000", "1800.00", tier="T2"),
                promo_line(2, "8", "1.00"),
                promo_line(3, "2", "5.00"),  # model 0.25: disputed
            ],
        ),
        promo_doc(other, [promo_line(1, "8", "1.00"), promo_line(2, "4", "0.50", tier="T9")]),
    ]
    _submit(stack, {"kind": "promo_accrual", "documents": documents})
    make_batch, make_contract = GENERATORS["recipe_cost"]
    batch = make_batch(8, seed=42)
    for partition in sorted({d["partition_key"] for d in batch["documents"]}):
        path = f"/v1/contracts/recipe_cost/{partition}/1"
        assert operator.bearer("PUT", path, make_contract()).status_code in (200, 201)
    _submit(stack, batch)
    [period] = [p for p in _periods(stack) if p["status"] == "open"]
    return Booked(period["name"], vendor, other)


def _periods(stack: Stack) -> list[dict[str, Any]]:
    response = stack.viewer().bearer("GET", "/v1/periods")
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["items"]
    return items


def _balance(stack: Stack, period: str, partition: str) -> dict[str, Any]:
    path = f"/v1/balances?period={period}&partition_key={partition}"
    [item] = stack.viewer().bearer("GET", path).json()["items"]
    return dict(item)


def _cells(row: Any) -> dict[str, str]:
    names = ("opening", "posted", "disputed", "repriced", "resolved", "closing", "variance")
    return {name: row.locator(f"td.{name}").inner_text() for name in names}


def _expected(item: dict[str, Any]) -> dict[str, str]:
    names = ("opening", "posted", "disputed", "repriced", "resolved", "closing")
    shown = {name: grouped(item[name]) for name in names}
    return {**shown, "variance": grouped(item["in_dispute"]["variance"])}


@pytest.mark.regression
def test_the_finance_view_shows_the_open_period_and_balances_per_partition(
    stack: Stack, booked: Booked
) -> None:
    from playwright.sync_api import expect, sync_playwright

    [period] = [p for p in _periods(stack) if p["name"] == booked.period]
    [posted] = [
        t for t in period["totals"] if (t["kind"], t["outcome"]) == ("promo_accrual", "posted")
    ]
    balance = _balance(stack, booked.period, booked.vendor)
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            card = page.locator(f'#period-open article[data-period="{booked.period}"]')
            expect(card).to_have_attribute("data-status", "open")
            expect(card.locator("h3")).to_have_text(f"Open: {booked.period}")
            totals = card.locator('tr[data-kind="promo_accrual"][data-outcome="posted"] td')
            expect(totals.nth(3)).to_have_text(grouped(posted["delta"]))
            expect(totals.nth(3)).to_have_text(MONEY)
            expect(page.locator("#bal-period")).to_have_value(booked.period)

            # One kind, then a partition (any case, any part of its key).
            page.select_option("#bal-kind", "promo_accrual")
            rows = page.locator("#balances-table tbody tr[data-partition]")
            expect(rows).to_have_count(2)
            for i in range(2):
                expect(rows.nth(i)).to_have_attribute("data-kind", "promo_accrual")
            page.fill("#bal-partition", booked.vendor.lower()[:-4])
            expect(rows).to_have_count(1)
            row = rows.first
            expect(row).to_have_attribute("data-partition", booked.vendor)
            expect(row.locator("td.closing")).to_have_text(MONEY)
            assert _cells(row) == _expected(balance)
            assert balance["posted"] == "1801.00"  # shown "1,801.00"
            expect(row.locator("td.in-dispute")).to_have_text("1")
            # Who owes a positive closing balance: the kind's direction says.
            owes = "owes us" if balance["direction"] == "owed_to_us" else "we owe"
            expect(row.locator("td").nth(2)).to_have_text(owes)
            expect(page.locator("#balances-note")).to_contain_text("open")
        finally:
            browser.close()


@pytest.mark.regression
def test_recipe_costs_are_shown_as_unit_costs_never_summed_as_money(
    stack: Stack, booked: Booked
) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            expect(page.locator("#bal-period")).to_have_value(booked.period)
            rows = page.locator("#balances-table tbody tr[data-partition]")
            costs = page.locator('#balances-table tbody tr[data-kind="recipe_cost"]')
            expect(costs.first).to_be_visible()
            # Every kind shown: a money total for promo_accrual, none for recipe costs.
            footer = page.locator("#balances-table tfoot tr")
            expect(footer).to_have_count(1)
            expect(footer.first).to_have_attribute("data-kind", "promo_accrual")
            expect(page.locator("#balances-apart")).to_contain_text("recipe_cost")
            expect(page.locator("#balances-apart")).to_contain_text("not added up")

            page.select_option("#bal-kind", "recipe_cost")
            expect(rows.first).to_have_attribute("data-kind", "recipe_cost")
            expect(
                page.locator('#balances-table tbody tr[data-kind="promo_accrual"]')
            ).to_have_count(0)
            first = costs.first
            expect(first).to_have_class(re.compile(r"\bunit-costs\b"))
            expect(first.locator("td").first).to_contain_text("unit costs, not money")
            expect(first.locator("td").nth(2)).to_have_text("unit cost")
            expect(first.locator("td.closing")).to_have_text(UNIT_COST)
            expect(footer).to_have_count(0)
            # The period's totals name them as costs too.
            total = page.locator('#period-open tr[data-kind="recipe_cost"]').first
            expect(total).to_contain_text("unit costs, not money")
        finally:
            browser.close()


@pytest.mark.regression
def test_a_viewer_sees_no_close_button(stack: Stack, booked: Booked) -> None:
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            expect(
                page.locator(f'#period-open article[data-period="{booked.period}"]')
            ).to_be_visible()
            expect(page.locator("#close-period")).to_be_hidden()
            expect(page.locator("#close-dialog")).to_be_hidden()
        finally:
            browser.close()


@pytest.mark.regression
def test_a_viewers_page_asks_no_operator_endpoint(stack: Stack, booked: Booked) -> None:
    """Issue 52 item 11: a viewer's page probed /admin/audit to learn whether it
    may act (and listed dead letters at /admin/dead-letters): each 403 is an
    error in the browser's console. It asks /v1/dashboard/role instead."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, 1400)
            asked: list[str] = []
            refused: list[str] = []
            console: list[str] = []
            page.on("request", lambda request: asked.append(request.url))
            page.on("response", lambda r: r.status == 403 and refused.append(r.url))
            page.on("console", lambda m: m.type == "error" and console.append(m.text))
            # Finance first (the sign-in's view), then the dispute queue and a
            # reason's dead letters: each decides whether to show an operator's
            # buttons, and says it is done by asking for an operator token.
            card = page.locator(f'#period-open article[data-period="{booked.period}"]')
            expect(card).to_be_visible()
            page.evaluate("location.hash = '#disputes'")
            expect(page.locator("#dq-operator")).to_be_visible()
            page.evaluate("location.hash = '#dead-letters/unknown_promo_tier'")
            expect(page.locator("#operator-form")).to_be_visible()
            expect(page.locator("#letters-error")).to_contain_text("needs an operator token")
            page.evaluate("location.hash = ''")
            expect(page.locator("#close-period")).to_be_hidden()
            admin = [url for url in asked if "/admin/" in url]
            assert admin == [] and refused == [], (admin, refused)
            assert not [text for text in console if "403" in text], console
        finally:
            browser.close()


@pytest.mark.regression
@pytest.mark.parametrize("width", [1400, 800])
def test_the_balances_table_says_when_columns_are_out_of_sight(
    stack: Stack, booked: Booked, width: int
) -> None:
    """Issue 52 item 11: at 800 px the Balances table's last columns were out of
    its box, with nothing to say so (a hidden overlay scrollbar)."""
    from playwright.sync_api import expect, sync_playwright

    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = signed_in(browser, stack, width)
            expect(page.locator("#balances-table tbody tr[data-partition]").first).to_be_visible()
            box = page.locator("#balances-table").locator("xpath=..")
            hint = page.locator("#balances-scroll-hint")
            sizes = page.evaluate(
                """() => {
                  const box = document.getElementById("balances-table").parentElement;
                  return { scroll: box.scrollWidth, client: box.clientWidth,
                           overflow: getComputedStyle(box).overflowX,
                           page: document.documentElement.scrollWidth, view: innerWidth };
                }"""
            )
            assert sizes["page"] <= sizes["view"], sizes  # it scrolls in its box, not the page
            if width < 1000:
                assert sizes["scroll"] > sizes["client"], sizes  # columns out of sight here
            if sizes["scroll"] > sizes["client"]:
                assert sizes["overflow"] in ("auto", "scroll"), sizes
                expect(box).to_have_class(re.compile(r"\boverflowing\b"))
                expect(hint).to_be_visible()
                expect(hint).to_contain_text("scroll the table sideways")
            else:
                expect(hint).to_be_hidden()
        finally:
            browser.close()


@pytest.mark.regression
def test_an_operator_closes_the_period_through_its_confirmation(
    stack: Stack, booked: Booked, tmp_path: Path
) -> None:
    from playwright.sync_api import expect, sync_playwright

    [period] = [p for p in _periods(stack) if p["name"] == booked.period]
    summary = stack.viewer().bearer("GET", "/v1/dashboard/summary").json()
    waiting = sum(d["count"] for d in summary["dead_letters"] if d["status"] == "dead")
    assert waiting >= 1  # the other vendor's line, at least
    next_name = uid("P-")
    with sync_playwright() as p:
        browser = _browser(p)
        try:
            page = _as_operator(browser, stack)
            button = page.locator("#close-period")
            expect(button).to_be_visible()
            button.click()
            dialog = page.locator("#close-dialog")
            expect(dialog).to_be_visible()
            expect(page.locator("#close-name")).to_have_text(booked.period)
            # It states the totals per kind and outcome ...
            for total in period["totals"]:
                selector = f'tr[data-kind="{total["kind"]}"][data-outcome="{total["outcome"]}"]'
                cells = dialog.locator(f"{selector} td")
                expect(cells.nth(2)).to_have_text(str(total["rows"]))
                expect(cells.nth(3)).to_have_text(grouped(total["delta"]))
            # ... the disputes carried over, and the dead letters waiting.
            carried = dialog.locator('ul.carried li[data-kind="promo_accrual"]')
            expect(carried).to_contain_text("1 open dispute,")
            expect(carried).to_contain_text("4.75")
            expect(dialog.locator(".letters")).to_contain_text(f"{waiting} dead letter")
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=ARTIFACTS / "dashboard-close.png")

            # A name already used is refused, and the refusal says so.
            page.fill("#close-next", booked.period)
            page.click("#close-confirm")
            expect(page.locator("#close-error")).to_contain_text("period_name_used")
            expect(dialog).to_be_visible()

            page.fill("#close-next", next_name)
            page.fill("#close-note", "month end, from the dashboard")
            page.click("#close-confirm")
            expect(dialog).to_be_hidden()
            expect(page.locator("#periods-done")).to_contain_text(f"Closed {booked.period}")

            [closed] = [p for p in _periods(stack) if p["name"] == booked.period]
            assert closed["status"] == "closed" and closed["next"] == next_name
            assert closed["note"] == "month end, from the dashboard"
            card = page.locator(f'#period-closed article[data-period="{booked.period}"]')
            expect(card.locator("code.sha256")).to_have_text(closed["journal_sha256"])
            expect(card).to_contain_text("4.75")  # the disputes it carried over
            opened = page.locator(f'#period-open article[data-period="{next_name}"]')
            expect(opened).to_have_attribute("data-status", "open")

            # The closed period's balances, final now.
            expect(page.locator("#bal-period")).to_have_value(booked.period)
            expect(page.locator("#balances-note")).to_contain_text("closed")
            page.fill("#bal-partition", booked.vendor)
            row = page.locator(f'#balances-table tbody tr[data-partition="{booked.vendor}"]')
            expect(row).to_have_count(1)
            assert _cells(row) == _expected(_balance(stack, booked.period, booked.vendor))
            page.fill("#bal-partition", "")
            page.screenshot(path=ARTIFACTS / "dashboard-periods.png", full_page=True)

            # Its journal, fetched with the token: the bytes its SHA-256 names.
            with page.expect_download() as download:
                card.locator("button.journal").click()
            saved = tmp_path / "journal.csv"
            download.value.save_as(saved)
            assert hashlib.sha256(saved.read_bytes()).hexdigest() == closed["journal_sha256"]
            assert download.value.suggested_filename == f"journal-{booked.period}.csv"
        finally:
            browser.close()
