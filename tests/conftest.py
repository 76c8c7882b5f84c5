from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.infra import PREFIXES, ServiceEnv, isolated_env, leftover_broker_objects


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


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test left a queue or exchange behind on the broker
    (like its databases and Redis keys, each is deleted when its test ends)."""
    if not PREFIXES:
        return
    left = leftover_broker_objects(PREFIXES)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"tests left broker objects behind: {', '.join(left)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
