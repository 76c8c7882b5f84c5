"""Chaos: faults injected while a multi-partition batch drains, then a count of
what survived (docs/architecture.md#guarantees). The stack runs on a PostgreSQL cluster and a Redis
server of its own (tests/support/private_services.py): restarting or flushing
them touches no shared instance. RabbitMQ is the machine's broker.

Faults (tests/support/faults.py), one or more of each class in every run:
- ``worker_sigkill``: a fast_path or compute_heavy worker killed (and restarted);
- ``rabbitmq_restart``: ``rabbitmqctl stop_app``/``start_app``;
- ``redis_flushall``: every lease and done mark gone;
- ``redis_restart``: the Redis server stopped and started again;
- ``postgres_refuses``: the database refuses connections for 3 s, live ones cut;
- ``postgres_restart``: ``pg_ctl restart -m fast`` while a write transaction is open;
- ``postgres_crash``: ``pg_ctl restart -m immediate`` (a crash, WAL recovery);
- ``relay_kill``: the outbox relay killed and restarted;
- ``sigstop_past_lease``: a compute_heavy worker stopped (SIGSTOP) past its
  claim lease and broker heartbeat, so RabbitMQ hands its chunks to the other
  worker, then resumed (SIGCONT) in its stale attempt (test_paused_worker.py
  checks that case alone, chunk by chunk).

Checks at the end: every (reconciliation_key, contract_version) at most once in
the ledger, every accepted line terminal (0 lost), the job's counters and sums
equal the expected totals and the ledger's rows, every outbox event published
and delivered to a consumer. Bounded in CI (30,000 lines, 10 faults);
``pytest tests/chaos --soak -s`` runs 500,000 lines through 27 faults
(``--soak-lines N`` for fewer) and prints a table of what was injected and
what survived, also written to tests/artifacts/chaos-<mode>.md.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator

import pytest

from shared.adapters.db.engine import make_engine
from tests.e2e.conftest import ARTIFACTS
from tests.support.booking_lock import Stalls
from tests.support.chaos_checks import (
    Census,
    EventsQueue,
    submit_claim,
    unpublished,
    wait_for,
)
from tests.support.faults import CLASSES, Chaos
from tests.support.private_services import PrivateServices, private_env
from tests.support.stack import Stack
from tests.support.workload import generate

pytestmark = [pytest.mark.timeout(900), pytest.mark.serial]

BOUNDED_PLAN = [
    "worker_sigkill",
    "redis_flushall",
    "postgres_refuses",
    "sigstop_past_lease",
    "postgres_restart",
    "rabbitmq_restart",
    "redis_restart",
    "relay_kill",
    "worker_sigkill",
    "postgres_crash",
]


MID_WORK = {
    "postgres_restart": "a write transaction of the stack was open",
    "postgres_crash": "a write transaction of the stack was open",
    "sigstop_past_lease": "RabbitMQ had dropped the paused worker's connection (missed heartbeats)",
}


@pytest.fixture(scope="module")
def services() -> Iterator[PrivateServices]:
    with private_env("chaos") as services:
        yield services


def soak_plan(rng: random.Random, rounds: int = 3) -> list[str]:
    """Every class ``rounds`` times, each round in its own random order."""
    plan: list[str] = []
    for _ in range(rounds):
        plan += rng.sample(CLASSES, len(CLASSES))
    return plan


def spread(progress: Callable[[], float], plan: list[str]) -> Callable[[int], None]:
    """Before fault i, wait (up to 2 minutes) for the job to be i/len(plan) done,
    so the faults strike all along the drain, not all at its start."""

    def wait(i: int) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if progress() >= 0.95 * i / len(plan):
                    return
            except Exception:  # the API may be mid-fault itself
                pass
            time.sleep(0.5)

    return wait


@pytest.mark.regression
def test_faults_lose_and_double_nothing(
    services: PrivateServices, request: pytest.FixtureRequest
) -> None:
    soak = bool(request.config.getoption("--soak"))
    lines = (request.config.getoption("--soak-lines") or 500_000) if soak else 30_000
    rng = random.Random(20261129)
    plan = soak_plan(rng) if soak else BOUNDED_PLAN
    data = generate(lines, vendors=25, seed=77)
    env = services.env
    logs = ARTIFACTS / "logs" / "chaos"
    logs.mkdir(parents=True, exist_ok=True)
    # Short chunks that take a little while each, so faults land mid-stream: the
    # bounded run's 30,000 lines drain for about as long as its 10 faults take,
    # the soak's 500,000 for longer than its 27 (they are spread along the drain).
    # The while is the booking lock held most of the time, as by a run of
    # closes: settles wait for it inside their transactions, claims leased.
    stalls = Stalls(env.database_url, held_s=0.2 if soak else 0.9, free_s=0.1)
    stack = Stack(
        env,
        logs,
        max_chunk_lines=300,
        backoff_base_ms=200,
        backoff_max_ms=3000,
        max_attempts=50,
        claim_lease_ms=2000,
        relay_batch=2,
    )
    engine = make_engine(env.database_url)
    events = EventsQueue(env.queue_prefix)
    chaos = Chaos(stack, services, rng)
    started = time.monotonic()
    try:
        stack.start_api()
        for name in ("fast-0", "heavy-0", "heavy-1"):
            chaos.start_worker(name)
        stack._spawn("relay", ["relay"])
        job_id = submit_claim(stack, data)
        producer = stack.producer()

        def progress() -> float:
            return float(producer.job(job_id)["progress"])

        with stalls:
            struck_at = chaos.inject(plan, progress, before=spread(progress, plan))
        print(f"\nchaos: job progress when each fault struck: {struck_at}")
        job = wait_for(
            lambda: producer.job(job_id), lambda j: j["state"] == "completed", 600 + lines / 100
        )
        wait_for(lambda: unpublished(engine), lambda n: n == 0, 300)
        delivered = events.drain()
        census = Census.take(engine, job)
    finally:
        stack.stop()
        events.close()
        engine.dispose()
    elapsed = time.monotonic() - started

    exact = census.counters_exact(lines, data.expect)
    table = report(chaos, census, lines, exact, len(delivered), elapsed)
    print("\n" + table)
    (ARTIFACTS / f"chaos-{'soak' if soak else 'bounded'}.md").write_text(table)
    # The faults must land while the batch drains, not after it is done.
    assert sum(1 for p in struck_at if p < 1) >= len(plan) // 2, struck_at
    assert set(chaos.injected) == set(plan)
    # A PostgreSQL restart struck a write transaction in flight at least once, and
    # RabbitMQ took a paused worker's chunks away from it.
    restarts = chaos.mid_work["postgres_restart"] + chaos.mid_work["postgres_crash"]
    assert restarts >= 1 and chaos.mid_work["sigstop_past_lease"] >= 1, chaos.mid_work
    assert lines - census.terminal == 0 and census.doubled == 0
    assert exact, (census.job, census.outcomes, data.expect)
    # Every committed event reached a consumer (deduplicated by event id).
    assert len(delivered) == census.ledger_rows


def report(
    chaos: Chaos, census: Census, lines: int, exact: bool, delivered: int, elapsed: float
) -> str:
    """The soak's table: faults injected per class, then what survived them."""
    rows = ["| fault class | injected | struck work in flight |", "|---|---:|---:|"]
    for fault in CLASSES:
        hits = str(chaos.mid_work[fault]) if fault in MID_WORK else "-"
        rows.append(f"| {fault} | {chaos.injected[fault]} | {hits} |")
    total = sum(chaos.injected.values())
    rows.append(f"| **total** ({len(chaos.injected)} classes) | {total} | |")
    rows += ["", "Work in flight: " + "; ".join(f"{k}: {v}" for k, v in MID_WORK.items()) + "."]
    rows += ["", *census.totals(lines, exact, delivered, elapsed)]
    return "\n".join(rows) + "\n"
