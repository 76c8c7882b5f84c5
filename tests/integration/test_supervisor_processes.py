"""The supervisor's process loop with small real children (services/supervisor):
restarts logged with the exit, counted in the counts file, a child that keeps
dying reported crash-looping (and no longer once it stays up) while the others
run on, and the grace on SIGTERM."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from services.supervisor.counts import Counts, read_counts
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


class CountsWatcher:
    """Reads the counts file every 20 ms on a thread; remembers each distinct
    crash-looping set it saw, in order."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: list[frozenset[str]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> CountsWatcher:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            counts = read_counts(self.path)
            if counts is not None and (not self.seen or self.seen[-1] != counts.crash_looping):
                self.seen.append(counts.crash_looping)


@pytest.mark.usefixtures("handlers")
def test_a_child_that_keeps_failing_is_restarted_counted_and_crash_looping_never_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    counts = tmp_path / "restarts.json"
    specs = [
        ChildSpec("broken", "broken", python("import sys; sys.exit(3)")),
        ChildSpec("sleeper", "sleeper", python("import time; time.sleep(60)")),
    ]
    supervisor = Supervisor(specs, FAST, grace_s=5, counts_file=counts)
    # Long past the sixth death (eight starts of a Python child take ~3 s on a
    # loaded machine): the loop goes on until then.
    sigterm_me_in(6.0)
    with caplog.at_level(logging.INFO, logger="settleq.supervisor"):
        code = supervisor.run()
    assert code == 0
    published = read_counts(counts)
    assert published is not None and published.crash_looping == {"broken"}
    assert published.restarts["sleeper"] == 0 and published.restarts["broken"] >= 8
    exits = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert [r.__dict__["restart_count"] for r in exits[:7]] == [1, 2, 3, 4, 5, 6, 7]
    assert {r.__dict__["exit_code"] for r in exits} == {3}
    # Doubling, then the cap from the sixth death on (crash-looping).
    assert [r.__dict__["delay_s"] for r in exits[:7]] == [0.05, 0.1, 0.2, 0.2, 0.2, 0.2, 0.2]
    [looping] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert looping.__dict__["component"] == "broken" and looping.__dict__["deaths"] == 6
    assert "crash-looping" in looping.getMessage()
    assert looping.__dict__["restart_count"] == 6
    [sleeper] = [c for c in supervisor.children if c.spec.name == "sleeper"]
    assert sleeper.process is not None and sleeper.process.returncode == -signal.SIGTERM


@pytest.mark.usefixtures("handlers")
def test_a_crash_looping_child_that_stays_up_is_no_longer_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    counts = tmp_path / "restarts.json"
    starts = tmp_path / "starts"
    # Dies at once on its first six starts, then stays up.
    flaky = (
        "import pathlib, sys, time\n"
        f"p = pathlib.Path({str(starts)!r})\n"
        "n = int(p.read_text()) if p.exists() else 0\n"
        "p.write_text(str(n + 1))\n"
        "sys.exit(3) if n < 6 else time.sleep(60)\n"
    )
    specs = [ChildSpec("flaky", "flaky", python(flaky))]
    policy = RestartPolicy(backoff_initial_s=0.05, backoff_max_s=0.2, reset_after_s=1.0)
    sigterm_me_in(5.0)
    with (
        caplog.at_level(logging.INFO, logger="settleq.supervisor"),
        CountsWatcher(counts) as watcher,
    ):
        started = time.monotonic()
        assert Supervisor(specs, policy, grace_s=5, counts_file=counts).run() == 0
    assert time.monotonic() - started >= 4.5  # only the SIGTERM stopped it
    assert watcher.seen == [frozenset(), frozenset({"flaky"}), frozenset()]
    assert read_counts(counts) == Counts({"flaky": 6}, frozenset())
    assert [r.getMessage() for r in caplog.records if "no longer" in r.getMessage()] == [
        "flaky stayed up 1 s: no longer crash-looping"
    ]


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
