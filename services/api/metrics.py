"""The API process's Prometheus metrics (``GET /metrics``, viewer token).

- ``settleq_http_request_duration_seconds{method, route, status}``: labelled by
  route template (``/v1/jobs/{job_id}``), never the raw path, so a client
  cannot grow the series without bound.
- ``settleq_queue_depth{queue, family}`` and
  ``settleq_queue_oldest_message_age_seconds{queue, family}``: read at scrape
  time through :mod:`services.api.queue_stats` (the reading backpressure and
  the dashboard use).
- ``settleq_dead_letters_stored{reason, status}``: dead letters in the
  database, by reason and status.
- ``settleq_disputes_open{kind}``, ``settleq_disputes_open_variance{kind}`` and
  ``settleq_disputes_oldest_open_age_seconds``: the dispute queue, read at
  scrape time through :mod:`services.api.disputes.metrics`.
- ``settleq_webhook_deliveries{status}``, ``settleq_webhook_oldest_undelivered_age_seconds``
  and ``settleq_webhook_endpoints{status, reason}``: what producers have not
  heard yet, and endpoints disabled (services/webhooks/metrics.py counts the
  attempts where they are made).
- ``settleq_edi_files_refused_total{partner}``: X12 files refused for their
  content, by profiled trading partner (``Q/ID``), counted from the stored
  refusals at scrape time (never deleted: the count only grows).
- ``settleq_ledger_feed_held_back_seconds``: how long the ledger feed has held
  back a committed row behind a transaction still open in the database
  (docs/architecture.md#the-ledger-feed); 0 when it holds back none.
- ``settleq_ledger_feed_waiting``: long polls of the ledger feed waiting on
  this process now (its one watch of the feed's end serves them all).
- ``settleq_stats_source_up{source}``: 0 when the broker or the database could
  not be read for this scrape (their series are then left out, not zeroed).
- ``settleq_process_restarts_total{component}``: restarts by the supervisor of
  ``settleq up``, read at scrape time from the counts file it keeps (the API is
  one of its children: a count in this process would restart with it). No
  supervisor, no series.
- ``settleq_process_crash_looping{component}``: 1 while the supervisor reports
  the component crash-looping (services/supervisor/policy.py), 0 otherwise;
  from the same file, for the same reason.

Lines by kind and outcome, dead letters as they happen and settle latency are
counted where they happen: in the workers (:mod:`services.worker.metrics`).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from prometheus_client import (
    CollectorRegistry,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.disputes.metrics import DISPUTE_METRICS, DisputeGauges
from services.api.queue_stats import QueueReading
from services.supervisor.counts import read_counts
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db.edi import partners as partners_db
from shared.adapters.db.ledger.read import feed
from shared.adapters.db.webhooks import deliveries as webhook_db

if TYPE_CHECKING:
    from services.api.context import ApiContext

log = logging.getLogger("settleq.api")
T = TypeVar("T")

HTTP_REQUESTS = "settleq_http_request_duration_seconds"
QUEUE_DEPTH = "settleq_queue_depth"
QUEUE_AGE = "settleq_queue_oldest_message_age_seconds"
DEAD_LETTERS_STORED = "settleq_dead_letters_stored"
SOURCE_UP = "settleq_stats_source_up"
WEBHOOK_DELIVERIES = "settleq_webhook_deliveries"
WEBHOOK_OLDEST = "settleq_webhook_oldest_undelivered_age_seconds"
WEBHOOK_ENDPOINTS = "settleq_webhook_endpoints"
EDI_REFUSED = "settleq_edi_files_refused_total"
FEED_HELD_BACK = "settleq_ledger_feed_held_back_seconds"
FEED_WAITING = "settleq_ledger_feed_waiting"
PROCESS_RESTARTS = "settleq_process_restarts"  # exposed with the counter's _total
PROCESS_CRASH_LOOPING = "settleq_process_crash_looping"
# Served only under a supervisor (`settleq up`), so not among API_METRICS.
SUPERVISOR_METRICS = (PROCESS_RESTARTS, PROCESS_CRASH_LOOPING)
API_METRICS = (
    HTTP_REQUESTS,
    QUEUE_DEPTH,
    QUEUE_AGE,
    DEAD_LETTERS_STORED,
    SOURCE_UP,
    *DISPUTE_METRICS,
    WEBHOOK_DELIVERIES,
    WEBHOOK_OLDEST,
    WEBHOOK_ENDPOINTS,
    EDI_REFUSED,
    FEED_HELD_BACK,
    FEED_WAITING,
)

_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
_HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class PipelineCollector(Collector):
    """Queue, dead-letter and dispute gauges, read when Prometheus scrapes."""

    def __init__(self, context: Callable[[], ApiContext | None]) -> None:
        self._context = context
        self._disputes = DisputeGauges()

    def collect(self) -> Iterator[Metric]:
        ctx = self._context()
        if ctx is None:  # before the app's lifespan started: nothing to read yet
            return
        waiting = GaugeMetricFamily(FEED_WAITING, "Long polls of the ledger feed waiting now")
        waiting.add_metric([], ctx.feed_watch.waiting)
        yield waiting
        up = GaugeMetricFamily(SOURCE_UP, "1 when the source could be read", labels=["source"])
        readings = _read(up, "broker", ctx.queue_depth.readings)
        if readings is not None:
            yield from self._queues(readings)
        database = _read(
            up,
            "database",
            lambda: (
                dl_db.stats(ctx.engine),
                self._disputes.reading(ctx.engine),
                webhook_db.backlog(ctx.engine),
                partners_db.refusals_by_partner(ctx.engine),
                _held_back(ctx.engine),
            ),
        )
        if database is not None:
            letters, disputes, hooks, refused, held_back = database
            stored = GaugeMetricFamily(
                DEAD_LETTERS_STORED, "Dead letters in the database", labels=["reason", "status"]
            )
            for row in letters:
                stored.add_metric([row.reason, row.status], int(row.count))
            yield stored
            yield from disputes.metrics(dt.datetime.now(dt.UTC))
            yield from _webhooks(hooks)
            files = CounterMetricFamily(
                EDI_REFUSED.removesuffix("_total"),
                "X12 files refused for their content, by trading partner (ISA05/ISA06)",
                labels=["partner"],
            )
            for partner, count in sorted(refused.items()):
                files.add_metric([partner], count)
            yield files
            held = GaugeMetricFamily(
                FEED_HELD_BACK,
                "How long the ledger feed has held back a committed row behind a transaction"
                " still open (0: none held back)",
            )
            held.add_metric([], held_back)
            yield held
        yield up

    def _queues(self, readings: list[QueueReading]) -> Iterator[Metric]:
        depth = GaugeMetricFamily(
            QUEUE_DEPTH, "Ready messages in the queue", labels=["queue", "family"]
        )
        age = GaugeMetricFamily(
            QUEUE_AGE,
            "Age of the oldest accepted chunk not yet settled, for a queue holding messages "
            "(a proxy: AMQP does not tell a message's age; capped at one hour)",
            labels=["queue", "family"],
        )
        for r in readings:
            depth.add_metric([r.queue, r.family], r.depth)
            if r.oldest_age_s is not None:
                age.add_metric([r.queue, r.family], r.oldest_age_s)
        yield depth
        yield age


def _held_back(engine: Engine) -> float:
    with engine.connect() as conn:
        return feed.held_back_seconds(conn)


def _webhooks(hooks: webhook_db.Backlog) -> Iterator[Metric]:
    deliveries = GaugeMetricFamily(
        WEBHOOK_DELIVERIES, "Webhook deliveries in the database, by status", labels=["status"]
    )
    for status, count in hooks.by_status.items():
        deliveries.add_metric([status], count)
    yield deliveries
    oldest = GaugeMetricFamily(
        WEBHOOK_OLDEST, "Age of the oldest webhook event not yet delivered everywhere (0: none)"
    )
    now = dt.datetime.now(dt.UTC)
    since = hooks.oldest_undelivered
    oldest.add_metric([], 0.0 if since is None else max(0.0, (now - since).total_seconds()))
    yield oldest
    endpoints = GaugeMetricFamily(
        WEBHOOK_ENDPOINTS,
        "Webhook endpoints by status (reason: operator, or failing for five days)",
        labels=["status", "reason"],
    )
    for (status, reason), count in sorted(hooks.endpoints.items()):
        endpoints.add_metric([status, reason], count)
    yield endpoints


class RestartCollector(Collector):
    """``settleq_process_restarts_total{component}`` and
    ``settleq_process_crash_looping{component}`` from the supervisor's counts file."""

    def __init__(self, counts_file: str | None) -> None:
        self._path = Path(counts_file) if counts_file else None

    def collect(self) -> Iterator[Metric]:
        if self._path is None:
            return
        try:
            counts = read_counts(self._path)
        except (OSError, ValueError) as exc:
            log.warning("metrics: restart counts unreadable (%s)", type(exc).__name__)
            return
        if counts is None:
            return
        restarts = CounterMetricFamily(
            PROCESS_RESTARTS,
            "Restarts of a supervised process that exited unexpectedly, by component",
            labels=["component"],
        )
        looping = GaugeMetricFamily(
            PROCESS_CRASH_LOOPING,
            "1 while a supervised component keeps dying (restarted at the capped backoff)",
            labels=["component"],
        )
        for component, count in sorted(counts.restarts.items()):
            restarts.add_metric([component], count)
            looping.add_metric([component], int(component in counts.crash_looping))
        yield restarts
        yield looping


def _read(up: GaugeMetricFamily, source: str, read: Callable[[], T]) -> T | None:
    """``read()``, recording in ``up`` whether ``source`` could be read."""
    try:
        value = read()
    except Exception as exc:
        log.warning("metrics: %s unreadable (%s)", source, type(exc).__name__)
        up.add_metric([source], 0)
        return None
    up.add_metric([source], 1)
    return value


class ApiMetrics:
    """One registry per app (tests build several apps in one process)."""

    def __init__(
        self, context: Callable[[], ApiContext | None], counts_file: str | None = None
    ) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        self.requests = Histogram(
            HTTP_REQUESTS,
            "HTTP requests by method, route template and status code",
            ["method", "route", "status"],
            buckets=_HTTP_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(PipelineCollector(context))
        self.registry.register(RestartCollector(counts_file))


class RequestMetrics:
    """ASGI middleware timing every HTTP request, labelled by its route template."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics) -> None:
        self.app = app
        self.requests = metrics.requests

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless a response starts: an exception becomes a 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            # The router records the route it matched in the (shared) scope.
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = scope["method"] if scope["method"] in _METHODS else "other"
            self.requests.labels(method, route, str(status)).observe(time.perf_counter() - started)
