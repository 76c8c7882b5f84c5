"""The dashboard's money per kind (shared/adapters/db/stats.py::money), on both
ledgers: PostgreSQL sums it, SQLite's amounts are added in Python; both exact."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest
from sqlalchemy import Engine

from shared.adapters.db import stats
from tests.support.disputes import disputed_doc, new_vendor, settle

pytestmark = pytest.mark.both_backends


def test_the_money_settled_since_a_time_is_exact_per_kind(engine: Engine) -> None:
    since = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    with engine.connect() as conn:
        before = stats.money(conn, since).get("promo_accrual", (Decimal(0), Decimal(0)))
    vendor = new_vendor(engine)
    # 8 units at 1.00 a line under version 1: claims of 1.00 post, 0.10 and 0.2 dispute.
    settle(engine, [disputed_doc(vendor, ["1.00", "0.10", "1.00", "0.2"])])
    with engine.connect() as conn:
        after = stats.money(conn, since)["promo_accrual"]
    assert after[0] - before[0] == Decimal("2.00")
    assert after[1] - before[1] == Decimal("0.30")
    assert all(type(amount) is Decimal for amount in after)
