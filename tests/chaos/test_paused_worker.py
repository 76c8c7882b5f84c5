"""A compute_heavy worker paused (SIGSTOP) past its claim lease while it holds a
chunk, which another worker then settles, then resumed (SIGCONT): its stale
attempt posts nothing (docs/architecture.md#exactly-once-effect, docs/architecture.md#dedup-leases).

How the chunk reaches the other worker in this design: a stopped process
answers no AMQP heartbeats, so RabbitMQ closes its connection after about two
missed beats and requeues the chunks it held unacknowledged (Dramatiq acks
only after the actor returns). The worker runs with a 2 s heartbeat and a 1 s
claim lease so both run out quickly; the other worker finds the keys' leases
expired, claims them and commits. The resumed worker then finishes its
attempt: its transaction finds the chunk's processed marker and changes
nothing.

A worker paused inside its settle transaction (after the chunk's marker row,
before the commit) is the other case: the redelivered chunk's marker insert
waits on the paused transaction's row lock, so the chunk is settled only once
the paused worker resumes (its commit stands; the live attempt then finds the
marker) or dies (PostgreSQL then rolls it back). Neither
``statement_timeout`` nor ``idle_in_transaction_session_timeout`` frees a
backend waiting for a stalled client's COPY data, so the wait lasts as long as
the pause. The second test checks that this case, too, posts each line once.
"""

from __future__ import annotations

import dataclasses
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator

import psycopg
import pytest
from sqlalchemy import select

from shared.adapters.db import tables
from shared.adapters.db.engine import make_engine
from tests.e2e.conftest import ARTIFACTS
from tests.support.booking_lock import BookingLock
from tests.support.chaos_checks import Census, publish_contracts, submit_documents, wait_for
from tests.support.faults import HEARTBEAT_S, HEAVY_BROKER_URL, broker_dropped
from tests.support.private_services import PrivateServices, private_env
from tests.support.stack import Stack, log_events
from tests.support.workload import generate

pytestmark = [pytest.mark.timeout(300), pytest.mark.serial]

LEASE_MS = 1000


@pytest.fixture
def services() -> Iterator[PrivateServices]:
    with private_env("paused") as services:
        yield services


def settle_events(stack: Stack, name: str) -> list[dict]:
    return [e for e in log_events(stack.log(name, tail=None)) if e.get("stage") == "settle"]


def held_leases(services: PrivateServices) -> list[bytes]:
    """Claim keys leased by an attempt that has not committed yet."""
    client = services.redis.client()
    prefix = services.env.queue_prefix
    keys = list(client.scan_iter(match=f"{prefix}:claim:*", count=1000))
    values = client.mget(keys) if keys else []
    done = {v for v in values if v and client.exists(f"{prefix}:claimdone:".encode() + v)}
    client.close()
    return [k for k, v in zip(keys, values, strict=True) if v and v not in done]


@pytest.mark.regression
def test_paused_worker_past_its_lease_posts_nothing_when_resumed(
    services: PrivateServices,
) -> None:
    # 29 fresh documents of 20 lines: 6 chunks of at most 100 lines (no repeats).
    data = generate(600, vendors=3, seed=5)
    documents = [d for d in data.documents if d not in data.earlier]
    expect = dataclasses.replace(data.expect, duplicate=0)
    logs = ARTIFACTS / "logs" / "chaos-paused"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(services.env, logs, max_chunk_lines=100, claim_lease_ms=LEASE_MS)
    engine = make_engine(services.env.database_url)
    lock = BookingLock(services.env.database_url)
    stopped = None
    try:
        stack.start_api()
        stack.start_worker("fast_path", name="fast-0")
        stale = stack.start_worker("compute_heavy", name="heavy-stale", broker_url=HEAVY_BROKER_URL)
        publish_contracts(stack, documents)
        lines = sum(len(d["lines"]) for d in documents)
        # The worker to pause waits for the booking lock (held here, as a close
        # holds it) inside its settle transactions, its claims leased, so the
        # SIGSTOP lands at the protocol's most delicate point.
        with lock.held():
            job_id = submit_documents(stack, documents)
            lock.wait_for("heavy-stale", count=2)
            assert held_leases(services)
            os.kill(stale.pid, signal.SIGSTOP)
            stopped = time.monotonic()
        # The live worker may take the chunk only once RabbitMQ gave it up.
        stack.start_worker("compute_heavy", name="heavy-live", broker_url=HEAVY_BROKER_URL)
        # The way its chunks leave it: RabbitMQ closes its connection (missed heartbeats).
        dropped = broker_dropped(stale.pid, timeout=30)
        producer = stack.producer()
        job = wait_for(lambda: producer.job(job_id), lambda j: j["state"] == "completed", 120)
        settled_while_stopped = time.monotonic() - stopped
        assert not held_leases(services)  # the stopped worker's leases ran out
        os.kill(stale.pid, signal.SIGCONT)
        stopped = None
        # The stale attempts finish (their transactions go on) and log their settles.
        wait_for(lambda: len(settle_events(stack, "heavy-stale")) >= 2, bool, 30)
        time.sleep(2)  # anything else it would do after resuming
        job = producer.job(job_id)
        census = Census.take(engine, job)
    finally:
        if stopped is not None:
            os.kill(stale.pid, signal.SIGCONT)
        lock.close()
        stack.stop()

    stale_events = settle_events(stack, "heavy-stale")
    live_events = settle_events(stack, "heavy-live")
    print(
        f"\npaused worker: job done {settled_while_stopped:.1f} s after SIGSTOP;"
        f" stale attempts {len(stale_events)}, live settles {len(live_events)}"
    )
    # Every chunk was settled by the live worker while the other was stopped...
    assert job["state"] == "completed" and census.result_rows == 6
    committed = {e["chunk_id"] for e in live_events if "lines" in e}
    assert len(committed) == 6
    # ...and the stale attempt, resumed, committed nothing.
    assert stale_events and all("lines" not in e for e in stale_events), stale_events
    assert settled_while_stopped > LEASE_MS / 1000 + HEARTBEAT_S
    assert dropped
    with engine.connect() as conn:
        chunk_rows = conn.execute(
            select(tables.chunk_results.c.chunk_id).where(tables.chunk_results.c.job_id == job_id)
        ).all()
    engine.dispose()
    assert len(chunk_rows) == len({r[0] for r in chunk_rows}) == 6
    assert census.doubled == 0
    assert census.counters_exact(lines, expect), (census.job, census.outcomes)


