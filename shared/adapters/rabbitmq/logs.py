"""What pika logs when a broker connection is lost, at the level it deserves.

pika reports one lost TCP stream as three error records (one with a
traceback), and one more when a dead connection is closed. A lost stream is
routine: RabbitMQ drops an idle connection and whoever uses it next
reconnects. An outage that matters is reported by the code that meets it (the
API's 503 warning, Dramatiq's consumer errors, the relay's retries). So a loss
becomes one info line, and nothing during a shutdown that expects it.

With a cluster's node list, a connection tries each node in turn: pika logs
three error records for every node that does not answer, even when the next
one does. A node that is down becomes one info line per attempt; when none
answers, pika's errors about the whole attempt are kept, except where the
caller reports each failure itself (the API: ``attempts_reported_by_caller``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_PIKA_IO = (
    "pika.adapters.utils.io_services_utils",
    "pika.adapters.utils.connection_workflow",
    "pika.adapters.base_connection",
    "pika.adapters.blocking_connection",
)
_LOST = (
    "StreamLostError",
    "ConnectionResetError",
    "BrokenPipeError",
    "Broken pipe",
    "Socket EOF",
    "Transport indicated EOF",
    "called on closed connection",
    "CONNECTION_FORCED",  # a node shutting down closes its clients' connections
)
_NODE_DOWN_LINE = "TCP Connection attempt failed: "  # the one record kept, naming the node
# A node's own attempt; the workflow's failure (no node answered) stays an error.
_NODE_DOWN = (_NODE_DOWN_LINE, "Socket failed to connect", "AMQPConnector - reporting failure")
_LOST_LINE = "connection_lost: "  # pika's one record of the loss that is kept
# pika's records of a connection attempt that failed on every node.
_ATTEMPT_FAILED = (
    "AMQP connection workflow failed",
    "AMQPConnectionWorkflow - reporting failure",
    "Connection workflow failed",
    "Error in _create_connection",
)
_expected_loss: ContextVar[bool] = ContextVar("expected_connection_loss", default=False)
_attempts_reported: ContextVar[bool] = ContextVar("broker_attempts_reported", default=False)
_reported_by_caller: ContextVar[bool] = ContextVar("broker_failure_reported", default=False)


class QuietConnectionLoss(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        if _reported_by_caller.get():
            return False
        text = record.getMessage()
        if _attempts_reported.get() and any(m in text for m in (*_NODE_DOWN, *_ATTEMPT_FAILED)):
            return False
        if any(marker in text for marker in _NODE_DOWN):
            return _one_line_per_node(record, text)
        if not any(marker in text for marker in _LOST):
            return True
        if _expected_loss.get() or not text.startswith(_LOST_LINE):
            return False
        return _as_info(record, "broker connection lost, reopened when next used: %s", _LOST_LINE)


def _one_line_per_node(record: logging.LogRecord, text: str) -> bool:
    if not text.startswith(_NODE_DOWN_LINE):
        return False
    return _as_info(
        record, "broker node did not answer, trying the next one listed: %s", _NODE_DOWN_LINE
    )


def _as_info(record: logging.LogRecord, msg: str, drop: str) -> bool:
    """The record as one info line: ``msg`` with pika's text after ``drop``."""
    text = record.getMessage()
    record.levelno, record.levelname = logging.INFO, "INFO"
    record.msg, record.args = msg, (text.removeprefix(drop),)
    record.exc_info, record.exc_text, record.stack_info = None, None, None
    return True


def quiet_connection_loss() -> None:
    """Install the filter above on pika's loggers (once per process)."""
    for name in _PIKA_IO:
        logger = logging.getLogger(name)
        if not any(isinstance(f, QuietConnectionLoss) for f in logger.filters):
            logger.addFilter(QuietConnectionLoss())


@contextmanager
def attempts_reported_by_caller() -> Iterator[None]:
    """In this block (this thread), a connection attempt that fails is reported
    only by the code that made it, in one line (the API's 503 warning,
    ``/readyz``'s), not by pika's error records and traceback. A lost connection
    is still one info line."""
    quiet_connection_loss()
    token = _attempts_reported.set(True)
    try:
        yield
    finally:
        _attempts_reported.reset(token)


@contextmanager
def expected_connection_loss() -> Iterator[None]:
    """In this block (this thread), a lost broker connection is not logged at all."""
    quiet_connection_loss()
    token = _expected_loss.set(True)
    try:
        yield
    finally:
        _expected_loss.reset(token)


_probing: ContextVar[bool] = ContextVar("probing_for_queues", default=False)


class QuietQueueProbe(logging.Filter):
    """A passive declare of a queue that does not exist is how one asks whether
    it does: RabbitMQ answers by closing the channel, which pika logs as a warning."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_probing.get() and "NOT_FOUND - no queue" in record.getMessage())


@contextmanager
def probing_for_queues() -> Iterator[None]:
    """In this block (this thread), a queue found missing is not logged."""
    logger = logging.getLogger("pika.channel")
    if not any(isinstance(f, QuietQueueProbe) for f in logger.filters):
        logger.addFilter(QuietQueueProbe())
    token = _probing.set(True)
    try:
        yield
    finally:
        _probing.reset(token)


@contextmanager
def failure_reported_by_caller() -> Iterator[None]:
    """In this block (this thread), pika logs no warning or error of its own:
    the caller reports a failure in one line (a unit's events left to the
    relay), not pika's records and traceback for each connection attempt."""
    token = _reported_by_caller.set(True)
    try:
        yield
    finally:
        _reported_by_caller.reset(token)
