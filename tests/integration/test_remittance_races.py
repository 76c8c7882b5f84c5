"""Exactly once under concurrency (docs/architecture.md#remittances-and-deductions),
on PostgreSQL, where remittances for one partition really run at once.

The test holds ``LOCK TABLE deductions IN SHARE MODE``: a remittance's
transaction reads the documents' open amounts, decides, and then waits to
write its deductions. So every racer has read the open amounts it decides on
before any of them commits, unless something serialises them before the read:
the partition's match lock (store.py::lock_partition). Without it, twelve
remittances each take 60.00 of a 100.00 document: 720.00 matched.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text

from shared.adapters.db.engine import make_engine
from shared.adapters.db.remittances import store
from shared.adapters.db.remittances.tables import deductions, remittances
from shared.adapters.db.tables import ledger_entries as le
from shared.domain.remittances.model import Adjustment, Payer, Remittance
from shared.domain.remittances.profile import Profile
from tests.support.disputes import new_vendor, settle
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import ServiceEnv
from tests.support.races import race

RACERS = 12


@pytest.fixture
def pool(backend_env: ServiceEnv) -> Iterator[Engine]:
    """An engine whose pool holds every racer and the test's own hold."""
    engine = make_engine(backend_env.database_url, pool_size=RACERS + 2)
    yield engine
    engine.dispose()


def _incoming(vendor: str, document_id: str, trace: str, amount: str = "-60.00") -> store.Incoming:
    remittance = Remittance(
        payer=Payer(id=vendor),
        trace=trace,
        paid_total=Decimal("0"),
        currency="USD",
        paid_at=dt.date(2026, 12, 1),
        adjustments=(Adjustment(amount=Decimal(amount), reason_code="02", reference=document_id),),
    )
    return store.Incoming("acme", vendor, remittance, Profile(vendor), "json")


def _waiting(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
                )
            ).scalar_one()
        )


def _held_while(engine: Engine, racers: list[Callable[[], Any]]) -> list[Any]:
    """Run ``racers`` while holding the deductions table against their writes;
    let go once every one of them waits on a lock (readiness, never a time)."""
    results: list[Any] = []
    hold = engine.connect()
    hold.begin()
    hold.execute(text("LOCK TABLE deductions IN SHARE MODE"))
    runner = threading.Thread(target=lambda: results.extend(race(racers)))
    runner.start()
    try:
        deadline = dt.datetime.now() + dt.timedelta(seconds=60)
        while _waiting(engine) < len(racers):
            assert dt.datetime.now() < deadline, "the racers never all waited"
            threading.Event().wait(0.02)
    finally:
        hold.rollback()
        hold.close()
    runner.join(timeout=120)
    assert not runner.is_alive()
    return results


def _matched(engine: Engine, vendor: str, document_id: str) -> tuple[Decimal, Decimal]:
    """What the remittances matched to the document, and its open amount now."""
    with engine.connect() as conn:
        deltas = conn.execute(
            select(le.c.outcome, le.c.delta).where(
                le.c.partition_key == vendor, le.c.document_id == document_id
            )
        ).all()
    matched = -sum((d for o, d in deltas if o == "deducted"), Decimal(0))
    return matched, sum((d for _, d in deltas), Decimal(0))


def test_twelve_concurrent_remittances_never_match_more_than_a_document_has_open(
    pool: Engine,
) -> None:
    vendor = new_vendor(pool)
    doc = promo_doc(vendor, [promo_line(1, "800", "100.00")])
    settle(pool, [doc])
    now = dt.datetime.now(dt.UTC)
    racers = [
        (lambda n=n: store.record(pool, _incoming(vendor, doc["document_id"], f"T-{n}"), now))
        for n in range(RACERS)
    ]
    results = _held_while(pool, racers)
    assert all(isinstance(r, store.Recorded) and r.created for r in results), results
    matched, left = _matched(pool, vendor, doc["document_id"])
    assert matched == Decimal("100.00"), f"{matched} matched to a document of 100.00"
    assert left == Decimal("0")
    disputed = sum((r.disputed for r in results), Decimal(0))
    assert matched + disputed == Decimal("60.00") * RACERS  # nothing lost


def test_the_same_remittance_raced_is_recorded_once(pool: Engine) -> None:
    vendor = new_vendor(pool)
    doc = promo_doc(vendor, [promo_line(1, "800", "100.00")])
    settle(pool, [doc])
    trace = uid("T-")
    now = dt.datetime.now(dt.UTC)
    results = race(
        [lambda: store.record(pool, _incoming(vendor, doc["document_id"], trace), now)] * RACERS
    )
    assert sorted(r.created for r in results) == [False] * (RACERS - 1) + [True]
    assert len({r.remittance_id for r in results}) == 1
    assert _matched(pool, vendor, doc["document_id"]) == (Decimal("60.00"), Decimal("40.00"))
    with pool.connect() as conn:
        count = select(func.count()).select_from(remittances).where(remittances.c.trace == trace)
        assert conn.execute(count).scalar_one() == 1
        rows = (
            select(func.count())
            .select_from(deductions)
            .where(deductions.c.remittance_id == results[0].remittance_id)
        )
        assert conn.execute(rows).scalar_one() == 1
