"""The dispute queue's gauges on the API's ``/metrics`` (docs/operations.md#metrics).

- ``settleq_disputes_open{kind}``: open disputes;
- ``settleq_disputes_open_variance{kind}``: the money at stake in them, the sum
  of ``abs(claimed - model)``;
- ``settleq_disputes_oldest_open_age_seconds``: how long the oldest open
  dispute has waited (0 when none is open), for the 14-day alert.

Read from the ledger when Prometheus scrapes, kept for ``refresh_s`` (a scrape
of every API process, or a few scrapers, costs the database one reading), and
every kind the pipeline settles is exported, 0 when none of its disputes is
open: a series that vanishes would read as "no data", not as "nothing open".

A Prometheus sample is a float: the variance is converted here, for the
metric only, and never read back into money code.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import Engine

from shared.adapters.db.disputes import queue as disputes
from shared.domain.kinds import KINDS

DISPUTES_OPEN = "settleq_disputes_open"
DISPUTES_OPEN_VARIANCE = "settleq_disputes_open_variance"
DISPUTES_OLDEST_AGE = "settleq_disputes_oldest_open_age_seconds"
DISPUTE_METRICS = (DISPUTES_OPEN, DISPUTES_OPEN_VARIANCE, DISPUTES_OLDEST_AGE)


@dataclass(frozen=True)
class DisputeReading:
    open_by_kind: dict[str, tuple[int, Decimal]]  # kind -> (open disputes, abs variance sum)
    oldest_open_at: dt.datetime | None

    def oldest_age_s(self, now: dt.datetime) -> float:
        if self.oldest_open_at is None:
            return 0.0
        opened = self.oldest_open_at
        if opened.tzinfo is None:  # SQLite hands back naive UTC
            opened = opened.replace(tzinfo=dt.UTC)
        return max(0.0, (now - opened).total_seconds())

    def metrics(self, now: dt.datetime) -> Iterator[Metric]:
        count = GaugeMetricFamily(DISPUTES_OPEN, "Open disputes, by kind", labels=["kind"])
        at_stake = GaugeMetricFamily(
            DISPUTES_OPEN_VARIANCE,
            "Money at stake in open disputes, by kind: the sum of abs(claimed - model) "
            "(a float for Prometheus; the ledger's exact figures are GET /v1/disputes/stats)",
            labels=["kind"],
        )
        for kind in sorted(set(KINDS) | set(self.open_by_kind)):
            n, variance = self.open_by_kind.get(kind, (0, Decimal(0)))
            count.add_metric([kind], n)
            at_stake.add_metric([kind], float(variance))  # the metric's only use of it
        yield count
        yield at_stake
        yield GaugeMetricFamily(
            DISPUTES_OLDEST_AGE,
            "Seconds the oldest open dispute has waited for a decision (0: none open)",
            value=self.oldest_age_s(now),
        )


def reading_of(stats: disputes.Stats) -> DisputeReading:
    """The gauges from one reading of the queue: its open totals and its oldest."""
    open_by_kind = {t.kind: (t.count, t.abs_variance) for t in stats.totals if t.status == "open"}
    return DisputeReading(open_by_kind, stats.oldest_open_at)


class DisputeGauges:
    """The last reading, renewed when it is older than ``refresh_s``."""

    def __init__(self, refresh_s: float = 5.0) -> None:
        self._refresh_s = refresh_s
        self._lock = threading.Lock()
        self._read_at = -float("inf")
        self._reading: DisputeReading | None = None

    def reading(self, engine: Engine) -> DisputeReading:
        """Raises the database's error when it cannot be read (nothing is cached then)."""
        with self._lock:
            if self._reading is None or time.monotonic() - self._read_at >= self._refresh_s:
                self._reading = reading_of(disputes.stats(engine))
                self._read_at = time.monotonic()
            return self._reading
