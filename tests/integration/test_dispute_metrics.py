"""The dispute gauges of the API's /metrics (docs/operations.md#metrics), read from
real disputes on both ledger backends: open disputes and their money at stake
per kind, every kind exported, and the oldest open dispute's age."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from prometheus_client.core import Metric
from sqlalchemy import Engine

from services.api.disputes.metrics import (
    DISPUTE_METRICS,
    DISPUTES_OLDEST_AGE,
    DISPUTES_OPEN,
    DISPUTES_OPEN_VARIANCE,
    DisputeGauges,
    DisputeReading,
)
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.disputes import queue as disputes
from shared.adapters.db.engine import make_engine
from shared.domain.disputes import ResolveRequest
from shared.domain.kinds import KINDS
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid

pytestmark = pytest.mark.both_backends
KIND = "promo_accrual"


def samples(reading: DisputeReading) -> dict[tuple[str, str], float]:
    """(metric, kind label) -> value; the age's label is ""."""
    families: list[Metric] = list(reading.metrics(dt.datetime.now(dt.UTC)))
    assert [f.name for f in families] == list(DISPUTE_METRICS)
    return {(s.name, s.labels.get("kind", "")): s.value for f in families for s in f.samples}


def open_disputes(
    ctx: WorkerContext, vendor: str, lines: list[tuple[str, str]]
) -> dict[Decimal, disputes.Dispute]:
    """Settle one document of (units, claimed) T1 lines for ``vendor``: its
    disputes by claimed amount."""
    publish_promo_contracts(ctx.engine, [vendor])
    docs = [promo_doc(vendor, [promo_line(n, u, c) for n, (u, c) in enumerate(lines, 1)])]
    _, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    page = disputes.page(ctx.engine, disputes.Filter(partition_key=vendor), after_id=None, limit=10)
    return {d.claimed_amount: d for d in page}


def test_open_disputes_and_their_money_at_stake_per_kind(ctx: WorkerContext) -> None:
    gauges = DisputeGauges(refresh_s=0)  # every reading from the ledger
    before = gauges.reading(ctx.engine)
    vendor = uid("V-")
    # T1 at 0.125, tolerance 0.05: models 0.25, 5.00 and 1.00; variances 4.75, -4.00, 19.00.
    opened = open_disputes(ctx, vendor, [("2", "5.00"), ("40", "1.00"), ("8", "20.00")])
    assert len(opened) == 3
    disputes.resolve(
        ctx.engine,
        opened[Decimal("20.00")].id,
        ResolveRequest("accept_claim", "vendor proved the units"),
        "test",
    )
    after = gauges.reading(ctx.engine)

    count, at_stake = before.open_by_kind.get(KIND, (0, Decimal(0)))
    assert after.open_by_kind[KIND] == (count + 2, at_stake + Decimal("8.75"))  # 4.75 + 4.00
    got = samples(after)
    # The gauges carry the exact sums as floats. Compared as such, not by
    # difference: other tests' disputes in the shared ledger can reach 10^15,
    # where a float difference is off by a quarter.
    assert got[(DISPUTES_OPEN, KIND)] == after.open_by_kind[KIND][0]
    assert got[(DISPUTES_OPEN_VARIANCE, KIND)] == float(after.open_by_kind[KIND][1])
    for kind in KINDS:  # a kind with no open dispute is 0, never missing
        assert (DISPUTES_OPEN, kind) in got and (DISPUTES_OPEN_VARIANCE, kind) in got

    mine = opened[Decimal("5.00")]
    assert after.oldest_open_at is not None
    assert after.oldest_open_at <= mine.opened_at
    now = dt.datetime.now(dt.UTC)
    opened = mine.opened_at if mine.opened_at.tzinfo else mine.opened_at.replace(tzinfo=dt.UTC)
    assert got[(DISPUTES_OLDEST_AGE, "")] >= (now - opened).total_seconds() - 5


def test_a_reading_is_kept_for_refresh_s_and_a_failed_one_is_not() -> None:
    reading = DisputeReading({}, None)
    assert samples(reading)[(DISPUTES_OLDEST_AGE, "")] == 0  # none open
    assert {k for (name, k), v in samples(reading).items() if name == DISPUTES_OPEN} == set(KINDS)
    assert all(v == 0 for v in samples(reading).values())

    down = make_engine("postgresql://postgres@127.0.0.1:1/nowhere")
    gauges = DisputeGauges(refresh_s=60)
    with pytest.raises(Exception):  # noqa: B017, PT011 - the driver's own connection error
        gauges.reading(down)
    down.dispose()


def test_a_reading_is_cached_between_scrapes(engine: Engine) -> None:
    gauges = DisputeGauges(refresh_s=60)
    assert gauges.reading(engine) is gauges.reading(engine)
    fresh = DisputeGauges(refresh_s=0)
    assert fresh.reading(engine) is not fresh.reading(engine)
