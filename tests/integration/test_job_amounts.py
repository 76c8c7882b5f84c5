"""A job's amounts on both ledgers (issue 52 item 11): its disputed lines'
claim, and their model's amount, which balances book and ``submit --wait``
shows as their amount."""

from __future__ import annotations

from decimal import Decimal

import pytest

from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.jobs.queries import job_status
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid

pytestmark = pytest.mark.both_backends


@pytest.mark.regression
def test_a_jobs_disputed_lines_carry_the_models_amount_beside_their_claim(
    ctx: WorkerContext,
) -> None:
    vendor = uid("V-")
    publish_promo_contracts(ctx.engine, [vendor])
    # T1 at 0.125: 8 units claimed 1.00 (posted); 40 claimed 6.00 and 2 claimed
    # 5.00 (disputed: the model says 5.00 and 0.25).
    lines = [promo_line(1, "8", "1.00"), promo_line(2, "40", "6.00"), promo_line(3, "2", "5.00")]
    job_id, messages = store_job(
        ctx.engine, ctx.settings, ctx.internal_key, [promo_doc(vendor, lines)]
    )
    for message in messages:
        settle_chunk(ctx, message, 1)
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.outcomes["disputed"] == 2
    assert status.amounts["posted"] == Decimal("1.00")
    assert status.amounts["disputed"] == Decimal("11.00")  # the claims
    assert status.amounts["disputed_model"] == Decimal("5.25")  # what balances book
