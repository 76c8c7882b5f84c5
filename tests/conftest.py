from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.infra import ServiceEnv, isolated_env


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak", action="store_true", help="chaos suite: 200,000 lines and 10+ faults"
    )


@pytest.fixture(scope="session")
def test_env() -> Iterator[ServiceEnv]:
    """A PostgreSQL database, queue prefix and Redis prefix for this test run."""
    with isolated_env("s") as env:
        yield env
