"""shared.logs: JSON lines for machines, readable lines on a terminal, no secrets in either."""

from __future__ import annotations

import io
import json
import logging
import re
import time

import pytest
from pydantic import ValidationError

from shared.config.settings import Settings
from shared.logs import STAGE_FIELDS, configure_logging, only, stage_event

SECRET = "s3cret-value-never-logged"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


# Each test configures this process's logging, as every CLI command does.
pytestmark = pytest.mark.usefixtures("restore_logging")


def _settle_event() -> None:
    stage_event(
        logging.getLogger("settleq.stage"),
        "settle",
        started=time.perf_counter() - 0.0123,
        job_id="job-1",
        chunk_id="chunk-1",
        partition_key="VENDOR-0042",
        correlation_id=None,
        posted=3,
    )


def test_json_lines_carry_every_stage_field() -> None:
    out = io.StringIO()
    configure_logging("json", service="worker", stream=out)
    _settle_event()
    [line] = out.getvalue().splitlines()
    event = json.loads(line)
    assert set(STAGE_FIELDS) <= set(event)
    assert event["stage"] == "settle" and event["event"] == "settle"
    assert (event["job_id"], event["chunk_id"], event["partition_key"]) == (
        "job-1",
        "chunk-1",
        "VENDOR-0042",
    )
    assert event["correlation_id"] is None  # present, null: the chunk has no single one
    assert event["latency_ms"] >= 12.3
    assert (event["level"], event["service"], event["posted"]) == ("info", "worker", 3)
    assert event["timestamp"].endswith("Z")


def test_console_lines_are_readable_not_json() -> None:
    out = Terminal()
    configure_logging("console", service="worker", stream=out)
    _settle_event()
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.getvalue())  # coloured on a terminal
    assert "settle" in text and "job_id=job-1" in text and "partition_key=VENDOR-0042" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_auto_is_console_on_a_terminal_and_json_otherwise() -> None:
    piped, terminal = io.StringIO(), Terminal()
    configure_logging("auto", stream=piped)
    logging.getLogger("settleq.test").info("hello")
    configure_logging("auto", stream=terminal)
    logging.getLogger("settleq.test").info("hello")
    assert json.loads(piped.getvalue())["event"] == "hello"
    assert not terminal.getvalue().startswith("{") and "hello" in terminal.getvalue()


def test_third_party_records_are_rendered_too() -> None:
    out = io.StringIO()
    configure_logging("json", stream=out)
    logging.getLogger("dramatiq.worker").warning("consumer %s stopped", "c1")
    event = json.loads(out.getvalue())
    assert (event["event"], event["logger"], event["level"]) == (
        "consumer c1 stopped",
        "dramatiq.worker",
        "warning",
    )


@pytest.mark.parametrize("fmt", ["json", "console"])
def test_secrets_and_url_passwords_never_reach_the_output(fmt: str) -> None:
    out = io.StringIO()
    configure_logging(fmt, stream=out, secrets=[SECRET])
    log = logging.getLogger("settleq.test")
    log.warning("cannot reach postgresql://settleq:pg-password@db:5432/settleq")
    log.info("signed with %s", SECRET, extra={"detail": {"key": SECRET}})
    try:
        raise RuntimeError(f"amqp://guest:rabbit-password@mq/ {SECRET}")
    except RuntimeError:
        log.exception("failed")
    text = out.getvalue()
    for leaked in (SECRET, "pg-password", "rabbit-password"):
        assert leaked not in text
    assert "postgresql://settleq:***@db:5432/settleq" in text


def test_only_names_a_single_value() -> None:
    assert only(["V-1", "V-1"]) == "V-1"
    assert only(["V-1", "V-2"]) is None
    assert only([]) is None


def test_log_format_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SETTLEQ_LOG_FORMAT", "JSON")
    assert Settings().log_format == "json"
    monkeypatch.setenv("SETTLEQ_LOG_FORMAT", "xml")
    with pytest.raises(ValidationError):
        Settings()


def _pika_loses_a_connection() -> None:
    """What pika logs when it finds a connection RabbitMQ dropped, then closes it."""
    reset = ConnectionResetError(104, "Connection reset by peer")
    try:
        raise reset
    except ConnectionResetError:
        logging.getLogger("pika.adapters.utils.io_services_utils").exception(
            "_AsyncBaseTransport._produce() failed, aborting connection: error=%r", reset
        )
    lost = f"StreamLostError: ('Stream connection lost: {reset!r}',)"
    logging.getLogger("pika.adapters.base_connection").error("connection_lost: %s", lost)
    logging.getLogger("pika.adapters.blocking_connection").error(
        "Unexpected connection close detected: %s", lost
    )
    logging.getLogger("pika.adapters.blocking_connection").error(
        "BlockingConnection.close(200, 'Normal shutdown') called on closed connection."
    )


@pytest.mark.regression
def test_a_lost_broker_connection_is_one_info_line_and_nothing_at_shutdown() -> None:
    from shared.adapters.rabbitmq.logs import expected_connection_loss

    stream = io.StringIO()
    configure_logging("json", stream=stream)
    _pika_loses_a_connection()
    [event] = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert event["level"] == "info" and "Traceback" not in stream.getvalue()
    assert event["event"].startswith("broker connection lost, reopened when next used")
    with expected_connection_loss():
        _pika_loses_a_connection()
    assert len(stream.getvalue().splitlines()) == 1
    # Anything else pika reports is still an error.
    logging.getLogger("pika.adapters.blocking_connection").error("Connection workflow failed")
    assert json.loads(stream.getvalue().splitlines()[-1])["level"] == "error"
