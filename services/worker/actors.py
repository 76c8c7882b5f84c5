"""Dramatiq broker setup and the two actors.

Actors are registered on an explicit broker in a factory, never at import:
``@dramatiq.actor`` would otherwise bind to whatever global broker exists
when the module is imported.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Callable
from typing import Any

import dramatiq
from dramatiq.brokers.rabbitmq import RabbitmqBroker
from dramatiq.middleware import (
    AgeLimit,
    CurrentMessage,
    Retries,
    ShutdownNotifications,
    TimeLimit,
)

from services.worker import stage_log
from services.worker.context import WorkerContext
from services.worker.failures import is_transient, lost_the_database, reason_of
from services.worker.metrics import WorkerMetrics
from services.worker.stage_log import UnitEvents, outcome_fields, unit_events
from services.worker.stages import dead_letter_chunk, settle_chunk, validate_chunk
from shared.adapters.db.engine import takes_writes
from shared.adapters.rabbitmq.broker import make_broker
from shared.adapters.rabbitmq.declare import RETURNS
from shared.config.settings import Settings
from shared.domain.pipeline.messages import COMPUTE_HEAVY, FAST_PATH, SETTLE_ACTOR, VALIDATE_ACTOR
from shared.errors import ClaimContended, TransientError

log = logging.getLogger("settleq.worker")

Stage = Callable[[WorkerContext, Any, int], object]


def build_broker(settings: Settings) -> RabbitmqBroker:
    """Broker with confirms and the middleware that owns retries and time limits."""
    return make_broker(
        settings,
        [
            AgeLimit(),
            TimeLimit(time_limit=settings.task_timeout_s * 1000),
            ShutdownNotifications(),
            CurrentMessage(),
            # The actor decides when attempts are exhausted (it records the dead
            # letter first), so every transient failure that reaches here retries.
            # Anything else was already recorded as a dead letter by the actor.
            Retries(
                max_retries=settings.max_attempts,  # unused: retry_when takes precedence
                min_backoff=settings.backoff_base_ms,
                max_backoff=settings.backoff_max_ms,
                retry_when=lambda _retries, exc: is_transient(exc),
            ),
        ],
    )


# Message options: how many of its retries were waits on another attempt's
# lease (ClaimContended), and how many were waits for a primary database (its
# host died, a failover is under way). Neither is an attempt.
CONTENDED = "contended"
OUTAGE = "outage"
# A unit waits for a primary this often, about a second apart (some 10 to 15
# minutes, past any failover), before further failures count as attempts:
# a database gone for good still ends in dead letters, never in a loop.
OUTAGE_WAITS = 600
OUTAGE_RETRY_MS = 1000


def current_attempt() -> int:
    message = CurrentMessage.get_current_message()
    if message is None:
        return 1
    options = message.options
    waits = int(options.get(CONTENDED, 0)) + int(options.get(OUTAGE, 0))
    return int(options.get("retries", 0)) - waits + 1


def _wait_for_lease(ctx: WorkerContext, exc: ClaimContended) -> dramatiq.Retry | None:
    """The retry that waits out another attempt's lease without counting as an
    attempt; None once a unit has waited so often that its holder cannot be
    a live attempt (a live one is done within task_timeout_s), so that the
    wait then counts and cannot loop forever."""
    message = CurrentMessage.get_current_message()
    settings = ctx.settings
    limit = max(10, 4 * settings.task_timeout_s * 1000 // settings.claim_lease_ms)
    if message is None or int(message.options.get(CONTENDED, 0)) >= limit:
        return None
    message.options[CONTENDED] = int(message.options.get(CONTENDED, 0)) + 1
    # Past the lease, jittered so that the units a dead worker held do not all
    # come back at the same instant.
    wait = max(exc.wait_ms, settings.backoff_base_ms)
    return dramatiq.Retry(exc.reason, delay=int(wait * random.uniform(1.05, 1.25)))


def _wait_for_database(ctx: WorkerContext) -> dramatiq.Retry | None:
    """While no primary takes writes (its host died, a failover is under way):
    the retry that waits for one without counting as an attempt, about a second
    later, so that work resumes within seconds of a promotion rather than after
    a backoff grown through the outage, and five quick failures do not
    dead-letter it. None when a primary answers now (only this session was
    lost: the attempt counts), or once the unit has waited ``OUTAGE_WAITS``
    times. Whether the failed attempt's commit landed before its connection
    went is the unit's marker's to say on the next attempt."""
    message = CurrentMessage.get_current_message()
    if message is None or int(message.options.get(OUTAGE, 0)) >= OUTAGE_WAITS:
        return None
    if takes_writes(ctx.engine):
        return None
    message.options[OUTAGE] = int(message.options.get(OUTAGE, 0)) + 1
    wait = min(OUTAGE_RETRY_MS, ctx.settings.backoff_max_ms)
    return dramatiq.Retry("database_unavailable", delay=int(wait * random.uniform(1.0, 1.25)))


def current_returns() -> int:
    """Times this delivery's message came back unacknowledged (quorum queues count)."""
    message = CurrentMessage.get_current_message()
    return int(message.options.get(RETURNS, 0)) if message is not None else 0


