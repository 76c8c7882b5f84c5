"""The chaos suite's server faults act on its private PostgreSQL and Redis, never
on the machine's shared ones (the FLUSHALL once flushed every database of the
machine's Redis, other test runs' keys included)."""

from __future__ import annotations

import random
import uuid

import psycopg
import pytest
import redis

from tests.e2e.conftest import ARTIFACTS
from tests.support.faults import Chaos
from tests.support.infra import PG_ADMIN, REDIS_URL
from tests.support.private_services import private_env
from tests.support.stack import Stack

SERVER_FAULTS = (
    "redis_flushall",
    "redis_restart",
    "postgres_refuses",
    "postgres_restart",
    "postgres_crash",
)


def started_at(url: str) -> object:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SELECT pg_postmaster_start_time()").fetchone()
    assert row is not None
    return row[0]


@pytest.mark.regression
def test_server_faults_touch_only_the_private_servers() -> None:
    shared = redis.Redis.from_url(REDIS_URL)
    canary = f"chaos-canary:{uuid.uuid4().hex}"
    shared.set(canary, "alive", ex=120)
    shared_started = started_at(PG_ADMIN)
    try:
        with private_env("isolation") as services:
            private = services.redis.client()
            private.set("doomed", 1)
            private_started = started_at(services.postgres.admin_url)
            chaos = Chaos(Stack(services.env, ARTIFACTS), services, random.Random(1))
            for fault in SERVER_FAULTS:
                getattr(chaos, fault)()
            services.postgres.wait_ready()
            assert private.get("doomed") is None  # the faults did strike the private servers
            assert started_at(services.postgres.admin_url) != private_started
            private.close()
        assert shared.get(canary) == b"alive"
        assert started_at(PG_ADMIN) == shared_started
    finally:
        shared.delete(canary)
        shared.close()
