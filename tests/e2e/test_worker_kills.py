"""Settling workers SIGKILLed mid-chunk dead-letter nothing
(docs/architecture.md#one-failure-stays-one-failure; issue 42, critical 0):
the units a dead worker held come back to a live one, which finds them leased
by the dead worker's attempt. Before, each look at that lease counted as an
attempt, and five attempts at a short backoff ran out before the lease did:
whole chunks were dead-lettered ``retries_exhausted``. Now a look at another
attempt's lease waits the lease out and is no attempt
(docs/architecture.md#dedup-leases).

The settings make the old failure certain: attempts come back within
milliseconds (backoff 50 ms, at most 400 ms: five attempts in under 2 s)
while a lease lasts seconds.

A worker is killed mid-chunk from outside: the test holds the booking lock,
as a period close does, and kills the worker once a settle of its waits for
the lock inside its transaction, its claims leased
(tests/support/booking_lock.py)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from tests.support.booking_lock import BookingLock
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import ServiceEnv
from tests.support.stack import START_CAP_S, Stack

pytestmark = [pytest.mark.e2e, pytest.mark.regression]

SETTINGS = {"backoff_base_ms": 50, "backoff_max_ms": 400, "max_chunk_documents": 4}
CONTRACT = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}


def submit(stack: Stack, documents: int, lines: int) -> tuple[str, int]:
    """A job of good lines only (its own partition); its id and line count."""
    vendor = uid("KILL-")
    answer = stack.operator().bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
    assert answer.status_code == 201, answer.text
    docs = [
        promo_doc(vendor, [promo_line(n, str(8 * n), f"{n}.00") for n in range(1, lines + 1)])
        for _ in range(documents)
    ]
    response = stack.producer().submit(
        json.dumps({"kind": "promo_accrual", "documents": docs}).encode()
    )
    assert response.status_code == 202, response.text
    return response.json()["job_id"], documents * lines


def assert_settled_once(stack: Stack, engine: Engine, job_id: str, lines: int) -> None:
    job = stack.producer().wait(job_id, timeout=300)
    assert job["state"] == "completed", job
    assert job["outcomes"] == {
        "posted": lines,
        "disputed": 0,
        "duplicate": 0,
        "dead_lettered": 0,
    }, job
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        rows = conn.execute(
            select(func.count(), func.count(func.distinct(ledger.c.reconciliation_key))).where(
                ledger.c.job_id == job_id
            )
        ).one()
        dead = conn.execute(
            select(func.count()).where(tables.dead_letters.c.job_id == job_id)
        ).scalar_one()
    assert tuple(rows) == (lines, lines) and dead == 0


def test_a_chunk_redelivered_while_its_dead_holders_lease_runs_waits_for_it(
    stack_env: ServiceEnv, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> None:
    # A 10 s lease: the survivor is consuming long before it runs out.
    stack = Stack(
        stack_env, tmp_path_factory.mktemp("lease-wait"), claim_lease_ms=10_000, **SETTINGS
    )
    lock = BookingLock(stack_env.database_url)
    try:
        stack.start_api()
        stack.start_worker("fast_path")
        stack.start_worker("compute_heavy", name="doomed")
        lock.hold()
        job_id, lines = submit(stack, documents=3, lines=10)
        lock.wait_for("doomed", timeout=START_CAP_S)  # mid-chunk, its claims leased
        stack.start_worker("compute_heavy", name="survivor")
        stack.scrape("survivor")  # it serves metrics: it is up and consuming
        stack.kill("doomed")
        lock.release()
        assert_settled_once(stack, engine, job_id, lines)
    finally:
        lock.close()
        stack.stop()


def test_twenty_kills_mid_chunk_under_load_dead_letter_nothing(
    stack_env: ServiceEnv, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> None:
    stack = Stack(stack_env, tmp_path_factory.mktemp("kills"), claim_lease_ms=5000, **SETTINGS)
    lock = BookingLock(stack_env.database_url)
    try:
        stack.start_api()
        stack.start_worker("fast_path")
        # A worker that lives throughout, as under `settleq up` with more than
        # one settling process: it takes what a killed one held back at once,
        # well within that one's leases.
        stack.start_worker("compute_heavy", name="steady")
        jobs = []
        for n in range(20):
            name = f"victim-{n}"
            stack.start_worker("compute_heavy", name=name)
            stack.scrape(name)  # up and consuming
            # A job of six chunks, shared out between the victim and the
            # steady worker; earlier jobs still settle meanwhile (the load).
            with lock.held():
                jobs.append(submit(stack, documents=24, lines=10))
                lock.wait_for(name, timeout=START_CAP_S)  # mid-chunk, its claims leased
                stack.kill(name)
        for job_id, lines in jobs:
            assert_settled_once(stack, engine, job_id, lines)
    finally:
        lock.close()
        stack.stop()
