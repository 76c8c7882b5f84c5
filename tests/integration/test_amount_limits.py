"""Large valid amounts never fail a chunk (docs/architecture.md#decimal-limits), through the settle
stage on real Redis and each ledger backend.

Every total settleq keeps holds the largest sums valid lines can make; a line
whose own amount, or change from its previous amount, cannot fit the ledger
column is dead-lettered alone as ``amount_out_of_range``; nothing a producer
sends ends as ``internal_error``.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from sqlalchemy import select

from services.worker.context import WorkerContext
from services.worker.stages import dead_letter_chunk, settle_chunk
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.jobs.queries import job_status
from shared.domain.pipeline.messages import ChunkMessage
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.ledger import chunk_results, dead_letters, ledger_rows

pytestmark = pytest.mark.both_backends

PRICE = "999999999999"  # the largest price a producer may send
COST = Decimal("8999999999991000.0000")  # 9000 * PRICE: fits NUMERIC(20,4)


def recipe(ctx: WorkerContext, qty: str = "9000") -> str:
    name = uid("RECIPE-")
    put_contract(ctx.engine, "recipe_cost", name, 1, {"bom": {"SKU-A": qty}})
    return name


def request(recipe_id: str, locations: list[str], price: str, at: str = "2026-01-01") -> dict:
    return {
        "document_id": uid("RQ-"),
        "partition_key": recipe_id,
        "contract_version": 1,
        "recipe_id": recipe_id,
        "location_ids": locations,
        "effective_at": f"{at}T00:00:00Z",
        "pricing_snapshot": {"SKU-A": price},
        "trigger": "vendor_rate",
    }


@pytest.mark.regression
def test_lines_that_each_fit_the_ledger_post_though_their_sum_does_not(ctx):
    """Issue 12 item 4: two locations at 9000 x 999999999999 and an unrelated
    document, in one chunk: all three post, and the totals are exact."""
    big, small = recipe(ctx), recipe(ctx, "0.5")
    docs = [request(big, ["L1", "L2"], PRICE), request(small, ["L1"], "3.00")]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, "recipe_cost")
    outcome = settle_chunk(ctx, message, 1)
    assert outcome is not None and (outcome.posted, outcome.dead_lettered) == (3, 0)
    total = 2 * COST + Decimal("1.5000")
    [result] = chunk_results(ctx.engine, job_id)
    assert result.amount_posted == total
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.state == "completed"
    assert status.amounts["posted"] == total
    assert dead_letters(ctx.engine, job_id) == []


@pytest.mark.regression
def test_job_totals_of_33_integer_digits_are_stored_and_read_exact(ctx):
    """The widest totals a batch can make (docs/architecture.md#decimal-limits: far beyond one
    line's 16 digits) are stored by both backends, and summed without the default 28-digit
    context's rounding."""
    docs = [promo_doc(uid("V-"), [promo_line(1, "1", "1.00")])]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    half = Decimal("4" * 33 + ".4444")
    now = dt.datetime.now(dt.UTC)
    with ctx.engine.begin() as conn:
        for n, source in ((1, "chunk"), (2, "requeue")):
            conn.execute(
                tables.chunk_results.insert().values(
                    chunk_id=message["chunk_id"] if n == 1 else f"rq-test-{uid()}",
                    job_id=job_id,
                    source=source,
                    posted=n % 2,
                    disputed=0,
                    duplicate=0,
                    dead_lettered=0,
                    amount_posted=half,
                    amount_disputed=half,
                    created_at=now,
                )
            )
    [first, _] = chunk_results(ctx.engine, job_id)
    assert first.amount_posted == half
    status = job_status(ctx.engine, job_id)
    assert status is not None
    total = Decimal("8" * 33 + ".8888")  # not 2 * half: that rounds to 28 digits
    # disputed_model is the ledger's (these chunk results have no ledger rows)
    assert status.amounts == {"posted": total, "disputed": total, "disputed_model": 0}


@pytest.mark.regression
def test_a_recipe_cost_whose_change_cannot_fit_is_dead_lettered_alone(ctx):
    """Its amount fits, but new - previous (previous negative) does not."""
    name = recipe(ctx)
    first_id, [first] = store_job(
        ctx.engine,
        ctx.settings,
        ctx.internal_key,
        [request(name, ["L1"], f"-{PRICE}")],
        "recipe_cost",
    )
    assert settle_chunk(ctx, first, 1) is not None
    [old] = ledger_rows(ctx.engine, first_id)
    assert old.amount == -COST
    docs = [request(name, ["L1", "L2"], PRICE, "2026-02-01")]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, "recipe_cost")
    outcome = settle_chunk(ctx, message, 1)
    assert outcome is not None and (outcome.posted, outcome.dead_lettered) == (1, 1)
    [letter] = dead_letters(ctx.engine, job_id)
    assert (letter.reason, letter.line_ref, letter.line_index, letter.lines) == (
        "amount_out_of_range",
        "L1",
        0,
        1,
    )
    [row] = ledger_rows(ctx.engine, job_id)
    assert (row.line_ref, row.amount, row.delta) == ("L2", COST, COST)
    status = job_status(ctx.engine, job_id)
    assert status is not None and sum(status.outcomes.values()) == status.lines == 2


