"""Real failures map onto the exception tree: transient ones are retried."""

from __future__ import annotations

import dramatiq
import pika.exceptions
import pytest
import redis
from dramatiq.middleware import TimeLimitExceeded
from sqlalchemy import exc as sa_exc

from services.worker.failures import is_transient, reason_of
from shared.errors import BusinessError, StructuralError, TransientError


class _DeadlockDetected(Exception):
    """Stands in for the driver's error inside SQLAlchemy's wrapper."""


@pytest.mark.parametrize(
    "error",
    [
        TransientError("claim_contended"),
        dramatiq.Retry("again"),
        TimeLimitExceeded(),
        sa_exc.OperationalError("INSERT", {}, _DeadlockDetected("deadlock detected")),
        sa_exc.TimeoutError("QueuePool limit reached"),
        redis.ConnectionError("connection refused"),
        redis.TimeoutError("timed out"),
        pika.exceptions.AMQPConnectionError("gone"),
        dramatiq.errors.BrokerConnectionError("gone"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_connection_lock_and_time_failures_are_transient(error: BaseException) -> None:
    assert is_transient(error)


@pytest.mark.parametrize(
    "error",
    [
        StructuralError("schema_invalid"),
        BusinessError("unknown_promo_tier"),
        sa_exc.IntegrityError("INSERT", {}, Exception("duplicate key")),
        ValueError("a bug"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_data_and_code_failures_are_not_retried(error: BaseException) -> None:
    assert not is_transient(error)


def test_reasons_are_machine_codes() -> None:
    assert reason_of(BusinessError("negative_quantity")) == "negative_quantity"
    assert reason_of(StructuralError()) == "schema_invalid"
    assert reason_of(KeyError("x")) == "KeyError"
