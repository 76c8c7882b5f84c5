"""``settleq worker --queues webhooks``: the webhooks component, one process.

A Dramatiq worker on ``<prefix>.webhooks`` whose actor claims and signs one
delivery per message (delivery.py), ``webhook_threads`` at once, and hands
its POST to the process's event loop (sending.py), where any number of
attempts wait on their endpoints without holding a thread; and the scheduler
thread that fans events out and hands due deliveries to that queue, at most
two in flight per endpoint (scheduler.py); and the pruner thread, which
deletes what is past its retention (pruner.py). The retry schedule lives in the
database, not in the broker: a wait of 12 h would outlast RabbitMQ's
consumer timeout in a delay queue.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

import dramatiq
from dramatiq.message import Message
from dramatiq.middleware import ShutdownNotifications, TimeLimit
from sqlalchemy.exc import SQLAlchemyError

from services.signals import wait_for_stop
from services.webhooks.delivery import start
from services.webhooks.metrics import WebhookMetrics
from services.webhooks.pruner import Pruner
from services.webhooks.scheduler import Scheduler
from services.webhooks.sending import Sender
from shared.adapters.db.engine import make_engine
from shared.adapters.rabbitmq.broker import close_broker, make_broker
from shared.config.settings import Settings
from shared.domain.pipeline.messages import WEBHOOKS

log = logging.getLogger("settleq.webhooks")

ACTOR = "deliver_webhook"


def queue_name(settings: Settings) -> str:
    return f"{settings.queue_prefix}.{WEBHOOKS}"


def run_webhooks(settings: Settings, metrics_port: int = 0) -> None:
    broker = make_broker(
        settings,
        # No Retries: a failed attempt is retried on the database's schedule.
        [TimeLimit(time_limit=60_000), ShutdownNotifications()],
        # Nor publisher confirms: a message lost on its way is a delivery whose
        # lease runs out, handed out again (scheduler.py); a confirm a message
        # made the scheduler wait a round trip per delivery.
        confirm=False,
    )
    dramatiq.set_broker(broker)
    # The actor's threads claim, the sender's record (as many), the scheduler
    # and the pruner read and write. Its writes are bookkeeping whose loss in a
    # crash means a delivery sent again (never an event lost: those are
    # settlement's durable writes).
    engine = make_engine(
        settings.database_url,
        pool_size=2 * settings.webhook_threads + 3,
        durable_commits=False,
        component="settleq-webhooks",
    )
    metrics = WebhookMetrics()
    queue = queue_name(settings)
    sender = Sender(settings, engine, metrics)

    def deliver_webhook(delivery_id: str, attempts: int) -> None:
        try:
            started = start(settings, engine, delivery_id, attempts)
            if started is not None:
                sender.submit(started)
        except SQLAlchemyError as exc:
            # The delivery stays pending: handed out again once its lease runs out.
            log.warning("webhook attempt not recorded (%s); retried later", type(exc).__name__)

    dramatiq.actor(actor_name=ACTOR, queue_name=queue, broker=broker)(deliver_webhook)
    broker.declare_queue(queue)

    def send(delivery_id: str, attempts: int) -> None:
        broker.enqueue(_message(queue, delivery_id, attempts))

    if metrics_port:
        from services import metrics_http

        metrics_http.serve(metrics.registry, settings, settings.worker_metrics_host, metrics_port)
    worker = dramatiq.Worker(broker, queues={queue}, worker_threads=settings.webhook_threads)
    worker.queue_prefetch = settings.webhook_threads
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    worker.start()
    scheduling = Scheduler(settings, engine, send)
    sender.recorded = scheduling.wake.set  # an endpoint's next may go at once
    sender.start()
    scheduler = threading.Thread(target=scheduling.run, args=(stop,), name="scheduler", daemon=True)
    scheduler.start()
    pruner = threading.Thread(
        target=Pruner(settings, engine, metrics).run, args=(stop,), name="pruner", daemon=True
    )
    pruner.start()
    log.info("webhooks delivering from %s with %d threads", queue, settings.webhook_threads)
    wait_for_stop(stop)
    log.info("stopping: finishing in-flight attempts")
    scheduler.join(timeout=10)
    worker.stop(timeout=15_000)
    sender.stop(timeout_s=12)
    close_broker(broker)
    engine.dispose()


def _message(queue: str, delivery_id: str, attempts: int) -> Message[Any]:
    return Message(
        queue_name=queue, actor_name=ACTOR, args=(delivery_id, attempts), kwargs={}, options={}
    )
