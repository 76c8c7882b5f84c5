"""Chaos: faults injected while a multi-partition batch drains, then a count of
what survived (SPEC §1). Bounded in CI; ``pytest tests/chaos --soak`` runs
200,000 lines through 10+ faults.

Faults: worker SIGKILLs at random points, a RabbitMQ restart
(``rabbitmqctl stop_app``/``start_app``), Redis ``FLUSHALL``, PostgreSQL
refusing connections for a few seconds, and a relay kill. At the end: every
(reconciliation_key, contract_version) at most once in the ledger, ledger sums
equal the expected totals, every accepted line terminal, the job's counters
add up, every outbox event published and delivered.
"""

from __future__ import annotations

import json
import random
import subprocess
import time
from collections import Counter
from collections.abc import Callable, Iterator
from decimal import Decimal

import pika
import psycopg
import pytest
import redis
from sqlalchemy import Engine, func, select

from shared.db import tables
from shared.db.engine import make_engine
from tests.e2e.conftest import ARTIFACTS
from tests.support.infra import BROKER_URL, PG_ADMIN, REDIS_URL, ServiceEnv, isolated_env
from tests.support.stack import Stack
from tests.support.workload import CONTRACT, generate, ndjson

pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def chaos_env() -> Iterator[ServiceEnv]:
    with isolated_env("chaos") as env:
        yield env


def rabbitmq_restart() -> None:
    subprocess.run(["rabbitmqctl", "-q", "stop_app"], check=True, timeout=120)
    time.sleep(1)
    subprocess.run(["rabbitmqctl", "-q", "start_app"], check=True, timeout=120)
    subprocess.run(["rabbitmqctl", "-q", "await_startup"], check=True, timeout=120)


