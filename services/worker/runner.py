"""``settleq worker``: one Dramatiq worker process consuming chosen tiers."""

from __future__ import annotations

import gc
import logging
import signal
import threading
from collections.abc import Sequence

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from prometheus_client.exposition import ThreadingWSGIServer
from sqlalchemy.exc import SQLAlchemyError

from services.signals import wait_for_stop
from services.worker.actors import build_broker, register_actors
from services.worker.context import WorkerContext, make_context
from services.worker.metrics import WorkerMetrics
from shared.adapters.db.periods import dated
from shared.adapters.rabbitmq.broker import close_broker
from shared.config.settings import Settings
from shared.domain.pipeline.messages import COMPUTE_HEAVY, FAST_PATH

log = logging.getLogger("settleq.worker")

TIERS = (FAST_PATH, COMPUTE_HEAVY)


def run_worker(
    settings: Settings, tiers: Sequence[str], threads: int, metrics_port: int = 0
) -> None:
    """Consume ``tiers``; serve this process's metrics on ``metrics_port`` (0: none)."""
    unknown = set(tiers) - set(TIERS)
    if unknown:
        raise ValueError(f"unknown queue families: {sorted(unknown)}; use {TIERS}")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    broker = build_broker(settings)
    dramatiq.set_broker(broker)
    ctx = make_context(settings, broker)
    metrics = WorkerMetrics(settings)
    register_actors(broker, ctx, metrics)
    server = metrics.serve(settings.worker_metrics_host, metrics_port) if metrics_port else None
    queues = {queue for tier in tiers for queue in settings.queues_of(tier)}
    for queue in queues:
        broker.declare_queue(queue)
    # Nothing is consumed before the database answers: a message taken while it
    # cannot would spend its attempts, and its dead letter could not be written.
    if not ctx.key.wait(stop):
        _close(broker, ctx, server)
        return
    # Nor before the cuts missed while nothing ran are made: a message settled
    # now would book into a period that has ended.
    if not _caught_up(settings, ctx, stop):
        _close(broker, ctx, server)
        return
    # What start-up loaded (~100k objects: libraries, models, contracts) lives as
    # long as the process: out of the collector's sight, a full collection
    # walks only what settling makes.
    gc.collect()
    gc.freeze()
    worker = dramatiq.Worker(broker, queues=queues, worker_threads=threads)
    worker.queue_prefetch = threads + settings.worker_prefetch
    worker.start()
    log.info("worker consuming %s with %d threads", sorted(queues), threads)
    wait_for_stop(stop)
    log.info("stopping: finishing in-flight messages")
    # Unacked messages of a stopped worker go back to RabbitMQ for redelivery.
    worker.stop(timeout=settings.task_timeout_s * 1000)
    _close(broker, ctx, server)


def _caught_up(settings: Settings, ctx: WorkerContext, stop: threading.Event) -> bool:
    """``dated.catch_up``, again after a pause while the database fails; False
    when ``stop`` is set first."""
    while not stop.is_set():
        try:
            dated.catch_up(
                ctx.engine, settings.calendar(), settings.period_tz, settings.close_wait_s, stop
            )
        except SQLAlchemyError as exc:
            # The driver's first line names the host and database, never a password.
            why = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
            log.warning("missed period cuts not made yet (%s): trying again", why)
            stop.wait(1.0)
            continue
        return not stop.is_set()
    return False


def _close(broker: RabbitmqBroker, ctx: WorkerContext, server: ThreadingWSGIServer | None) -> None:
    close_broker(broker)  # connections RabbitMQ dropped while idle close without a traceback
    ctx.engine.dispose()
    if server is not None:
        server.shutdown()
