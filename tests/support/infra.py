"""Real services for tests, each test run isolated: its own PostgreSQL
database, its own RabbitMQ queue prefix, its own Redis key prefix on a Redis
database number kept for tests. Everything is removed at the end.

A service that is down fails the run: tests never silently skip it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pika
import psycopg
import redis

from shared.adapters.db.engine import make_engine
from shared.adapters.db.migrate import ensure_internal_key, upgrade
from shared.config.settings import ProducerKey, Settings
from shared.domain.pipeline.queues import QUEUE_TYPES, every_queue, webhook_queues
from shared.domain.signing import token_digest

PG_HOST = os.environ.get("SETTLEQ_TEST_PG_HOST", "127.0.0.1")
PG_ADMIN = f"postgresql://postgres@{PG_HOST}:5432/postgres"
# A Redis database per pytest-xdist worker (gw0 -> 9, gw1 -> 10, ...): a test that
# flushes its database then flushes no other worker's keys.
_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
REDIS_URL = os.environ.get("SETTLEQ_TEST_REDIS_URL", f"redis://127.0.0.1:6379/{9 + _WORKER}")
BROKER_URL = os.environ.get("SETTLEQ_TEST_BROKER_URL", "amqp://guest:guest@127.0.0.1:5672/")

PRODUCER_ID = "acme"
PRODUCER_SECRET = "test-secret-acme-0001"
SCOPED_ID = "scoped"
SCOPED_SECRET = "test-secret-scoped-0002"
SCOPED_PARTITIONS = ["VENDOR-0000", "VENDOR-0001"]
VIEWER_TOKEN = "viewer-token-0003"
OPERATOR_TOKEN = "operator-token-0004"


def check_services() -> None:
    problems = []
    try:
        psycopg.connect(PG_ADMIN, connect_timeout=3).close()
    except Exception as exc:
        problems.append(f"PostgreSQL at {PG_HOST}:5432: {exc}")
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=3).ping()
    except Exception as exc:
        problems.append(f"Redis at {REDIS_URL}: {exc}")
    try:
        pika.BlockingConnection(pika.URLParameters(BROKER_URL)).close()
    except Exception as exc:
        problems.append(f"RabbitMQ at {BROKER_URL}: {exc}")
    if problems:
        raise RuntimeError(
            "test services are down (bash .ci/run starts them): " + "; ".join(problems)
        )


def create_database(name: str, admin: str = PG_ADMIN) -> str:
    """Create ``name`` on the server of ``admin`` (the machine's by default): its URL."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{admin.rsplit('/', 1)[0]}/{name}"


def drop_database(name: str, admin: str = PG_ADMIN) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,)
        )
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')


def migrate(url: str) -> None:
    upgrade(url)
    engine = make_engine(url)
    ensure_internal_key(engine)
    engine.dispose()


def queue_names(prefix: str) -> list[str]:
    """Every queue a stack of either queue type declares under ``prefix``."""
    declared = [name for kind in QUEUE_TYPES for name in every_queue(prefix, kind)]
    return declared + webhook_queues(prefix)


# Every queue prefix this run handed out: at the end of the session nothing
# named under one may be left on the broker (tests/conftest.py checks).
PREFIXES: set[str] = set()
# The consumer queues tests bind to a stack's events exchange.
CONSUMER_QUEUES = ("test-consumer", "chaos-consumer")


def new_prefix() -> str:
    """``t<pid>z<random>``: the process that made it is named in every database,
    queue and exchange under it, so that what an interrupted run left behind
    can be told from what a live run uses (``sweep_leftovers``)."""
    prefix = f"t{os.getpid():x}z{uuid.uuid4().hex[:8]}"
    PREFIXES.add(prefix)
    return prefix


