"""Each identity's ledger rows form one chain
(docs/architecture.md#re-pricing-lineage-and-advisory-locks,
docs/architecture.md#reconciliation-keys, docs/architecture.md#ledger-schema), through the settle
stage on real Redis and each ledger backend.

For every identity: each row supersedes the one committed just before it, its
delta is its amount minus that row's, and so the deltas sum to its latest
amount; and no identity's chain ever crosses a partition.
"""

from __future__ import annotations

import threading
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import select

from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.errors import TransientError
from tests.support.booking_lock import BookingLock
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.ledger import ledger_rows

pytestmark = pytest.mark.both_backends

ledger = tables.ledger_entries
RATES = {1: "0.125", 2: "0.45", 3: "0.50"}  # T1 per contract version


def promo_vendor(ctx: WorkerContext, versions: tuple[int, ...] = (1, 2, 3)) -> str:
    vendor = uid("V-")
    for v in versions:
        body = {"tier_rates": {"T1": RATES[v]}, "tolerance": "100.00"}
        put_contract(ctx.engine, "promo_accrual", vendor, v, body)
    return vendor


def chain(ctx: WorkerContext, **where: str) -> list[Any]:
    with ctx.engine.connect() as conn:
        query = select(ledger).where(*(ledger.c[name] == value for name, value in where.items()))
        return list(conn.execute(query.order_by(ledger.c.id)).all())


def assert_chained(rows: list[Any]) -> None:
    previous = None
    for row in rows:
        assert row.supersedes_id == (previous.id if previous else None)
        assert row.delta == row.amount - (previous.amount if previous else 0)
        previous = row
    assert sum(r.delta for r in rows) == rows[-1].amount


def settle_all(ctx: WorkerContext, messages: list[dict]) -> None:
    for message in messages:
        assert settle_chunk(ctx, message, 1) is not None


@pytest.mark.regression
def test_a_key_of_another_vendor_never_supersedes_or_duplicates_a_vendors_row(ctx):
    """Issue 12 item 3: VENDOR-A sends VENDOR-B's document id, line, sku, tier and
    period at version 2. It gets a row of its own; B's v2 re-prices B's v1."""
    vendor_a, vendor_b = promo_vendor(ctx), promo_vendor(ctx)
    doc_id, line = uid("INV-"), promo_line(1, "8", "1.00")
    _, b1 = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor_b, [line], 1, doc_id)]
    )
    _, a2 = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor_a, [line], 2, doc_id)]
    )
    b2_job, b2 = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor_b, [line], 2, doc_id)]
    )
    settle_all(ctx, b1 + a2 + b2)
    [a_row] = chain(ctx, partition_key=vendor_a, document_id=doc_id)
    assert (a_row.amount, a_row.delta, a_row.supersedes_id) == (
        Decimal("3.60"),
        Decimal("3.60"),
        None,
    )
    b_rows = chain(ctx, partition_key=vendor_b, document_id=doc_id)
    assert [(r.contract_version, r.amount, r.delta) for r in b_rows] == [
        (1, Decimal("1.00"), Decimal("1.00")),
        (2, Decimal("3.60"), Decimal("2.60")),
    ]
    assert b_rows[1].supersedes_id == b_rows[0].id and b_rows[1].job_id == b2_job
    assert a_row.reconciliation_key != b_rows[0].reconciliation_key
    assert [r.outcome for r in ledger_rows(ctx.engine, b2_job)] == ["posted"]


@pytest.mark.regression
def test_three_versions_of_a_promo_document_in_one_chunk_chain_in_version_order(ctx):
    """Issue 12 item 6: v1, v2 and v3 of one document in one batch (out of order)."""
    vendor, doc_id = promo_vendor(ctx), uid("INV-")
    lines = [promo_line(1, "8", "1.00"), promo_line(2, "16", "2.00")]
    docs = [promo_doc(vendor, lines, v, doc_id) for v in (2, 1, 3)]
    _, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    assert len(messages) == 1
    settle_all(ctx, messages)
    for line_ref in ("1", "2"):
        rows = chain(ctx, partition_key=vendor, document_id=doc_id, line_ref=line_ref)
        assert [r.contract_version for r in rows] == [1, 2, 3]
        assert_chained(rows)
    # 16 units: 2.00, 7.20, 8.00.
    assert [r.delta for r in rows] == [Decimal("2.00"), Decimal("5.20"), Decimal("0.80")]


@pytest.mark.regression
@pytest.mark.parametrize("order", ["in_order", "reversed", "concurrent"])
def test_two_versions_in_two_chunks_of_one_batch_chain(ctx, order):
    """Issue 12 item 6, across chunks: v2 committed after v1 supersedes it and
    the deltas add up to the latest amount; v1 committed after v2 is late and
    writes nothing (issue 29 item 3, tests/integration/test_late_versions.py)."""
    vendor, doc_id = promo_vendor(ctx), uid("INV-")
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")], v, doc_id) for v in (1, 2)]
    settings = ctx.settings.model_copy(update={"max_chunk_documents": 1})
    _, messages = store_job(ctx.engine, settings, ctx.internal_key, docs)
    assert len(messages) == 2
    if order == "in_order":
        settle_all(ctx, messages)
    elif order == "reversed":
        settle_all(ctx, messages[::-1])
    else:
        _settle_concurrently(ctx, messages)
    rows = chain(ctx, partition_key=vendor, document_id=doc_id)
    committed = {"in_order": [[1, 2]], "reversed": [[2]], "concurrent": [[1, 2], [2]]}
    assert [r.contract_version for r in rows] in committed[order]
    assert_chained(rows)