def postgres_refuses(database: str, seconds: float) -> None:
    """New connections are refused and live ones are cut, for a few seconds."""
    with psycopg.connect(PG_ADMIN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false')
        try:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (database,),
            )
            time.sleep(seconds)
        finally:
            admin.execute(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true')


class Chaos:
    def __init__(self, stack: Stack, env: ServiceEnv, rng: random.Random) -> None:
        self.stack = stack
        self.env = env
        self.rng = rng
        self.injected: Counter[str] = Counter()

    def worker_sigkill(self) -> None:
        name = self.rng.choice([n for n in self.stack.processes if n.startswith(("fast", "heavy"))])
        self.stack.kill(name)
        tier = "fast_path" if name.startswith("fast") else "compute_heavy"
        self.stack.start_worker(tier, name=name)

    def rabbitmq_restart(self) -> None:
        rabbitmq_restart()

    def redis_flushall(self) -> None:
        redis.Redis.from_url(REDIS_URL).flushall()

    def postgres_refuses(self) -> None:
        postgres_refuses(self.env.database_url.rsplit("/", 1)[1], 3)

    def relay_kill(self) -> None:
        self.stack.kill("relay")
        time.sleep(self.rng.uniform(0.2, 1.0))
        self.stack._spawn("relay", ["relay"])

    def inject(self, plan: list[str], progress: Callable[[], float]) -> list[float]:
        """Inject the faults in order; the job's progress when each one struck."""
        seen = []
        for fault in plan:
            time.sleep(self.rng.uniform(0.3, 1.2))
            try:
                seen.append(progress())
            except Exception:  # the API may be mid-fault itself
                seen.append(float("nan"))
            getattr(self, fault)()
            self.injected[fault] += 1
        return seen


def test_faults_lose_and_double_nothing(
    chaos_env: ServiceEnv, request: pytest.FixtureRequest
) -> None:
    soak = request.config.getoption("--soak")
    lines = 200_000 if soak else 30_000
    plan = [
        "worker_sigkill",
        "redis_flushall",
        "postgres_refuses",
        "worker_sigkill",
        "rabbitmq_restart",
        "relay_kill",
        "worker_sigkill",
    ]
    if soak:
        plan += [
            "worker_sigkill",
            "rabbitmq_restart",
            "redis_flushall",
            "postgres_refuses",
            "worker_sigkill",
            "relay_kill",
        ]
    rng = random.Random(20261129)
    data = generate(lines, vendors=25, seed=77)
    logs = ARTIFACTS / "logs" / "chaos"
    logs.mkdir(parents=True, exist_ok=True)
    # Short chunks that take a little while each, so faults land mid-stream.
    stack = Stack(
        chaos_env,
        logs,
        max_chunk_lines=300,
        fault_settle_pause_s=0.05,
        backoff_base_ms=200,
        backoff_max_ms=3000,
        max_attempts=50,
        claim_lease_ms=2000,
        relay_batch=2,
    )
    engine = make_engine(chaos_env.database_url)
    events = EventsQueue(chaos_env.queue_prefix)
    try:
        stack.start_api()
        for name in ("fast-0", "heavy-0", "heavy-1"):
            stack.start_worker(
                "fast_path" if name.startswith("fast") else "compute_heavy", name=name
            )
        stack._spawn("relay", ["relay"])
        operator, producer = stack.operator(), stack.producer()
        for vendor in sorted({d["partition_key"] for d in data.documents + data.earlier}):
            operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/1", CONTRACT)
        earlier = producer.submit(
            json.dumps({"kind": "promo_accrual", "documents": data.earlier}).encode()
        )
        producer.wait(earlier.json()["job_id"], timeout=300)

        response = producer.submit(ndjson(data.documents), content_type="application/x-ndjson")
        assert response.status_code == 202, response.text
        job_id = response.json()["job_id"]
        chaos = Chaos(stack, chaos_env, rng)
        struck_at = chaos.inject(plan, lambda: float(producer.job(job_id)["progress"]))
        # The faults must land while the batch drains, not after it is done.
        assert sum(1 for p in struck_at if p < 1) >= len(plan) // 2, struck_at
        print(f"\nchaos: job progress when each fault struck: {struck_at}")
        job = wait_for(lambda: producer.job(job_id), lambda j: j["state"] == "completed", 600)
        wait_for(lambda: unpublished(engine), lambda n: n == 0, 300)
        delivered = events.drain()
    finally:
        stack.stop()
        events.close()

    L = tables.ledger_entries
    with engine.connect() as conn:
        rows = conn.execute(
            select(L.c.outcome, func.count(), func.sum(L.c.amount), func.sum(L.c.claimed_amount))
            .where(L.c.job_id == job_id)
            .group_by(L.c.outcome)
        ).all()
        doubled = conn.execute(
            select(func.count()).select_from(
                select(L.c.reconciliation_key)
                .group_by(L.c.reconciliation_key, L.c.contract_version)
                .having(func.count() > 1)
                .subquery()
            )
        ).scalar_one()
        committed_events = conn.execute(select(func.count()).select_from(L)).scalar_one()
    engine.dispose()
    by = {r[0]: r for r in rows}
    expect = data.expect
    terminal = sum(job["outcomes"].values())
    lost = lines - terminal
    for fault, count in sorted(chaos.injected.items()):
        print(
            f"\nchaos: {fault:<18} injected {count}, lines {lines}, "
            f"lost {lost}, duplicated {doubled}"
        )
    assert job["lines"] == lines and lost == 0 and doubled == 0
    assert job["outcomes"]["posted"] == expect.posted == by["posted"][1]
    assert job["outcomes"]["disputed"] == expect.disputed == by["disputed"][1]
    assert job["outcomes"]["duplicate"] == expect.duplicate
    assert Decimal(job["amounts"]["posted"]) == expect.amount_posted == by["posted"][2]
    assert Decimal(job["amounts"]["disputed"]) == expect.amount_disputed == by["disputed"][3]
    # Every committed event reached a consumer (deduplicated by event id).
    assert len(delivered) == committed_events


def unpublished(engine: Engine) -> int:
    outbox = tables.outbox
    with engine.connect() as conn:
        return int(
            conn.execute(select(func.count()).where(outbox.c.published_at.is_(None))).scalar_one()
        )


def wait_for(read: Callable[[], object], done: Callable[[object], bool], timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = read()
            if done(value):
                return value
        except Exception:  # the service under test may be mid-fault
            value = None
        assert time.monotonic() < deadline, f"timed out; last seen {value!r}"
        time.sleep(0.5)


class EventsQueue:
    """A consumer's durable queue bound to every settlement event (it survives
    the RabbitMQ restart)."""

    def __init__(self, prefix: str) -> None:
        self.exchange = f"{prefix}.events"
        self.queue = f"{prefix}.chaos-consumer"
        connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        channel = connection.channel()
        channel.exchange_declare(self.exchange, exchange_type="topic", durable=True)
        channel.queue_declare(self.queue, durable=True)
        channel.queue_bind(self.queue, self.exchange, routing_key="settlement.#")
        connection.close()

    def drain(self) -> set[str]:
        connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        channel = connection.channel()
        seen: set[str] = set()
        while True:
            method, properties, _ = channel.basic_get(self.queue, auto_ack=True)
            if method is None:
                break
            seen.add(properties.message_id)
        connection.close()
        return seen

    def close(self) -> None:
        connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        channel = connection.channel()
        channel.queue_delete(self.queue)
        channel.exchange_delete(self.exchange)
        connection.close()
