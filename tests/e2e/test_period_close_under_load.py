"""A close while a 50,000-line job settles on both settling workers is a cut
(docs/architecture.md#booking-periods-and-the-close): every row is booked in
exactly one of the two periods, each unit of work lands whole on one side,
the closed period's journal is the same bytes before and after the rest of
the job settles, and the two periods' balances add up to the ledger. On the
PostgreSQL ledger and the embedded SQLite one."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import ServiceEnv, isolated_env, isolated_sqlite_env, migrate
from tests.support.stack import Stack

pytestmark = pytest.mark.e2e

DOCUMENTS, LINES = 1000, 50  # 50,000 lines
CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
SETTINGS = {"max_chunk_documents": 20}  # 50 units of 1,000 lines


@pytest.fixture(scope="module", params=["postgresql", "sqlite"])
def stack_env(request: pytest.FixtureRequest, tmp_path_factory: Any) -> Iterator[ServiceEnv]:
    if request.param == "postgresql":
        with isolated_env("close") as env:
            yield env
        return
    directory: Path = tmp_path_factory.mktemp("close")
    with isolated_sqlite_env(directory) as env:
        migrate(env.database_url)
        yield env


@pytest.fixture(scope="module")
def stack(stack_env: ServiceEnv, tmp_path_factory: Any) -> Iterator[Stack]:
    running = Stack(stack_env, tmp_path_factory.mktemp("logs"), **SETTINGS)
    try:
        running.start_api()
        running.start_worker("fast_path")
        running.start_worker("compute_heavy", "settle-1")
        running.start_worker("compute_heavy", "settle-2")
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def engine(stack_env: ServiceEnv) -> Iterator[Engine]:
    made = make_engine(stack_env.database_url)
    yield made
    made.dispose()


def _journal(stack: Stack, period: str) -> bytes:
    answer = stack.viewer().bearer("GET", f"/v1/periods/{period}/journal?format=csv")
    assert answer.status_code == 200, answer.text
    return answer.content


def test_a_close_halfway_through_a_job_books_every_row_once_and_the_closed_journal_holds(
    stack: Stack, engine: Engine
) -> None:
    vendor = uid("CUT-")
    put = stack.operator().bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
    assert put.status_code == 201, put.text
    docs = [
        promo_doc(vendor, [promo_line(n, str(8 * n), f"{n}.00") for n in range(1, LINES + 1)])
        for _ in range(DOCUMENTS)
    ]
    producer, viewer = stack.producer(), stack.viewer()
    submitted = producer.submit(json.dumps({"kind": "promo_accrual", "documents": docs}).encode())
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["job_id"]
    [first] = [p for p in viewer.bearer("GET", "/v1/periods").json()["items"]]
    # Halfway: once some units have committed and most have not.
    deadline = time.monotonic() + 300
    while True:
        job = producer.job(job_id)
        if job["chunks"]["done"] >= 3:
            break
        assert time.monotonic() < deadline, job
        time.sleep(0.05)
    body = {"period": first["name"], "next": "AFTER", "note": "halfway"}
    closed = stack.operator().bearer("POST", "/admin/periods/close", body)
    assert closed.status_code == 200, closed.text
    summary = closed.json()
    journal = _journal(stack, first["name"])
    assert hashlib.sha256(journal).hexdigest() == summary["journal_sha256"]

    done = producer.wait(job_id, timeout=600)
    assert done["outcomes"]["posted"] == DOCUMENTS * LINES, done
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        rows = conn.execute(
            select(ledger.c.id, ledger.c.period, ledger.c.delta).where(ledger.c.job_id == job_id)
        ).all()
        units = conn.execute(
            select(tables.outbox.c.ledger_entry_ids).where(tables.outbox.c.type == tables.OUTCOME)
        ).scalars()
        period_of = {r.id: r.period for r in rows}
        for unit in units:
            booked = {period_of[i] for i in unit if i in period_of}
            assert len(booked) <= 1, booked  # a unit lands whole on one side
        total = conn.execute(select(func.count()).select_from(ledger)).scalar_one()
    counts = Counter(r.period for r in rows)
    assert len(rows) == DOCUMENTS * LINES == total
    assert set(counts) == {first["name"], "AFTER"}, counts  # the close fell mid-job
    assert counts[first["name"]] == summary["rows"]
    # The closed period never changed: the same journal bytes after the rest settled.
    assert _journal(stack, first["name"]) == journal
    # Its balances are its rows'; the open period's closing is the whole ledger.
    before = sum((r.delta for r in rows if r.period == first["name"]), Decimal(0))
    closed_balances = viewer.bearer("GET", f"/v1/balances?period={first['name']}").json()
    assert [Decimal(b["closing"]) for b in closed_balances["items"]] == [before]
    now = viewer.bearer("GET", "/v1/balances").json()
    assert [Decimal(b["closing"]) for b in now["items"]] == [
        sum((r.delta for r in rows), Decimal(0))
    ]
