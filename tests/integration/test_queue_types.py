"""Queue types on the real RabbitMQ: what a quorum stack declares, that its
delivery limit dead-letters rather than drops, that a prefix holding the other
type's queues stops a stack with a line that says what to delete, and that a
broker URL naming several nodes reaches one that is up."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from collections.abc import Iterator

import pika
import pytest

from services.api.queue_stats import QueueStats
from services.commands.preflight import broker_problem, queues_problem
from services.worker.actors import build_broker
from services.worker.context import make_context
from services.worker.stages import validate_chunk
from shared.adapters.db.engine import make_engine
from shared.adapters.rabbitmq.broker import (
    close_broker,
    connection_parameters,
    enqueue,
    make_broker,
)
from shared.adapters.rabbitmq.logs import quiet_connection_loss
from shared.config.settings import Settings
from shared.domain.pipeline.messages import ChunkMessage, priority_for
from shared.domain.pipeline.queues import FAMILIES, every_queue
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import BROKER_URL, ServiceEnv, delete_queues, new_prefix

DEAD_NODE = "amqp://guest:guest@127.0.0.1:1/"  # nothing listens there


@pytest.fixture
def prefix() -> Iterator[str]:
    name = new_prefix()
    yield name
    delete_queues(name)


def settings_for(test_env: ServiceEnv, prefix: str, **overrides: object) -> Settings:
    return test_env.settings(queue_prefix=prefix, **overrides)


def declare_all(settings: Settings) -> None:
    broker = make_broker(settings)
    try:
        for family in FAMILIES:
            for name in settings.queues_of(family):
                broker.declare_queue(name, ensure=True)
    finally:
        close_broker(broker)


def declared(prefix: str) -> dict[str, tuple[str, dict[str, object]]]:
    """Each queue under ``prefix``: its type and arguments, as RabbitMQ reports them."""
    listing = subprocess.run(
        ["rabbitmqctl", "-q", "list_queues", "name", "type", "arguments", "--formatter", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return {
        # Each argument is [name, AMQP type, value].
        row["name"]: (row["type"], {arg[0]: arg[-1] for arg in row["arguments"]})
        for row in json.loads(listing.stdout)
        if row["name"].startswith(f"{prefix}.")
    }


def test_a_quorum_stack_declares_every_queue_quorum_with_confirmed_dead_lettering(
    test_env: ServiceEnv, prefix: str
) -> None:
    settings = settings_for(test_env, prefix, queue_type="quorum", queue_delivery_limit=7)
    declare_all(settings)
    found = declared(prefix)
    assert sorted(found) == sorted(every_queue(prefix, "quorum"))
    for name, (kind, arguments) in found.items():
        assert kind == "quorum", name
        assert arguments["x-dead-letter-strategy"] == "at-least-once", name
        assert arguments["x-overflow"] == "reject-publish", name
        assert "x-max-priority" not in arguments, name
        if not name.endswith(".XQ"):
            assert arguments["x-delivery-limit"] == 7, name
            assert arguments["x-dead-letter-routing-key"] == f"{name.removesuffix('.DQ')}.XQ"


def test_a_classic_stack_keeps_one_priority_queue_a_tier(test_env: ServiceEnv, prefix: str) -> None:
    declare_all(settings_for(test_env, prefix))
    found = declared(prefix)
    assert sorted(found) == sorted(every_queue(prefix, "classic"))
    assert found[f"{prefix}.fast_path"] == (
        "classic",
        {
            "x-dead-letter-exchange": "",
            "x-dead-letter-routing-key": f"{prefix}.fast_path.XQ",
            "x-max-priority": 9,
        },
    )


def test_a_message_past_the_delivery_limit_is_dead_lettered_not_dropped(
    test_env: ServiceEnv, prefix: str
) -> None:
    settings = settings_for(test_env, prefix, queue_type="quorum", max_attempts=2)
    settings = settings.model_copy(update={"queue_delivery_limit": 2})
    lane = settings.queue_for("compute_heavy", 1)
    broker = make_broker(settings)
    try:
        enqueue(broker, lane, "settle", {"chunk": "poison"}, 1)
    finally:
        close_broker(broker)
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        channel = connection.channel()
        deliveries = 0
        while True:  # a worker that dies holding it, every time: returned unacknowledged
            method, _, _ = channel.basic_get(lane)
            if method is None:
                break
            deliveries += 1
            channel.basic_nack(method.delivery_tag, requeue=True)
            assert deliveries <= 10
        assert deliveries == 3  # the first delivery and two returns
        deadline = time.monotonic() + 10  # RabbitMQ moves it, confirmed, in the background
        while channel.queue_declare(f"{lane}.XQ", passive=True).method.message_count != 1:
            assert time.monotonic() < deadline, "the message was dropped, not dead-lettered"
            time.sleep(0.1)
    finally:
        connection.close()


def test_quorum_beside_classic_queues_of_the_prefix_says_what_to_delete(
    test_env: ServiceEnv, prefix: str
) -> None:
    declare_all(settings_for(test_env, prefix))
    problem = queues_problem(settings_for(test_env, prefix, queue_type="quorum"))
    assert problem is not None
    assert problem.startswith("queue_mismatch: SETTLEQ_QUEUE_TYPE=quorum, but this prefix")
    assert f"{prefix}.fast_path (0 ready)" in problem
    assert "rabbitmqctl delete_queue" in problem and "SETTLEQ_QUEUE_PREFIX" in problem
    assert queues_problem(settings_for(test_env, prefix)) is None  # classic itself is fine


def test_classic_beside_quorum_queues_of_the_prefix_is_refused_too(
    test_env: ServiceEnv, prefix: str
) -> None:
    declare_all(settings_for(test_env, prefix, queue_type="quorum"))
    problem = queues_problem(settings_for(test_env, prefix))
    assert problem is not None and f"{prefix}.compute_heavy.large (0 ready)" in problem


def test_a_queue_of_the_same_name_declared_otherwise_is_named_not_precondition_failed(
    test_env: ServiceEnv, prefix: str
) -> None:
    lane = f"{prefix}.fast_path.small"
    connection = pika.BlockingConnection(pika.URLParameters(BROKER_URL))
    try:
        connection.channel().queue_declare(lane, durable=True)  # classic, by hand
    finally:
        connection.close()
    problem = queues_problem(settings_for(test_env, prefix, queue_type="quorum"))
    assert problem is not None
    assert problem.startswith(f"queue_mismatch: RabbitMQ already has a queue {lane} declared")
    assert f"rabbitmqctl delete_queue {lane}" in problem
    assert "inequivalent arg" in problem  # RabbitMQ's own detail, kept


def test_a_node_list_reaches_the_node_that_is_up(test_env: ServiceEnv, prefix: str) -> None:
    settings = settings_for(test_env, prefix, broker_url=f"{DEAD_NODE};{BROKER_URL}")
    assert len(connection_parameters(settings.broker_url)) == 2
    assert broker_problem(settings) is None
    assert queues_problem(settings) is None
    broker = make_broker(settings)
    try:
        enqueue(broker, settings.queue_for("fast_path", 9), "validate", {"n": 1})
    finally:
        close_broker(broker)
    engine = make_engine(settings.database_url)
    try:
        assert QueueStats(settings, engine).depths()[f"{prefix}.fast_path"] == 1
    finally:
        engine.dispose()
    only_dead = settings_for(test_env, prefix, broker_url=DEAD_NODE)
    problem = broker_problem(only_dead)
    assert problem is not None and problem.startswith("broker_unreachable")


@pytest.mark.parametrize(("lines", "lane"), [(500_000, "large"), (10, "small")])
def test_a_jobs_lane_travels_from_the_fast_path_to_settlement(
    test_env: ServiceEnv, prefix: str, lines: int, lane: str
) -> None:
    """Fairness without priorities: a big job's chunks stay in its lane on the
    second tier too, so a small job's chunk never queues behind them."""
    settings = settings_for(test_env, prefix, queue_type="quorum")
    broker = build_broker(settings)
    ctx = make_context(settings, broker)
    try:
        vendor = uid("LANE-")
        publish_promo_contracts(ctx.engine, [vendor])
        docs = [promo_doc(vendor, [promo_line(1, "8", "1.00")])]
        job_id, [message] = store_job(ctx.engine, settings, ctx.internal_key, docs)
        fields = {k: message[k] for k in ("chunk_id", "job_id", "kind", "payload_sha256")}
        chunk = ChunkMessage(**fields, priority=priority_for(lines)).signed(ctx.internal_key)
        validate_chunk(ctx, chunk, 1)
        depths = QueueStats(settings, ctx.engine).depths()
        assert {name for name, depth in depths.items() if depth} == {
            f"{prefix}.compute_heavy.{lane}"
        }
    finally:
        ctx.engine.dispose()
        close_broker(broker)


def test_the_checks_log_no_warning_for_queues_not_declared_yet(
    test_env: ServiceEnv, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Asking whether the other type's queues exist is a passive declare, which
    RabbitMQ answers by closing the channel: a newcomer's first start must not
    read as a page of warnings."""
    caplog.set_level(logging.DEBUG)
    assert queues_problem(settings_for(test_env, prefix, queue_type="quorum")) is None
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_node_that_does_not_answer_is_one_info_line_not_a_page_of_errors(
    test_env: ServiceEnv, prefix: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    quiet_connection_loss()  # as every settleq process installs it
    settings = settings_for(test_env, prefix, broker_url=f"{DEAD_NODE};{BROKER_URL}")
    pika.BlockingConnection(connection_parameters(settings.broker_url)).close()
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
    [line] = [r.getMessage() for r in caplog.records if "did not answer" in r.getMessage()]
    assert "127.0.0.1', 1)" in line and "ConnectionRefusedError" in line
