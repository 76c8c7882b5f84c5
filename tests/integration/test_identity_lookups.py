"""Every read of the ledger by reconciliation key goes through the identity's
index (docs/architecture.md#ledger-schema). On PostgreSQL the index holds the
key's bytes (migration 0030), so a query that compares the key's text cannot
use it and reads the whole ledger a lookup: on a ledger of millions of rows,
a settlement, a dispute page or a line's story that takes minutes. Here every
statement that names the key is explained, with sequential scans priced out,
as the lines of one identity are settled, disputed, resolved, re-priced and
sent again, read back as a story and as their document's lines: every one
that compares keys finds them through the identity's index."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Iterator
from decimal import Decimal

import pytest
from sqlalchemy import Engine, text

from shared.adapters.db.bulk import insert_rows
from shared.adapters.db.disputes import queue as disputes
from shared.adapters.db.disputes import reads as dispute_reads
from shared.adapters.db.ledger import postgres
from shared.adapters.db.ledger.read import history
from shared.adapters.db.tables import ledger_entries
from shared.domain.disputes import ResolveRequest
from tests.support.disputes import (
    ACTOR,
    disputed_doc,
    job_disputes,
    new_vendor,
    row,
    settle,
)
from tests.support.plans import explained

SCAN = "Seq Scan on ledger_entries"


# A statement that compares keys: their text, or their bytes as the index holds them.
COMPARES_KEYS = re.compile(r"reconciliation_key(, 'hex'\))?\s*(=|IN\b)")


def unindexed(statement: str, plan: str) -> bool:
    """Does the plan scan the ledger, or compare keys without finding any of
    them in an index? (The planner may still prefer another index for one
    branch of a statement, as for a key's disputed rows; never none.)"""
    steps = plan.splitlines()
    found = any("Index Cond" in step and "reconciliation_key" in step for step in steps)
    return SCAN in plan or (COMPARES_KEYS.search(statement) is not None and not found)


@pytest.fixture
def history_rows(engine: Engine) -> None:
    """Other vendors' rows (one in fifty disputed), analysed, so that the
    planner weighs the ledger's indexes as on a ledger in use rather than an
    empty one (where any index, read whole, costs next to nothing)."""
    rows = [
        {
            "reconciliation_key": hashlib.sha256(f"filler|{n}".encode()).hexdigest(),
            "contract_version": 1,
            "kind": "promo_accrual",
            "partition_key": f"FILLER-{n % 40}",
            "document_id": f"F-{n // 20}",
            "line_ref": str(n % 20 + 1),
            "job_id": "f" * 32,
            "outcome": "disputed" if n % 50 == 0 else "posted",
            "amount": Decimal("1.00"),
            "claimed_amount": Decimal("1.00"),
            "delta": Decimal("1.00"),
            "period": "FILLER",
            "created_at": dt.datetime.now(dt.UTC),
        }
        for n in range(20_000)
    ]
    with engine.begin() as conn:
        # Once a module: its tests share a ledger.
        if not conn.execute(text("SELECT 1 FROM ledger_entries WHERE period = 'FILLER'")).first():
            insert_rows(conn, ledger_entries, rows)
    with engine.connect() as conn:
        conn.execute(text("ANALYZE ledger_entries"))
        conn.commit()


@pytest.fixture
def plans(engine: Engine) -> Iterator[list[tuple[str, str]]]:
    """(statement, plan) of every SELECT that names the key."""
    with explained(engine, lambda s: "reconciliation_key" in s and "ledger_entries" in s) as found:
        yield found


def test_every_read_by_key_finds_it_through_the_identity_index(
    engine: Engine, history_rows: None, plans: list[tuple[str, str]]
) -> None:
    vendor = new_vendor(engine)
    doc = disputed_doc(vendor, ["1.50", "1.00"])
    v1 = settle(engine, [doc])
    [dispute] = job_disputes(engine, v1, [doc])
    disputes.resolve(engine, dispute, ResolveRequest("settle_at", "agreed", Decimal("1.2")), ACTOR)
    repriced = disputed_doc(vendor, ["1.50", "1.00"], 2, doc["document_id"])
    settle(engine, [repriced])  # the priors of version 2, by key
    settle(engine, [repriced])  # sent again: duplicates, and their claims by key
    key = row(engine, dispute).reconciliation_key
    assert len(history.identity(engine, key)) == 3
    assert history.document_lines(engine, doc["document_id"], limit=20)
    assert dispute_reads.get(engine, dispute) is not None  # superseded or not, by key

    assert sum(1 for s, _ in plans if COMPARES_KEYS.search(s)) >= 6, [s for s, _ in plans]
    missed = [(s, p) for s, p in plans if unindexed(s, p)]
    assert not missed, missed


def test_the_fast_cases_probe_finds_keys_through_the_identity_index(engine: Engine) -> None:
    """Settlement's probe of a chunk's first keys (``ledger/postgres.py``) is
    raw SQL on the driver's cursor: explained as it is sent."""
    with engine.connect() as conn:
        cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("EXPLAIN " + postgres._PROBE, (["ab" * 32],))
        plan = "\n".join(r[0] for r in cursor.fetchall())
        conn.rollback()
    assert "uq_ledger_entries_identity" in plan and SCAN not in plan, plan


def test_a_lookup_by_key_is_planned_as_one_row(engine: Engine, history_rows: None) -> None:
    """Migration 0038's statistics on the key's bytes: without them the planner
    takes a key's rows for 0.5% of the ledger (100,000 of 20M rows), and sends
    a one-row lookup to parallel workers with JIT (35-40 ms, not 0.1)."""
    if engine.dialect.name != "postgresql":
        pytest.skip("PostgreSQL's estimates")
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            "EXPLAIN (FORMAT JSON) SELECT id FROM ledger_entries"
            " WHERE decode(reconciliation_key, 'hex') = decode(%(key)s, 'hex')"
            " AND outcome IN ('posted', 'disputed')",
            {"key": "ab" * 32},
        ).scalar_one()
    assert plan[0]["Plan"]["Plan Rows"] < 10, plan
