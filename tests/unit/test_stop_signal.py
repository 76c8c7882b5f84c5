"""A stop signal the kernel hands to another thread than the main one still
stops the process (services/signals.py): seen in CI, a worker that waited with
a plain ``Event.wait()`` sat out its SIGTERM until it was killed."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from services.signals import wait_for_stop


@pytest.mark.regression
def test_a_signal_delivered_to_another_thread_stops_the_wait() -> None:
    stop = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda *_: stop.set())
    parked = threading.Event()
    other = threading.Thread(target=parked.wait, args=(30,), daemon=True)
    other.start()
    # Had the handler never run, this would end the wait after 10 s.
    watchdog = threading.Timer(10, stop.set)
    watchdog.start()
    try:
        assert other.ident is not None
        signal.pthread_kill(other.ident, signal.SIGUSR1)
        started = time.monotonic()
        wait_for_stop(stop)
        assert time.monotonic() - started < 5
    finally:
        watchdog.cancel()
        parked.set()
        signal.signal(signal.SIGUSR1, previous)
