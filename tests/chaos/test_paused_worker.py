"""A compute_heavy worker paused (SIGSTOP) past its claim lease while it holds a
chunk, which another worker then settles, then resumed (SIGCONT): its stale
attempt posts nothing (SPEC §1.1, §4.4).

How the chunk reaches the other worker in this design: a stopped process
answers no AMQP heartbeats, so RabbitMQ closes its connection after about two
missed beats and requeues the chunks it held unacknowledged (Dramatiq acks
only after the actor returns). The worker runs with a 2 s heartbeat and a 1 s
claim lease so both run out quickly; the other worker finds the keys' leases
expired, claims them and commits. The resumed worker then finishes its
attempt: its transaction finds the chunk's processed marker and changes
nothing.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from shared.db import tables
from shared.db.engine import make_engine
from tests.e2e.conftest import ARTIFACTS
from tests.support.chaos_checks import Census, publish_contracts, submit_documents, wait_for
from tests.support.faults import HEARTBEAT_S, HEAVY_BROKER_URL
from tests.support.private_services import PrivateServices, private_env
from tests.support.stack import Stack, log_events
from tests.support.workload import generate

pytestmark = pytest.mark.timeout(300)

LEASE_MS = 1000
STALE_PAUSE_S = 6  # the paused worker's injected pause between claim and commit


@pytest.fixture(scope="module")
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
    stopped = None
    try:
        stack.start_api()
        stack.start_worker("fast_path", name="fast-0")
        # The worker to pause pauses on its own between claim and commit, so the
        # SIGSTOP lands at the protocol's most delicate point.
        stale = stack.start_worker(
            "compute_heavy",
            name="heavy-stale",
            broker_url=HEAVY_BROKER_URL,
            fault_settle_pause_s=STALE_PAUSE_S,
        )
        publish_contracts(stack, documents)
        lines = sum(len(d["lines"]) for d in documents)
        job_id = submit_documents(stack, documents)
        wait_for(lambda: held_leases(services), bool, 60)
        os.kill(stale.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        # The live worker may take the chunk only once RabbitMQ gave it up.
        stack.start_worker("compute_heavy", name="heavy-live", broker_url=HEAVY_BROKER_URL)
        producer = stack.producer()
        job = wait_for(lambda: producer.job(job_id), lambda j: j["state"] == "completed", 120)
        settled_while_stopped = time.monotonic() - stopped
        assert not held_leases(services)  # the stopped worker's leases ran out
        os.kill(stale.pid, signal.SIGCONT)
        stopped = None
        # The stale attempt finishes (after the rest of its pause) and logs its settle.
        wait_for(lambda: settle_events(stack, "heavy-stale"), bool, STALE_PAUSE_S + 30)
        time.sleep(2)  # anything else it would do after resuming
        job = producer.job(job_id)
        census = Census.take(engine, job)
    finally:
        if stopped is not None:
            os.kill(stale.pid, signal.SIGCONT)
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
    # The way the chunks left it: RabbitMQ had closed its connection (missed heartbeats).
    assert "Consumer encountered a connection error" in stack.log("heavy-stale", tail=None)
    with engine.connect() as conn:
        chunk_rows = conn.execute(
            select(tables.chunk_results.c.chunk_id).where(tables.chunk_results.c.job_id == job_id)
        ).all()
    engine.dispose()
    assert len(chunk_rows) == len({r[0] for r in chunk_rows}) == 6
    assert census.doubled == 0
    assert census.counters_exact(lines, expect), (census.job, census.outcomes)
