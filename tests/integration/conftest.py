from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import Engine

from services.worker.actors import build_broker
from services.worker.context import WorkerContext, make_context
from tests.support.infra import REDIS_URL, ServiceEnv


@pytest.fixture(scope="module")
def ctx(test_env: ServiceEnv) -> Iterator[WorkerContext]:
    """A worker's context on the real services (the broker is only built, not used)."""
    settings = test_env.settings()
    broker = build_broker(settings)
    context = make_context(settings, broker)
    yield context
    context.engine.dispose()
    broker.close()


@pytest.fixture(scope="module")
def engine(ctx: WorkerContext) -> Engine:
    return ctx.engine


@pytest.fixture
def redis_client() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(REDIS_URL)
    yield client
    client.close()
