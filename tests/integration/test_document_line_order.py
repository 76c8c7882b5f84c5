"""A document's lines are listed in line order (issue 42, item 16): search
listed them in row order, the ledger's rows first and the lines it did not
take after, so line 2 (dead-lettered) came after line 12, and line 10 could
come before line 2. On both ledgers, paged or not."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine

from shared.adapters.db.ledger.read import history
from tests.support.disputes import new_vendor, settle
from tests.support.factories import promo_doc, promo_line

pytestmark = pytest.mark.both_backends


@pytest.mark.regression
def test_a_documents_lines_come_in_line_order_paged_or_not(engine: Engine) -> None:
    vendor = new_vendor(engine)
    lines = [
        promo_line(n, "8", "1.00", tier="T9" if n == 2 else "T1")  # line 2: dead-lettered
        for n in range(1, 13)
    ]
    doc = promo_doc(vendor, list(reversed(lines)))  # sent last line first
    settle(engine, [doc])
    found = history.document_lines(engine, doc["document_id"], limit=100)
    assert [r.line_ref for r in found] == [str(n) for n in range(1, 13)]
    assert [r.outcome for r in found if r.line_ref == "2"] == ["dead_lettered"]
    paged, after = [], None
    while True:
        page = history.document_lines(engine, doc["document_id"], after=after, limit=5)
        paged += page
        if len(page) < 5:
            break
        after = page[-1].cursor
    assert paged == found
