"""A background thread's loop of rounds (the relay's fan-out, the webhooks
scheduler): a round that fails on a transient error pauses a second; one
that fails on a bug is logged and the next round comes, for a thread that
ends while its process lives on does its work no more."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


def run_rounds(
    tick: Callable[[], bool],
    stop: threading.Event,
    idle: Callable[[], None],
    log: logging.Logger,
    name: str,
    transient: tuple[type[BaseException], ...],
) -> None:
    """``tick()`` until ``stop``: at once again when it says there is more,
    else after ``idle()``."""
    while not stop.is_set():
        try:
            busy = tick()
        except transient as exc:
            log.warning("%s paused: %s", name, type(exc).__name__)
            busy = False
            stop.wait(1.0)
        except Exception:
            log.exception("%s round failed", name)
            busy = False
            stop.wait(1.0)
        if not busy:
            idle()