def _settle_concurrently(ctx: WorkerContext, messages: list[dict]) -> None:
    errors: list[BaseException] = []

    def deliver(message: dict) -> None:
        for attempt in range(1, 20):
            try:
                settle_chunk(ctx, message, attempt)
                return
            except TransientError:
                threading.Event().wait(0.05)
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=deliver, args=(m,)) for m in messages]
    # Both attempts hold their claims and wait for the booking lock (held here,
    # as a close holds it), then commit together.
    with BookingLock(ctx.settings.database_url) as lock, lock.held():
        for t in threads:
            t.start()
        if ctx.engine.dialect.name == "postgresql":
            lock.wait_for(count=len(threads), timeout=30)
        else:  # who waits for SQLite's write lock cannot be seen
            threading.Event().wait(0.3)
    for t in threads:
        t.join()
    assert errors == []


def recipe_request(recipe: str, at: str, price: str) -> dict:
    return {
        "document_id": uid("RQ-"),
        "partition_key": recipe,
        "contract_version": 1,
        "recipe_id": recipe,
        "location_ids": ["STORE-1", "STORE-2"],
        "effective_at": at,
        "pricing_snapshot": {"FLOUR": price},
        "trigger": "vendor_rate",
    }


@pytest.mark.regression
def test_two_requests_for_one_recipe_location_in_one_batch_chain_by_effective_at(ctx):
    """Issue 12 item 6 for recipe_cost: the later-effective request is the newer cost."""
    recipe = uid("RECIPE-")
    put_contract(ctx.engine, "recipe_cost", recipe, 1, {"bom": {"FLOUR": "2"}})
    docs = [
        recipe_request(recipe, "2026-03-01T00:00:00Z", "3.00"),  # 6.0000, effective last
        recipe_request(recipe, "2026-01-01T00:00:00Z", "1.00"),  # 2.0000
        recipe_request(recipe, "2026-02-01T00:00:00Z", "2.50"),  # 5.0000
    ]
    _, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, "recipe_cost")
    settle_all(ctx, messages)
    for location in ("STORE-1", "STORE-2"):
        rows = chain(ctx, kind="recipe_cost", partition_key=recipe, line_ref=location)
        assert [r.amount for r in rows] == [Decimal("2.0000"), Decimal("5.0000"), Decimal("6.0000")]
        assert_chained(rows)


@pytest.mark.regression
def test_two_versions_of_a_freight_invoice_in_one_batch_chain(ctx):
    carrier, doc_id = uid("CARRIER-"), uid("PRO-")
    for version, rate in ((1, "2.00"), (2, "2.50")):
        body = {
            "rate_per_mile": rate,
            "fuel_surcharge": "0",
            "accessorials": {},
            "tolerance": "1.00",
        }
        put_contract(ctx.engine, "freight_audit", carrier, version, body)
    leg = {"leg_no": 1, "miles": "100", "accessorials": [], "billed_amount": "200.00"}
    docs = [
        {
            "document_id": doc_id,
            "partition_key": carrier,
            "contract_version": version,
            "document_type": "PDF",
            "legs": [leg],
        }
        for version in (2, 1)
    ]
    _, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, "freight_audit")
    settle_all(ctx, messages)
    rows = chain(ctx, partition_key=carrier, document_id=doc_id)
    assert [(r.contract_version, r.amount) for r in rows] == [
        (1, Decimal("200.00")),
        (2, Decimal("250.00")),
    ]
    assert_chained(rows)


def test_publishing_a_new_version_waits_for_settlements_that_found_no_repricing(ctx):
    """A chunk at version 1 in a partition never re-priced takes no lineage lock
    (so two workers settling first versions never wait on each other). That is
    safe only because publishing version 2 waits for such a transaction: else a
    v2 row could commit beside an uncommitted v1 row, miss it, and both would
    carry their full amount as delta."""
    if ctx.engine.dialect.name != "postgresql":
        pytest.skip("SQLite runs one writer at a time: there is no concurrent settlement")
    from shared.adapters.db.ledger.priors import repriced_partitions

    vendor = promo_vendor(ctx, versions=(1,))
    published = threading.Event()

    def publish_v2() -> None:
        body = {"tier_rates": {"T1": RATES[2]}, "tolerance": "100.00"}
        put_contract(ctx.engine, "promo_accrual", vendor, 2, body)
        published.set()

    with ctx.engine.begin() as settling:
        assert repriced_partitions(settling, "promo_accrual", {vendor}) == set()
        publisher = threading.Thread(target=publish_v2)
        publisher.start()
        assert not published.wait(0.5), "v2 was published beside an open v1 settlement"
    publisher.join(timeout=10)
    assert published.is_set()
    with ctx.engine.begin() as later:
        assert repriced_partitions(later, "promo_accrual", {vendor}) == {vendor}
