from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import Engine

from services.worker.actors import build_broker
from services.worker.context import WorkerContext, make_context
from tests.support.infra import REDIS_URL, ServiceEnv, migrate

BACKENDS = ("postgresql", "sqlite")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``both_backends`` (or in a module so marked) run once on the
    PostgreSQL ledger and once on the embedded SQLite one
    (docs/operations.md#connections-and-names): the default a single machine runs on must not rot.
    Others run on PostgreSQL only."""
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker(
        "both_backends"
    ):
        metafunc.parametrize("backend", BACKENDS, indirect=True, scope="module")


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "postgresql"))


@pytest.fixture(scope="module")
def backend_env(
    backend: str, test_env: ServiceEnv, tmp_path_factory: pytest.TempPathFactory
) -> ServiceEnv:
    """The run's services with the ledger on ``backend`` (same broker and Redis prefix)."""
    if backend == "postgresql":
        return test_env
    url = f"sqlite:///{tmp_path_factory.mktemp('ledger') / 'settleq.db'}"
    migrate(url)
    return ServiceEnv(database_url=url, queue_prefix=test_env.queue_prefix)


@pytest.fixture(scope="module")
def ctx(backend_env: ServiceEnv) -> Iterator[WorkerContext]:
    """A worker's context on the real services (the broker is only built, not used)."""
    settings = backend_env.settings()
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