def run_stage(ctx: WorkerContext, name: str, stage: Stage, raw: Any) -> None:
    """Run a stage; map its failure onto retry or dead letter. Never loses a chunk.

    Logs one event for the delivery (``name``: validate or settle), and one more
    (``dead_letter``) when this wrapper dead-letters the unit itself."""
    attempt = current_attempt()
    with unit_events(raw, attempt) as events:
        started = stage_log.now()
        returns = current_returns()
        if returns >= ctx.settings.delivery_limit():
            # RabbitMQ's last delivery of a message whose workers died holding it
            # (killed, out of memory): record it where an operator sees it and
            # can requeue it, rather than let RabbitMQ move it to the .XQ queue.
            events.emit(name, started, logging.ERROR, status="failed", reason="redelivery_limit")
            _dead_letter(
                ctx,
                raw,
                attempt,
                events,
                reason="redelivery_limit",
                error_class="WorkerLost",
                message=f"delivered {returns + 1} times without an acknowledgement",
            )
            return
        try:
            result = stage(ctx, raw, attempt)
        except Exception as exc:
            _failed(ctx, name, raw, attempt, exc, events, started)
        else:
            events.emit(name, started, status="ok", **outcome_fields(result))


def _failed(
    ctx: WorkerContext,
    name: str,
    raw: Any,
    attempt: int,
    exc: Exception,
    events: UnitEvents,
    started: float,
) -> None:
    reason = reason_of(exc)
    if isinstance(exc, ClaimContended) and (retry := _wait_for_lease(ctx, exc)) is not None:
        events.emit(name, started, logging.INFO, status="retry", reason=reason)
        raise retry from exc
    if lost_the_database(exc) and (retry := _wait_for_database(ctx)) is not None:
        events.emit(name, started, logging.INFO, status="retry", reason="database_unavailable")
        raise retry from exc
    if is_transient(exc):
        if attempt < ctx.settings.max_attempts:
            events.emit(name, started, logging.WARNING, status="retry", reason=reason)
            # Retry, not the error itself: Dramatiq then schedules the backoff
            # without logging an expected failure as an error with a traceback.
            raise dramatiq.Retry(reason) from exc
        events.emit(name, started, logging.ERROR, status="failed", reason=reason)
        reason, error_class = "retries_exhausted", "TransientError"
    else:
        # A bug, not bad data: keep the work as a dead letter an operator can requeue.
        log.exception("stage %s failed unexpectedly", name)
        events.emit(name, started, logging.ERROR, status="failed", reason=type(exc).__name__)
        reason, error_class = "internal_error", type(exc).__name__
    _dead_letter(
        ctx, raw, attempt, events, reason=reason, error_class=error_class, message=str(exc)[:2000]
    )


def _dead_letter(
    ctx: WorkerContext,
    raw: Any,
    attempt: int,
    events: UnitEvents,
    *,
    reason: str,
    error_class: str,
    message: str,
) -> None:
    recording = stage_log.now()
    try:
        dead_letter_chunk(
            ctx, raw, reason=reason, error_class=error_class, message=message, attempts=attempt
        )
    except Exception as record_exc:
        events.emit("dead_letter", recording, logging.ERROR, status="failed", reason=reason)
        # Recording failed too (database down?): retry the message rather than drop it.
        raise TransientError("dead_letter_unrecorded", str(record_exc)) from record_exc
    events.emit("dead_letter", recording, logging.WARNING, status="ok", reason=reason)


def register_actors(
    broker: RabbitmqBroker, ctx: WorkerContext, metrics: WorkerMetrics | None = None
) -> None:
    settings = ctx.settings
    metrics = metrics or WorkerMetrics(settings)
    ctx.on_commit = metrics.committed
    timed_settle = metrics.timed_settle(settle_chunk)

    def validate(message: dict[str, Any]) -> None:
        with metrics.task(VALIDATE_ACTOR):
            run_stage(ctx, "validate", validate_chunk, message)

    def settle(message: dict[str, Any]) -> None:
        with metrics.task(SETTLE_ACTOR):
            run_stage(ctx, "settle", timed_settle, message)

    dramatiq.actor(
        actor_name=VALIDATE_ACTOR, queue_name=settings.queues_of(FAST_PATH)[0], broker=broker
    )(validate)
    dramatiq.actor(
        actor_name=SETTLE_ACTOR, queue_name=settings.queues_of(COMPUTE_HEAVY)[0], broker=broker
    )(settle)
