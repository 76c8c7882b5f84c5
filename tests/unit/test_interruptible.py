"""Ctrl-C during a command's wait stops it at a safe point (issue 42, item 18):
a KeyboardInterrupt raised wherever the main thread was, inside pika mid-frame
or Rich's live display, left `settleq events tail` and `settleq submit --wait`
waiting forever (seen under load, where the signal lands there more often)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from services.commands.options import interruptible, wait_with_progress

pytestmark = pytest.mark.regression


@pytest.fixture(autouse=True)
def sigint_handled() -> Iterator[None]:
    """Python's own handler for the test, whatever this process inherited (a
    run started in the background ignores SIGINT); put back after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_first_ctrl_c_sets_the_event_and_a_second_raises() -> None:
    with interruptible() as stop:
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.wait(5)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
            stop.wait(5)  # the signal is handled at the next bytecode
            signal.pause()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


class ClientInterruptedMidCall:
    """A job read during which the user presses Ctrl-C."""

    def __init__(self) -> None:
        self.calls = 0
        self.finished = 0

    def job(self, job_id: str) -> dict[str, Any]:
        self.calls += 1
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # the rest of the call: bytecodes the signal could land on
            pass
        self.finished += 1
        return {"state": "processing", "progress": 0.5, "chunks": {"done": 1, "total": 2}}


def test_ctrl_c_during_a_poll_lets_the_poll_finish_then_stops_the_wait() -> None:
    client = ClientInterruptedMidCall()
    with pytest.raises(KeyboardInterrupt):
        wait_with_progress(client, "job-1", timeout=60)
    assert client.calls == client.finished == 1
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_ignored_ctrl_c_stays_ignored() -> None:
    """A command started with SIGINT ignored (in the background) is not made to
    hear it, as Python leaves it ignored at start."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    with interruptible() as stop:
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGINT)
        assert not stop.wait(0.2)
