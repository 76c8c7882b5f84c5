"""Waiting for a stop signal in a process's main thread."""

from __future__ import annotations

import threading

_SLICE_S = 0.5


def wait_for_stop(stop: threading.Event) -> None:
    """Return once ``stop`` is set (by a SIGTERM or SIGINT handler).

    Waited in slices: the kernel may hand the signal to any of the process's
    threads, and then nothing wakes a main thread blocked in an endless wait
    to run the handler (a worker once sat out its stop this way, and was
    killed). Waking every slice lets Python run the handler that is pending."""
    while not stop.wait(_SLICE_S):
        pass
