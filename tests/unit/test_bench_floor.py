"""bench.floor settles and keys the bench's promo lines as settleq does: its
lines/s is a floor for the same work, not for something easier."""

from __future__ import annotations

from decimal import Decimal

from bench.floor import settle
from shared.domain.keys import promo_key, promo_line_item_hash
from tests.support.workload import generate


def test_the_floor_settles_and_keys_every_line_as_the_expectation_and_settleq_do() -> None:
    data = generate(2000, 5)
    posted = disputed = 0
    amount_posted = Decimal(0)
    fresh = {d["document_id"] for d in data.documents} - {d["document_id"] for d in data.earlier}
    for document in data.documents:
        for line in document["lines"]:
            key, outcome, amount = settle(document["partition_key"], document, line)
            item = promo_line_item_hash(line["line_no"], line["sku"], None, None)
            assert key == promo_key(
                document["partition_key"],
                document["document_id"],
                item,
                line["promo_tier"],
                document["period"],
            )
            if document["document_id"] in fresh:
                posted += outcome == "posted"
                disputed += outcome == "disputed"
                amount_posted += Decimal(amount) if outcome == "posted" else 0
    assert (posted, disputed, amount_posted) == (
        data.expect.posted,
        data.expect.disputed,
        data.expect.amount_posted,
    )
