"""The webhooks process's scheduler thread (docs/architecture.md#webhooks):
every ``webhook_poll_s`` it hands every delivery that is due to the
``<prefix>.webhooks`` queue, at most two in flight per endpoint. Deliveries
are made when the relay fans an event out (services/relay/fanout.py). Several
webhooks processes may run: each takes what the others have not locked.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable

from dramatiq.errors import DramatiqError
from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from services.rounds import run_rounds
from services.webhooks.delivery import LEASE
from shared.adapters.db.webhooks import deliveries
from shared.config.settings import Settings

log = logging.getLogger("settleq.webhooks")

Send = Callable[[str, int], None]
BATCH = 200


class Scheduler:
    def __init__(self, settings: Settings, engine: Engine, send: Send) -> None:
        self.settings, self.engine, self.send = settings, engine, send
        # Set when an attempt is recorded: its endpoint may have another due,
        # held back by its two in flight, which need not wait a whole poll.
        self.wake = threading.Event()

    def run(self, stop: threading.Event) -> None:
        def idle() -> None:
            self.wake.wait(self.settings.webhook_poll_s)
            self.wake.clear()

        transient = (SQLAlchemyError, DramatiqError)
        run_rounds(self.tick, stop, idle, log, "webhooks", transient)

    def tick(self) -> bool:
        """One round; whether there may be more to do at once."""
        now = dt.datetime.now(dt.UTC)
        # New deliveries are due at once, handed out with the others: at most
        # two of an endpoint's in flight, so hanging endpoints wait alone.
        with self.engine.begin() as conn:
            due = deliveries.hand_out_due(conn, now, LEASE, BATCH)
        for delivery_id, attempts in due:
            self.send(delivery_id, attempts)
        return len(due) == BATCH