def _owner_gone(name: str) -> bool:
    """Whether ``name`` (a prefix, or a database named after one) was made by a
    process that no longer runs. Names of another form are never judged."""
    match = re.search(r"(?:^|_)t?([0-9a-f]{1,8})z[0-9a-f]{8}(?:$|\.)", name)
    if match is None:
        return False
    try:
        os.kill(int(match.group(1), 16), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def sweep_leftovers() -> list[str]:
    """Drop the test databases and delete the queues and exchanges that a run
    which was interrupted left behind (their maker is dead); what a live run
    (another checkout's, a developer's) uses is left alone. What was removed."""
    removed = []
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        names = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'settleq\\_test\\_%'"
        ).fetchall()
    for (name,) in names:
        if _owner_gone(name):
            drop_database(name)
            removed.append(f"database {name}")
    for what in ("queue", "exchange"):
        listing = subprocess.run(
            ["rabbitmqctl", "-q", f"list_{what}s", "name"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        stale = [
            n
            for n in listing.stdout.split()
            if n.startswith("t") and _owner_gone(n.split(".", 1)[0])
        ]
        if not stale:
            continue
        connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
        try:
            for name in stale:
                channel = connection.channel()
                if what == "queue":
                    channel.queue_delete(queue=name)
                else:
                    channel.exchange_delete(exchange=name)
                channel.close()
                removed.append(f"{what} {name}")
        finally:
            connection.close()
    return removed


def delete_queues(prefix: str) -> None:
    """Delete what a stack under ``prefix`` declares (its queues and events
    exchange) and the consumer queues tests bind to it."""
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        for name in [*queue_names(prefix), *(f"{prefix}.{q}" for q in CONSUMER_QUEUES)]:
            channel = connection.channel()
            channel.queue_delete(queue=name)
            channel.close()
        channel = connection.channel()
        channel.exchange_delete(exchange=f"{prefix}.events")
        channel.close()
    finally:
        connection.close()


def leftover_broker_objects(prefixes: Collection[str]) -> list[str]:
    """Queues and exchanges on the broker named under one of ``prefixes``."""
    found = []
    for what in ("list_queues", "list_exchanges"):
        listing = subprocess.run(
            ["rabbitmqctl", "-q", what, "name"], capture_output=True, text=True, timeout=60
        )
        found += [
            f"{what.removeprefix('list_')[:-1]} {name}"
            for name in listing.stdout.split()
            if name.split(".", 1)[0] in prefixes
        ]
    return sorted(found)


def queue_depth(prefix: str, family: str) -> int:
    """Ready messages in a queue (0 if it does not exist)."""
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        channel = connection.channel()
        try:
            frame = channel.queue_declare(queue=f"{prefix}.{family}", passive=True)
        except pika.exceptions.ChannelClosedByBroker:
            return 0
        return int(frame.method.message_count)
    finally:
        if connection.is_open:
            connection.close()


def delete_redis_keys(prefix: str) -> None:
    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(match=f"{prefix}:*", count=1000))
    for start in range(0, len(keys), 1000):
        client.delete(*keys[start : start + 1000])
    client.close()


@dataclass
class ServiceEnv:
    """One isolated set of names on the real services."""

    database_url: str
    queue_prefix: str
    overrides: dict[str, Any] = field(default_factory=dict)

    def settings(self, **overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": self.database_url,
            "broker_url": BROKER_URL,
            "redis_url": REDIS_URL,
            "queue_prefix": self.queue_prefix,
            "producer_keys": [
                ProducerKey(key_id=PRODUCER_ID, secrets=[PRODUCER_SECRET], partitions=["*"]),
                ProducerKey(
                    key_id=SCOPED_ID, secrets=[SCOPED_SECRET], partitions=SCOPED_PARTITIONS
                ),
            ],
            "viewer_tokens": [token_digest(VIEWER_TOKEN)],
            "operator_tokens": [token_digest(OPERATOR_TOKEN)],
            "backoff_base_ms": 100,
            "backoff_max_ms": 2000,
            "claim_lease_ms": 3000,
            "worker_threads": 2,
            # Every test of a session registers its endpoints with the same key.
            "webhook_max_endpoints": 1000,
            # Periods end when a test closes them; dated ones are tested on their own.
            "period": "manual",
        }
        values.update(self.overrides)
        values.update(overrides)
        return Settings(**values)

    def environ(self, omit: Collection[str] = (), **overrides: Any) -> dict[str, str]:
        """The same settings as ``SETTLEQ_*`` variables, for subprocesses; the
        settings named in ``omit`` are left unset (their defaults apply)."""
        settings = self.settings(**overrides)
        env = {k: v for k, v in os.environ.items() if not k.startswith("SETTLEQ_")}
        for name, value in settings.model_dump().items():
            if value is None or name in omit:
                continue
            if name == "producer_keys":
                text = json.dumps(value)
            elif name in ("viewer_tokens", "operator_tokens"):
                text = ",".join(value)
            else:
                text = str(value)
            env[f"SETTLEQ_{name.upper()}"] = text
        return env


@contextmanager
def isolated_env(tag: str, admin: str = PG_ADMIN) -> Iterator[ServiceEnv]:
    """A database of its own (on the server of ``admin``, the machine's by
    default), queues and Redis keys under a prefix of its own."""
    check_services()
    prefix = new_prefix()
    db_name = f"settleq_test_{tag}_{prefix[1:]}"
    url = create_database(db_name, admin)
    try:
        migrate(url)
        yield ServiceEnv(database_url=url, queue_prefix=prefix)
    finally:
        drop_database(db_name, admin)
        delete_queues(prefix)
        delete_redis_keys(prefix)


@contextmanager
def isolated_sqlite_env(directory: Path) -> Iterator[ServiceEnv]:
    """Like ``isolated_env``, with the ledger the SQLite file ``directory/settleq.db``
    (not created: the default ``sqlite:///./settleq.db`` of a process run there)."""
    check_services()
    prefix = new_prefix()
    try:
        yield ServiceEnv(database_url=f"sqlite:///{directory / 'settleq.db'}", queue_prefix=prefix)
    finally:
        delete_queues(prefix)
        delete_redis_keys(prefix)
