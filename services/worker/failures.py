"""Map real failures onto the exception tree (``shared.errors``)."""

from __future__ import annotations

import dramatiq.errors
import pika.exceptions
import redis
from dramatiq.middleware import TimeLimitExceeded
from sqlalchemy import exc as sa_exc

from shared.errors import TransientError

_TRANSIENT = (
    TransientError,
    dramatiq.Retry,
    TimeLimitExceeded,  # a task past task_timeout_s may succeed on another attempt
    sa_exc.OperationalError,  # connection loss, deadlock, serialization, lock timeout
    sa_exc.TimeoutError,  # pool exhausted
    sa_exc.InterfaceError,
    redis.ConnectionError,
    redis.TimeoutError,
    redis.BusyLoadingError,
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.AMQPChannelError,
    dramatiq.errors.BrokerConnectionError,
)


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated:
        return True
    return isinstance(exc, _TRANSIENT)


def reason_of(exc: BaseException) -> str:
    return getattr(exc, "reason", type(exc).__name__)
