"""The webhooks process's pruner thread (docs/operations.md#retention): every
``EVERY_S`` it deletes, in batches of ``batch`` rows a transaction, delivered
deliveries and their attempts older than ``webhook_retention_days``, failed
ones older than 90 days, events none of whose deliveries remain once they
are as old, and refused X12 files older than ``edi_refusal_retention_days``;
``settleq_webhook_pruned_rows_total{table}`` counts what it deleted. Several
webhooks processes may run it at once: a row is deleted once.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Callable

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from services.webhooks.metrics import WebhookMetrics
from shared.adapters.db.webhooks import retention
from shared.config.settings import Settings

log = logging.getLogger("settleq.webhooks")

EVERY_S = 300.0
BATCH = 500
# A failed delivery is kept longer than a delivered one: it is what a
# producer's developer comes back to read.
FAILED_RETENTION_DAYS = 90
# Batches of one round at most: the next round goes on from there.
ROUND_BATCHES = 200
TABLES = ("webhook_attempts", "webhook_deliveries", "webhook_events", "edi_refusals")


class Pruner:
    def __init__(
        self, settings: Settings, engine: Engine, metrics: WebhookMetrics, batch: int = BATCH
    ) -> None:
        self.settings, self.engine, self.metrics, self.batch = settings, engine, metrics, batch

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(EVERY_S):
            try:
                self.prune(dt.datetime.now(dt.UTC), stop)
            except SQLAlchemyError as exc:
                log.warning("webhooks pruning paused: %s", type(exc).__name__)
            except Exception:
                log.exception("webhooks pruning round failed")

    def prune(self, now: dt.datetime, stop: threading.Event | None = None) -> dict[str, int]:
        """One round: every table pruned to its retention as of ``now``; the
        rows deleted, by table."""
        kept = dt.timedelta(days=self.settings.webhook_retention_days)
        failed = dt.timedelta(days=max(FAILED_RETENTION_DAYS, self.settings.webhook_retention_days))
        refused = dt.timedelta(days=self.settings.edi_refusal_retention_days)
        steps: list[tuple[Callable[[], dict[str, int]], str]] = [
            (
                lambda: retention.deliveries(self.engine, now - kept, now - failed, self.batch),
                "webhook_deliveries",
            ),
            (lambda: retention.events(self.engine, now - kept, self.batch), "webhook_events"),
            (lambda: retention.edi_refused(self.engine, now - refused, self.batch), "edi_refusals"),
        ]
        total = dict.fromkeys(TABLES, 0)
        for step, main in steps:
            for _ in range(ROUND_BATCHES):
                done = step()
                for table, n in done.items():
                    total[table] += n
                    if n:
                        self.metrics.pruned.labels(table).inc(n)
                if done[main] < self.batch or (stop is not None and stop.is_set()):
                    break
        if any(total.values()):
            log.info("webhooks pruned old rows", extra={"pruned": total})
        return total
