from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import settings

from tests.support.infra import (
    PREFIXES,
    ServiceEnv,
    isolated_env,
    leftover_broker_objects,
    sweep_leftovers,
)

# No hypothesis example is timed: on a loaded machine an example's time says
# nothing about the code (a 1 s deadline failed CI at random). A test that sets
# its own settings keeps this default unless it names a deadline, which none may.
settings.register_profile("settleq", deadline=None)
settings.load_profile("settleq")


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


def pytest_sessionstart(session: pytest.Session) -> None:
    """Before anything runs (in the controller, once): remove what an earlier,
    interrupted run left on the services."""
    if hasattr(session.config, "workerinput"):  # an xdist worker
        return
    try:
        removed = sweep_leftovers()
    except Exception as exc:  # a service down: the tests that need it say so
        print(f"\nleftovers of interrupted runs not swept: {exc}")
        return
    if removed:
        print(f"\nremoved {len(removed)} leftovers of interrupted test runs")


@pytest.fixture(scope="session")
def test_env() -> Iterator[ServiceEnv]:
    """A PostgreSQL database, queue prefix and Redis prefix for this test run."""
    with isolated_env("s") as env:
        yield env


# The prefixes pytest-xdist's workers handed out, gathered by the controller.
_WORKER_PREFIXES: set[str] = set()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """An xdist worker is done: keep the prefixes it handed out (its ``workeroutput``)."""
    _WORKER_PREFIXES.update(getattr(node, "workeroutput", {}).get("prefixes", ()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a test left a queue or exchange behind on the broker
    (like its databases and Redis keys, each is deleted when its test ends).
    Under pytest-xdist each worker hands its prefixes to the controller, which
    checks them all once every worker is done."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker
        workeroutput["prefixes"] = sorted(PREFIXES)
        return
    prefixes = PREFIXES | _WORKER_PREFIXES
    if not prefixes:
        return
    left = leftover_broker_objects(prefixes)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.ensure_newline()
            reporter.write_line(f"tests left broker objects behind: {', '.join(left)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