def backend_pids_in_write(services: PrivateServices) -> dict[int, int]:
    """Client process id -> a backend pid, for the stack's open write transactions."""
    with psycopg.connect(services.postgres.admin_url, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pid, client_port FROM pg_stat_activity WHERE datname = %s"
            " AND backend_xid IS NOT NULL",
            (services.database,),
        ).fetchall()
    found = {}
    for backend, port in rows:
        out = subprocess.run(
            ["ss", "-tnpH", f"sport = :{port}"], capture_output=True, text=True, check=True
        ).stdout
        match = re.search(r"pid=(\d+)", out)
        if match:
            found[int(match.group(1))] = backend
    return found


def lock_waiters(services: PrivateServices) -> int:
    """Backends of the stack waiting on another one's lock."""
    with psycopg.connect(services.postgres.admin_url, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
            " AND cardinality(pg_blocking_pids(pid)) > 0",
            (services.database,),
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.regression
def test_worker_paused_inside_its_transaction_posts_each_line_once(
    services: PrivateServices,
) -> None:
    # 4 chunks of up to 5,000 lines: a settle transaction stays open long enough to stop.
    data = generate(20_000, vendors=3, seed=6)
    documents = [d for d in data.documents if d not in data.earlier]
    expect = dataclasses.replace(data.expect, duplicate=0)
    logs = ARTIFACTS / "logs" / "chaos-paused-txn"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(services.env, logs, max_chunk_lines=5000, claim_lease_ms=LEASE_MS)
    engine = make_engine(services.env.database_url)
    stopped = False
    try:
        stack.start_api()
        stack.start_worker("fast_path", name="fast-0")
        stale = stack.start_worker("compute_heavy", name="heavy-stale", broker_url=HEAVY_BROKER_URL)
        publish_contracts(stack, documents)
        lines = sum(len(d["lines"]) for d in documents)
        job_id = submit_documents(stack, documents)
        backend = None
        deadline = time.monotonic() + 60
        while backend is None and time.monotonic() < deadline:
            backend = backend_pids_in_write(services).get(stale.pid)
        assert backend is not None, "the worker never had a write transaction open"
        os.kill(stale.pid, signal.SIGSTOP)
        stopped = True
        stack.start_worker("compute_heavy", name="heavy-live", broker_url=HEAVY_BROKER_URL)
        producer = stack.producer()
        # RabbitMQ hands the held chunk to the live worker, which waits on its marker.
        paused = time.monotonic()
        wait_for(lambda: lock_waiters(services), bool, 30)
        blocked_after = time.monotonic() - paused
        os.kill(stale.pid, signal.SIGCONT)
        stopped = False
        job = wait_for(lambda: producer.job(job_id), lambda j: j["state"] == "completed", 120)
        print(
            f"\npaused in its transaction: the live worker waited on its lock"
            f" {blocked_after:.1f} s after SIGSTOP; job done"
            f" {time.monotonic() - paused - blocked_after:.1f} s after SIGCONT"
        )
        time.sleep(2)  # anything else either worker would do
        census = Census.take(engine, producer.job(job_id))
    finally:
        if stopped:
            os.kill(stale.pid, signal.SIGCONT)
        stack.stop()
        engine.dispose()

    assert job["state"] == "completed" and census.result_rows == 4
    assert census.doubled == 0
    assert census.counters_exact(lines, expect), (census.job, census.outcomes)
    # The stopped worker's commit stood; the live worker's attempt at it changed nothing.
    stale_committed = [e for e in settle_events(stack, "heavy-stale") if "lines" in e]
    assert stale_committed, settle_events(stack, "heavy-stale")
