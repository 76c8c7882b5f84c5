"""Dramatiq's RabbitMQ broker, declaring settleq's queues as the settings say.

Dramatiq declares each queue with its delay (``.DQ``) and dead-letter
(``.XQ``) queue itself; its argument builder and its ``.XQ`` declaration are
the extension points this subclass uses, so every one of the three is a quorum
queue when ``SETTLEQ_QUEUE_TYPE=quorum`` (shared/domain/pipeline/queues.py).

A queue that exists with other arguments makes RabbitMQ close the channel with
a bare ``PRECONDITION_FAILED``, which Dramatiq would retry and then report as
a lost connection. Here it becomes ``QueueMismatch``: what differs and what to
do about it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pika
import pika.exceptions
from dramatiq.broker import MessageProxy
from dramatiq.brokers.rabbitmq import DEAD_MESSAGE_TTL, RabbitmqBroker, _RabbitmqConsumer

from shared.adapters.rabbitmq.logs import probing_for_queues
from shared.domain.pipeline.queues import (
    QUEUE_TYPES,
    QueueType,
    dead_queue_arguments,
    every_queue,
    work_queue_arguments,
)

PRECONDITION_FAILED = 406
# A quorum queue counts the times a message came back unacknowledged (its
# consumer died, or its node went away); the actor reads it as this option.
DELIVERY_COUNT = "x-delivery-count"
RETURNS = "returns"


class QueueMismatch(RuntimeError):
    """RabbitMQ holds a queue of this name, declared otherwise than the settings ask."""


class SettleqBroker(RabbitmqBroker):
    def __init__(
        self, *, queue_type: QueueType, delivery_limit: int, max_priority: int, **kwargs: Any
    ) -> None:
        super().__init__(max_priority=max_priority, **kwargs)
        self.queue_type = queue_type
        self.delivery_limit = delivery_limit

    @property
    def consumer_class(self) -> type[_RabbitmqConsumer]:
        return ReturnCountingConsumer

    def _build_queue_arguments(self, queue_name: str) -> dict[str, Any]:
        built: dict[str, Any] = super()._build_queue_arguments(queue_name)  # type: ignore[no-untyped-call]
        arguments = dict(built)
        arguments.pop("x-max-priority", None)  # a quorum queue refuses it; classic adds it back
        arguments.update(
            work_queue_arguments(self.queue_type, self.max_priority or 0, self.delivery_limit)
        )
        return arguments

    def _declare_queue(self, queue_name: str) -> Any:
        declare = super()._declare_queue
        return self._explained(queue_name, lambda: declare(queue_name))  # type: ignore[no-untyped-call]

    def _declare_dq_queue(self, queue_name: str) -> Any:
        declare = super()._declare_dq_queue
        return self._explained(f"{queue_name}.DQ", lambda: declare(queue_name))  # type: ignore[no-untyped-call]

    def _declare_xq_queue(self, queue_name: str) -> Any:
        name = f"{queue_name}.XQ"
        arguments = {"x-message-ttl": DEAD_MESSAGE_TTL, **dead_queue_arguments(self.queue_type)}
        return self._explained(
            name,
            lambda: self.channel.queue_declare(queue=name, durable=True, arguments=arguments),
        )

    def _explained(self, name: str, declare: Callable[[], Any]) -> Any:
        try:
            return declare()
        except pika.exceptions.ChannelClosedByBroker as exc:
            if exc.reply_code != PRECONDITION_FAILED:
                raise
            del self.channel  # RabbitMQ closed it; the next call opens another
            raise QueueMismatch(mismatch_message(name, self.queue_type, exc.reply_text)) from None


class ReturnCountingConsumer(_RabbitmqConsumer):
    """Dramatiq's consumer, telling each message how often it came back before
    (``options["returns"]``; always 0 on a classic queue, which does not count)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)  # type: ignore[no-untyped-call]
        self._returns = 0
        self.iterator = self._noting_returns(self.iterator)

    def _noting_returns(self, deliveries: Iterator[Any]) -> Iterator[Any]:
        for method, properties, body in deliveries:
            headers = getattr(properties, "headers", None) or {}
            self._returns = int(headers.get(DELIVERY_COUNT) or 0)
            yield method, properties, body

    def __next__(self) -> MessageProxy | None:
        message: MessageProxy | None = super().__next__()  # type: ignore[no-untyped-call]
        if message is not None:
            message.options[RETURNS] = self._returns
        return message


def mismatch_message(name: str, queue_type: QueueType, detail: str = "") -> str:
    because = f" ({detail})" if detail else ""
    return (
        f"queue_mismatch: RabbitMQ already has a queue {name} declared otherwise than"
        f" SETTLEQ_QUEUE_TYPE={queue_type} declares it{because}; fix: drain it and delete it"
        f" (rabbitmqctl delete_queue {name}), or give this stack another SETTLEQ_QUEUE_PREFIX"
    )


def foreign_queues(
    channel_for: Callable[[], Any], prefix: str, queue_type: QueueType
) -> list[tuple[str, int]]:
    """Queues under ``prefix`` that a stack of another queue type declares, with
    their ready messages: a stack must not start beside them, or what they hold
    would wait for ever for a consumer that never comes."""
    found = []
    others = [
        name for kind in QUEUE_TYPES if kind != queue_type for name in every_queue(prefix, kind)
    ]
    with probing_for_queues():
        for name in others:
            channel = channel_for()
            try:
                frame = channel.queue_declare(name, passive=True)
            except pika.exceptions.ChannelClosedByBroker:
                continue  # no such queue (RabbitMQ closed the channel)
            found.append((name, int(frame.method.message_count)))
            channel.close()
    return found


def foreign_message(found: Sequence[tuple[str, int]], queue_type: QueueType) -> str:
    names = ", ".join(f"{name} ({count} ready)" for name, count in found)
    return (
        f"queue_mismatch: SETTLEQ_QUEUE_TYPE={queue_type}, but this prefix already holds the"
        f" queues of another queue type: {names}; fix: let a stack of that type drain them,"
        " then delete them (rabbitmqctl delete_queue <name>), or give this stack another"
        " SETTLEQ_QUEUE_PREFIX"
    )
