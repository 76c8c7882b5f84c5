"""A worker process's Prometheus metrics, served on its own port (viewer token).

- ``settleq_lines_total{kind, outcome}``: lines that reached an outcome,
  counted after their unit's transaction committed, once per unit and never
  per line (a redelivered chunk that stops at its processed marker commits
  nothing and counts nothing; a requeued dead letter counts its lines again
  under their new outcome).
- ``settleq_dead_letters_total{kind, reason}``: lines dead-lettered, by reason.
- ``settleq_settle_duration_seconds{result}``: the settle stage, per attempt
  (``committed``, ``skipped``: nothing left to do, ``failed``: raised).
- ``settleq_task_duration_seconds{actor, result}``: every message an actor
  handled (``ok``, ``retry``, ``error``); ``task_timeout_s`` is one of the
  buckets, so the alert on tasks past it is exact.

Queue depth, oldest-message age and dead letters stored are read by the API
(:mod:`services.api.metrics`): one reading, not one per worker process.
"""

from __future__ import annotations

import logging
import time
from collections import Counter as Tally
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import dramatiq
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
)
from prometheus_client.exposition import ThreadingWSGIServer

from services import metrics_http
from shared.config.settings import Settings
from shared.domain.kinds import KINDS
from shared.domain.pipeline.messages import SETTLE_ACTOR, VALIDATE_ACTOR
from shared.domain.pipeline.settlement import ChunkPlan
from shared.domain.pipeline.units import ChunkOutcome, ChunkRef

log = logging.getLogger("settleq.worker")

LINES = "settleq_lines_total"
DEAD_LETTERS = "settleq_dead_letters_total"
SETTLE = "settleq_settle_duration_seconds"
TASKS = "settleq_task_duration_seconds"
WORKER_METRICS = (LINES, DEAD_LETTERS, SETTLE, TASKS)

OUTCOMES = ("posted", "disputed", "duplicate", "dead_lettered")
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

Stage = Callable[[Any, Any, int], Any]


def dead_letter_reasons(plan: ChunkPlan) -> Tally[str]:
    """Lines a plan dead-letters, by reason (only walked when it has some)."""
    reasons: Tally[str] = Tally()
    for p in plan.lines:
        if p.settlement is None:
            reasons[p.reason or "unknown"] += 1
    for f in plan.failed_documents:
        reasons[f.reason] += f.covered
    return reasons


class WorkerMetrics:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no *_created series
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        self._lines = Counter(
            LINES.removesuffix("_total"),
            "Lines that reached an outcome (counted once per committed unit of work)",
            ["kind", "outcome"],
            registry=self.registry,
        )
        self._dead_letters = Counter(
            DEAD_LETTERS.removesuffix("_total"),
            "Lines dead-lettered, by reason",
            ["kind", "reason"],
            registry=self.registry,
        )
        self._settle = Histogram(
            SETTLE,
            "Duration of the settle stage per attempt",
            ["result"],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self._tasks = Histogram(
            TASKS,
            "Duration of each message an actor handled",
            ["actor", "result"],
            buckets=sorted({*_BUCKETS, float(settings.task_timeout_s)}),
            registry=self.registry,
        )
        # Every series exists from the start: rate() and the alerts need a zero.
        for kind in KINDS:
            for outcome in OUTCOMES:
                self._lines.labels(kind, outcome)
        for result in ("committed", "skipped", "failed"):
            self._settle.labels(result)
        for actor in (VALIDATE_ACTOR, SETTLE_ACTOR):
            for result in ("ok", "retry", "error"):
                self._tasks.labels(actor, result)

    def committed(self, ref: ChunkRef, plan: ChunkPlan, outcome: ChunkOutcome) -> None:
        """Count a unit of work whose transaction has committed: O(1) metric updates."""
        try:
            for name in OUTCOMES[:3]:
                count = getattr(outcome, name)
                if count > 0:
                    self._lines.labels(ref.kind, name).inc(count)
            # A requeue's outcome nets out the lines it took from dead_lettered.
            dead = outcome.dead_lettered + (ref.requeue.lines if ref.requeue else 0)
            if dead > 0:
                self._lines.labels(ref.kind, "dead_lettered").inc(dead)
                for reason, count in dead_letter_reasons(plan).items():
                    self._dead_letters.labels(ref.kind, reason).inc(count)
        except Exception:  # metrics never fail a committed unit of work
            log.warning("could not count a committed unit", exc_info=True)

    @contextmanager
    def task(self, actor: str) -> Iterator[None]:
        started = time.perf_counter()
        result = "error"
        try:
            yield
            result = "ok"
        except dramatiq.Retry:
            result = "retry"
            raise
        finally:
            self._tasks.labels(actor, result).observe(time.perf_counter() - started)

    def timed_settle(self, stage: Stage) -> Stage:
        def settle(ctx: Any, raw: Any, attempt: int) -> Any:
            started = time.perf_counter()
            result = "failed"
            try:
                outcome = stage(ctx, raw, attempt)
                result = "skipped" if outcome is None else "committed"
                return outcome
            finally:
                self._settle.labels(result).observe(time.perf_counter() - started)

        settle.__name__ = stage.__name__
        return settle

    def serve(self, host: str, port: int) -> ThreadingWSGIServer | None:
        """Serve ``GET /metrics`` on a daemon thread (services/metrics_http.py)."""
        return metrics_http.serve(self.registry, self.settings, host, port)
