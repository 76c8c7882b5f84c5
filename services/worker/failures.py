"""Map real failures onto the exception tree (``shared.errors``)."""

from __future__ import annotations

import dramatiq.errors
import pika.exceptions
import psycopg
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


# SQLSTATEs that say there is no primary to write to, rather than that this
# statement failed: a connection exception (class 08), a server shutting down or
# starting up (57P01-57P03), a read-only transaction (25006: a standby, or one
# that is being promoted and does not take writes yet).
_NO_PRIMARY = ("08", "57P01", "57P02", "57P03", "25006")


def lost_the_database(exc: BaseException) -> bool:
    """The unit's connection failed, or its server would not take writes: its
    host may have died, a failover may be under way (or only this session was
    ended: the actor asks the database which). A deadlock, a lock timeout or a
    serialization failure is not this: an attempt that failed, and counts."""
    if not isinstance(exc, sa_exc.DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    orig = exc.orig
    if not isinstance(orig, psycopg.Error):
        return False  # SQLite's errors (database is locked) are not outages
    state = orig.sqlstate
    # psycopg raises a failed connect with no SQLSTATE: no server answered.
    if state is None:
        return isinstance(orig, psycopg.OperationalError)
    return state.startswith(_NO_PRIMARY)


def reason_of(exc: BaseException) -> str:
    return getattr(exc, "reason", type(exc).__name__)
