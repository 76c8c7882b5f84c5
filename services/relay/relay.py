"""``settleq relay``: the sweeper of the one outbox
(docs/architecture.md#events-at-commit-and-the-relay): its outcome units'
events published to the broker when their committing process did not, and
its webhook events fanned out to endpoints (fanout.py, a thread of its own).

The process that commits a unit publishes its events itself, right after the
commit (shared/adapters/rabbitmq/publisher.py). The relay publishes what is left:
outbox rows unpublished for longer than ``relay_grace_s`` (a process that
died between its commit and its publish, a broker that was down), polled every
``relay_poll_s``. They are read in commit order, their events made from their
ledger rows, published with publisher confirms to the topic exchange
``<prefix>.events`` as the same messages the committing process would have
sent (same bodies, ``message_id``s and headers), and marked published in the
same transaction that locked them. A relay killed mid-batch leaves its units
unmarked, so the same messages are published again: at least once, and a
consumer deduplicates by event id.

One broker connection's publishing is session.py (publisher confirms counted
in confirms.py) and its log event publish_log.py.
"""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Engine

from services.relay.fanout import FanOut
from services.relay.session import Session
from shared.adapters.db.engine import make_engine
from shared.adapters.db.periods import dated
from shared.adapters.rabbitmq.publisher import exchange_name
from shared.config.settings import Settings

log = logging.getLogger("settleq.relay")


class Relay:
    def __init__(self, settings: Settings, engine: Engine) -> None:
        self.settings = settings
        self.engine = engine

    def run(self, stop: threading.Event) -> None:
        node = 0  # which of the broker URL's nodes the next session connects to
        while not stop.is_set():
            failure = Session(self.settings, self.engine, stop, node).run()
            if failure is not None and not stop.is_set():
                # Unmarked events stay in the outbox; try again after a pause,
                # on the cluster's next node (its first when there is one).
                log.warning("relay paused: %s", failure)
                node += 1
                stop.wait(1.0)


def run_relay(settings: Settings) -> None:
    import signal

    engine = make_engine(settings.database_url, pool_size=3, component="settleq-relay")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    log.info(
        "relay publishing to %s what is unpublished after %.1f s, and fanning webhook events out",
        exchange_name(settings.queue_prefix),
        settings.relay_grace_s,
    )
    started = time.monotonic()
    # The relay books nothing, but runs as long as the API: a cutter in it
    # makes the period's cut at its end when no API runs.
    cutter = dated.start(engine, settings.calendar(), settings.period_tz, settings.close_wait_s)
    fanning = threading.Thread(
        target=FanOut(settings, engine).run, args=(stop,), name="fan-out", daemon=True
    )
    fanning.start()
    Relay(settings, engine).run(stop)
    fanning.join(timeout=10)
    cutter.close()
    engine.dispose()
    log.info("relay stopped after %.0f s", time.monotonic() - started)
