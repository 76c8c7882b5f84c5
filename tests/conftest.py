from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.infra import ServiceEnv, isolated_env


@pytest.fixture(scope="session")
def test_env() -> Iterator[ServiceEnv]:
    """A PostgreSQL database, queue prefix and Redis prefix for this test run."""
    with isolated_env("s") as env:
        yield env
