"""The dashboard's edges in a real headless Chromium (issue 42, item 16): a
malformed link, select-all's reach, the recent-jobs table at narrow widths,
what the money cards hold, a resolution's decision on the dispute and identity
pages, and a document's lines in line order."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.test_observability import CHROMIUM_FLAGS, chromium, signed_in
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e


def _browser(p: Any) -> Any:
    return p.chromium.launch(executable_path=chromium(), args=CHROMIUM_FLAGS)


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
