from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect
from sqlalchemy import Engine

from shared.adapters.db.engine import make_engine
from tests.support.infra import ServiceEnv, isolated_env
from tests.support.stack import Stack

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"

# A browser test waits for what the page shows, never for a time. Playwright
# gives up on an expectation after 5 s by default; beside other work (CI with
# two busy processes, load 10 on two cores) the dispute queue's rows once took
# longer to fetch and draw, and the test failed with the page still loading.
expect.set_options(timeout=30_000)


@pytest.fixture(scope="module")
def stack_env() -> Iterator[ServiceEnv]:
    """Each e2e module gets its own database and queue prefix."""
    with isolated_env("e") as env:
        yield env


@pytest.fixture(scope="module")
def engine(stack_env: ServiceEnv) -> Iterator[Engine]:
    """The module's ledger database, for checking what the stack wrote."""
    engine = make_engine(stack_env.database_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def stack(stack_env: ServiceEnv, request: pytest.FixtureRequest) -> Iterator[Stack]:
    """The stack, with the module's ``STACK_SETTINGS`` as setting overrides."""
    logs = ARTIFACTS / "logs" / request.module.__name__.rsplit(".", 1)[-1]
    logs.mkdir(parents=True, exist_ok=True)
    running = Stack(
        stack_env,
        logs,
        **getattr(request.module, "STACK_SETTINGS", {}),
    )
    try:
        yield running.start()
    finally:
        running.stop()
