"""Real failures map onto the exception tree: transient ones are retried."""

from __future__ import annotations

import sqlite3

import dramatiq
import pika.exceptions
import psycopg
import pytest
import redis
from dramatiq.middleware import TimeLimitExceeded
from sqlalchemy import exc as sa_exc

from services.worker.failures import is_transient, lost_the_database, reason_of
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


def _psycopg_error(sqlstate: str | None) -> sa_exc.OperationalError:
    """SQLAlchemy's wrapper around a psycopg error carrying ``sqlstate``."""
    error = psycopg.OperationalError("server says no")
    error.sqlstate = sqlstate  # type: ignore[misc]
    return sa_exc.OperationalError("INSERT", {}, error)


@pytest.mark.parametrize("sqlstate", [None, "08006", "57P01", "57P03", "25006"])
def test_a_connection_gone_or_a_read_only_server_is_a_lost_database(
    sqlstate: str | None,
) -> None:
    assert lost_the_database(_psycopg_error(sqlstate))


@pytest.mark.parametrize("sqlstate", ["40P01", "40001", "55P03", "23505"])
def test_a_deadlock_or_a_lock_timeout_is_an_attempt_that_failed(sqlstate: str) -> None:
    error = _psycopg_error(sqlstate)
    assert not lost_the_database(error)


def test_sqlite_busy_and_other_errors_are_not_a_lost_database() -> None:
    busy = sa_exc.OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
    assert not lost_the_database(busy)
    assert not lost_the_database(ValueError("a bug"))
    assert not lost_the_database(redis.ConnectionError("refused"))
