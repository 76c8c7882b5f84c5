"""The supervisor's process loop with small real children (services/supervisor):
restarts logged with the exit, counted in the counts file, giving up, and the
grace on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.supervisor.counts import read_counts
from services.supervisor.policy import RestartPolicy
from services.supervisor.processes import ChildSpec, Supervisor

pytestmark = pytest.mark.regression  # issue 12 item 1

FAST = RestartPolicy(backoff_initial_s=0.05, backoff_max_s=0.2)


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


@pytest.fixture
def handlers() -> Iterator[None]:
    """The supervisor installs SIGTERM/SIGINT handlers in this process: put them back."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def sigterm_me_in(seconds: float) -> None:
    threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGTERM)).start()


@pytest.mark.usefixtures("handlers")
def test_a_child_that_keeps_failing_is_restarted_counted_then_given_up_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    counts = tmp_path / "restarts.json"
    specs = [
        ChildSpec("broken", "broken", python("import sys; sys.exit(3)")),
        ChildSpec("sleeper", "sleeper", python("import time; time.sleep(60)")),
    ]
    with caplog.at_level(logging.INFO, logger="settleq.supervisor"):
        code = Supervisor(specs, FAST, grace_s=5, counts_file=counts).run()
    assert code == 1
    # Four restarts, then the fifth death within the window gives up.
    assert read_counts(counts) == {"broken": 4, "sleeper": 0}
    exits = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.__dict__["restart_count"] for r in exits] == [1, 2, 3, 4]
    assert {r.__dict__["exit_code"] for r in exits} == {3}
    assert [r.__dict__["delay_s"] for r in exits] == [0.05, 0.1, 0.2, 0.2]
    [gave_up] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert gave_up.__dict__["component"] == "broken" and gave_up.__dict__["exit_code"] == 3


@pytest.mark.usefixtures("handlers")
def test_sigterm_stops_every_child_and_exits_0() -> None:
    specs = [
        ChildSpec(f"sleeper-{i}", "sleeper", python("import time; time.sleep(60)"))
        for i in range(2)
    ]
    sigterm_me_in(0.5)
    assert Supervisor(specs, FAST, grace_s=5).run() == 0


@pytest.mark.usefixtures("handlers")
def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_and_the_exit_is_1(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(60)"
    specs = [
        ChildSpec("stubborn", "stubborn", python(stubborn)),
        ChildSpec("sleeper", "sleeper", python("import time; time.sleep(60)")),
    ]
    sigterm_me_in(1.0)  # the children have set their handlers by then
    supervisor = Supervisor(specs, FAST, grace_s=1)
    with caplog.at_level(logging.ERROR, logger="settleq.supervisor"):
        assert supervisor.run() == 1
    assert [r.__dict__["child"] for r in caplog.records] == ["stubborn"]
    assert all(c.process is not None and c.process.poll() is not None for c in supervisor.children)