@pytest.mark.regression
def test_a_promo_reprice_whose_delta_cannot_fit_is_dead_lettered_alone(ctx):
    """The same on the one-statement PostgreSQL path (promo_accrual)."""
    vendor, doc_id = uid("V-"), uid("INV-")
    for version, rate in ((1, "-9000"), (2, "9000")):
        body = {"tier_rates": {"T1": rate}, "tolerance": "0.05"}
        put_contract(ctx.engine, "promo_accrual", vendor, version, body)
    lines = [promo_line(1, PRICE, "1.00"), promo_line(2, "1", "1.00")]
    _, [first] = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor, lines, 1, doc_id)]
    )
    assert settle_chunk(ctx, first, 1) is not None
    job_id, [second] = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor, lines, 2, doc_id)]
    )
    outcome = settle_chunk(ctx, second, 1)
    assert outcome is not None and (outcome.disputed, outcome.dead_lettered) == (1, 1)
    [letter] = dead_letters(ctx.engine, job_id)
    assert (letter.reason, letter.line_ref, letter.line_index) == ("amount_out_of_range", "1", 0)
    [row] = ledger_rows(ctx.engine, job_id)
    assert (row.line_ref, row.amount, row.delta) == ("2", Decimal("9000.00"), Decimal("18000.00"))
    status = job_status(ctx.engine, job_id)
    assert status is not None and sum(status.outcomes.values()) == status.lines == 2


@pytest.mark.regression
def test_a_chunk_dead_lettered_internal_error_by_the_overflow_requeues_and_posts(ctx):
    """What the overflow left behind before the fix (every document of the chunk
    dead-lettered internal_error) now settles on requeue, and the counts add up."""
    big, small = recipe(ctx), recipe(ctx, "0.5")
    docs = [request(big, ["L1", "L2"], PRICE), request(small, ["L1"], "3.00")]
    job_id, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, "recipe_cost")
    dead_letter_chunk(
        ctx,
        message,
        reason="internal_error",
        error_class="DataError",
        message="numeric field overflow",
        attempts=1,
    )
    letters = dead_letters(ctx.engine, job_id)
    assert [(d.reason, d.lines) for d in letters] == [("internal_error", 2), ("internal_error", 1)]
    for letter in letters:
        assert settle_chunk(ctx, requeue_message(ctx, letter.id), 1) is not None
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.state == "completed"
    assert status.outcomes == {"posted": 3, "disputed": 0, "duplicate": 0, "dead_lettered": 0}
    assert status.amounts["posted"] == 2 * COST + Decimal("1.5000")


def requeue_message(ctx: WorkerContext, dead_letter_id: int) -> dict:
    """What the operator API does: mark requeued, then sign the unit's message."""
    with ctx.engine.begin() as conn:
        marked = dl_db.mark_requeued(conn, dead_letter_id)
        digest = conn.execute(
            select(tables.chunks.c.payload_sha256).where(tables.chunks.c.id == marked.chunk_id)
        ).scalar_one()
    return ChunkMessage(
        marked.chunk_id, marked.job_id, marked.kind, digest, marked.id, marked.requeues
    ).signed(ctx.internal_key)
