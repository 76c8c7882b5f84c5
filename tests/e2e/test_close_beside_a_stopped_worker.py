"""A close never stops the rest of settlement (docs/api.md#the-close,
docs/architecture.md#booking-periods-and-the-close), on a real stack: a
compute_heavy worker is stopped (SIGSTOP) inside its settle transaction, after
booking into the period. Another partition's job settles on the other worker;
a close asked for then waits for the stopped one without holding anyone else
back (a job submitted while it waits settles), gives up after
SETTLEQ_CLOSE_WAIT_S with 409 close_waiting naming the stopped worker, and
cuts nothing. Once the worker goes on, every line is posted once and the close
succeeds. (Before: from the close on, nothing in any partition settled while
the worker stayed stopped, and the close hung.)"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import Engine, func, select, text

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.support.booking_lock import BookingLock
from tests.support.chaos_checks import publish_contracts, submit_documents
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import ServiceEnv, isolated_env
from tests.support.stack import Stack

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]

CLOSE_WAIT_S = 20
# A document a unit, so the job submitted while the close waits is spread over
# both workers' queues: the stopped one's prefetch takes some of them (RabbitMQ
# delivers to it until its heartbeats are missed), the other settles the rest.
UNITS = 8
# Whose transaction a backend's is: Stack names each process's sessions.
_NAME_OF = text("SELECT application_name FROM pg_stat_activity WHERE pid = :pid")
# A close under way: a session in a transaction whose last statement was the
# close's (its attempt at the booking lock alone, or its look at the holders).
_CLOSING = text(
    "SELECT count(*) FROM pg_stat_activity WHERE xact_start IS NOT NULL"
    " AND (query LIKE '%FROM pg_locks l%' OR query LIKE 'SELECT pg_advisory_xact_lock(%')"
)


@pytest.fixture
def env() -> Iterator[ServiceEnv]:
    with isolated_env("stopped") as made:
        yield made


@pytest.fixture
def stack(env: ServiceEnv, tmp_path: Any) -> Iterator[Stack]:
    running = Stack(env, tmp_path, close_wait_s=CLOSE_WAIT_S, max_chunk_documents=1)
    try:
        running.start_api()
        running.start_worker("fast_path")
        running.start_worker("compute_heavy", "settle-1")
        running.start_worker("compute_heavy", "settle-2")
        yield running
    finally:
        for process in running.processes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGCONT)
        running.stop()


@pytest.fixture
def engine(env: ServiceEnv) -> Iterator[Engine]:
    made = make_engine(env.database_url, pool_size=2)
    yield made
    made.dispose()


def _job(vendor: str, units: int = 1) -> list[dict[str, Any]]:
    return [
        promo_doc(vendor, [promo_line(n, "8", "1.00") for n in range(1, 4)]) for _ in range(units)
    ]


def _posted(engine: Engine, vendor: str) -> int:
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        found = conn.execute(
            select(func.count()).select_from(ledger).where(ledger.c.partition_key == vendor)
        )
        return int(found.scalar_one())


def test_a_close_beside_a_stopped_worker_stops_nothing_else_and_gives_up_cutting_nothing(
    stack: Stack, engine: Engine
) -> None:
    stuck, other, during = uid("STOP-"), uid("GOES-"), uid("WAIT-")
    jobs = {stuck: _job(stuck), other: _job(other, UNITS), during: _job(during, UNITS)}
    publish_contracts(stack, [d for docs in jobs.values() for d in docs])
    producer, operator = stack.producer(), stack.operator()
    [first] = stack.viewer().bearer("GET", "/v1/periods").json()["items"]

    # Stop the worker that settles the first job where its transaction has
    # booked into the period: held at the booking lock, stopped, then let go
    # (PostgreSQL grants its backend the lock; the stopped process never commits).
    with BookingLock(stack.env.database_url) as lock:
        lock.hold()
        stuck_job = submit_documents(stack, jobs[stuck])
        [pid] = lock.wait_for(count=1)
        with engine.connect() as conn:
            name = conn.execute(_NAME_OF, {"pid": pid}).scalar_one()
        assert name in ("settle-1", "settle-2"), name
        stack.processes[name].send_signal(signal.SIGSTOP)
        lock.release()

    # Another partition settles on the other worker (what the stopped one's
    # prefetch took waits for it).
    submit_documents(stack, jobs[other])
    while not _posted(engine, other):
        time.sleep(0.05)

    # A close: it waits for the stopped worker, and only for it.
    answer: list[Any] = []
    body = {"period": first["name"], "next": "NEXT", "note": "beside a stopped worker"}
    closer = threading.Thread(
        target=lambda: answer.append(operator.bearer("POST", "/admin/periods/close", body)),
        daemon=True,
    )
    closer.start()
    while True:  # the close has begun
        with engine.connect() as conn:
            if conn.execute(_CLOSING).scalar_one():
                break
        assert closer.is_alive(), answer
        time.sleep(0.02)
    during_job = submit_documents(stack, jobs[during])
    hung = time.monotonic() + 120  # only a hang's bound: a unit settles in milliseconds
    while not _posted(engine, during):
        assert time.monotonic() < hung, "nothing settled while the close waited"
        assert closer.is_alive(), "settlement waited for the close to give up"
        time.sleep(0.05)
    assert closer.is_alive(), "settlement waited for the close to give up"
    closer.join(120)
    [refused] = answer
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "close_waiting"
    assert name in error["message"] and "nothing was cut" in error["message"], error
    periods = stack.viewer().bearer("GET", "/v1/periods").json()["items"]
    assert [(p["name"], p["status"]) for p in periods] == [(first["name"], "open")]

    # The worker goes on: its job posts once, and the close now cuts.
    stack.processes[name].send_signal(signal.SIGCONT)
    for job_id in (stuck_job, during_job):
        finished = producer.wait(job_id, timeout=180)
        assert finished["state"] == "completed", finished
    closed = operator.bearer("POST", "/admin/periods/close", body)
    assert closed.status_code == 200, closed.text
    lines = 3 * (1 + 2 * UNITS)
    assert closed.json()["rows"] == lines
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        rows = conn.execute(select(func.count()).select_from(ledger)).scalar_one()
        keys = conn.execute(select(func.count(ledger.c.reconciliation_key.distinct())))
        assert rows == keys.scalar_one() == lines
