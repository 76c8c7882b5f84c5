"""Which RabbitMQ queues a stack uses, and what they are declared with.

Classic queues (the default) are one queue per tier, ordered by message
priority. Quorum queues are replicated across a cluster's nodes, but RabbitMQ
3.x gives them no priorities, so there a tier is several queues, one lane per
job size: a worker consumes every lane of its tier at once, so a small job's
chunks never wait behind a large job's in RabbitMQ (docs/architecture.md#isolation-and-fairness).

A quorum queue dead-letters ``at-least-once`` (RabbitMQ confirms the copy into
the dead-letter queue before it drops the original), which needs
``reject-publish`` overflow; its ``x-delivery-limit`` stops a message that
kills every worker it reaches from being redelivered for ever.
"""

from __future__ import annotations

from typing import Any, Literal

from shared.domain.pipeline.messages import COMPUTE_HEAVY, FAST_PATH, MAX_PRIORITY, WEBHOOKS

QueueType = Literal["classic", "quorum"]
QUEUE_TYPES: tuple[QueueType, ...] = ("classic", "quorum")
FAMILIES = (FAST_PATH, COMPUTE_HEAVY)
DELIVERY_LIMIT = 20  # deliveries of one quorum-queue message, unless configured
DELAY_SUFFIX, DEAD_SUFFIX = ".DQ", ".XQ"  # Dramatiq's delay and dead-letter queues

# Lowest priority each lane takes (priority_for gives 9, 5 or 1), highest first.
LANES: tuple[tuple[str, int], ...] = (("small", MAX_PRIORITY), ("medium", 5), ("large", 0))


def lane_of(priority: int) -> str:
    for lane, lowest in LANES:
        if priority >= lowest:
            return lane
    return LANES[-1][0]


def family_queues(prefix: str, family: str, queue_type: QueueType) -> tuple[str, ...]:
    """The queues a tier's workers consume (without their delay queues)."""
    base = f"{prefix}.{family}"
    if queue_type == "classic":
        return (base,)
    return tuple(f"{base}.{lane}" for lane, _ in LANES)


def queue_for(prefix: str, family: str, queue_type: QueueType, priority: int) -> str:
    """The queue a chunk of a job with this priority is published to."""
    base = f"{prefix}.{family}"
    return base if queue_type == "classic" else f"{base}.{lane_of(priority)}"


def every_queue(prefix: str, queue_type: QueueType) -> list[str]:
    """Every queue a stack of this type declares: each with its delay and dead-letter queue."""
    return [
        f"{name}{suffix}"
        for family in FAMILIES
        for name in family_queues(prefix, family, queue_type)
        for suffix in ("", DELAY_SUFFIX, DEAD_SUFFIX)
    ]


def webhook_queues(prefix: str) -> list[str]:
    """The webhooks component's queue, with its delay and dead-letter queue: one
    name whatever the queue type, so not among ``every_queue``'s, which tell
    one type's queues from the other's."""
    return [f"{prefix}.{WEBHOOKS}{suffix}" for suffix in ("", DELAY_SUFFIX, DEAD_SUFFIX)]


def work_queue_arguments(
    queue_type: QueueType, max_priority: int, delivery_limit: int
) -> dict[str, Any]:
    """What a work queue and its delay queue add to Dramatiq's dead-letter routing."""
    if queue_type == "classic":
        return {"x-max-priority": max_priority}
    return {**_quorum(), "x-delivery-limit": delivery_limit}


def dead_queue_arguments(queue_type: QueueType) -> dict[str, Any]:
    """What a dead-letter queue adds to Dramatiq's message TTL."""
    return {} if queue_type == "classic" else _quorum()


def _quorum() -> dict[str, Any]:
    return {
        "x-queue-type": "quorum",
        "x-dead-letter-strategy": "at-least-once",
        "x-overflow": "reject-publish",
    }
