from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.infra import ServiceEnv, isolated_env


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--soak",
        action="store_true",
        help="chaos suite: 500,000 lines through 27 faults of 9 classes",
    )
    parser.addoption(
        "--soak-lines",
        type=int,
        default=None,
        help=(
            "chaos suite: lines of the soak run (default 500,000; fewer to develop it:"
            " below ~200,000 the batch drains before its faults are done, which fails)"
        ),
    )


@pytest.fixture(scope="session")
def test_env() -> Iterator[ServiceEnv]:
    """A PostgreSQL database, queue prefix and Redis prefix for this test run."""
    with isolated_env("s") as env:
        yield env
