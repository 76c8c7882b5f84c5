"""``settleq events tail``: watch outcome events as the relay publishes them,
like ``stripe listen`` (docs/architecture.md#outcome-events).

A temporary queue (exclusive, auto-deleted: it goes when the command does) is
bound to the ``<prefix>.events`` topic exchange. A message carries a batch of
events (``{"events": [...]}``); each event is printed on one line as its
message arrives, until Ctrl-C (exit 130, as every command that follows
something: the shell's convention for a command interrupted) or ``--count``
events (exit 0).
"""

from __future__ import annotations

import json
import threading
from contextlib import suppress
from typing import Annotated, Any

import pika
import pika.exceptions
import typer

from services.commands.help import default
from services.commands.money import money
from services.commands.options import interruptible
from services.commands.preflight import load_settings, without_password
from shared.adapters.rabbitmq.broker import connection_parameters
from shared.logs import silenced

app = typer.Typer(help="Watch outcome events as they are published (RabbitMQ, no token).")


def event_line(event: dict[str, Any]) -> str:
    """``occurred_at type kind partition document/line amount job`` of one event."""
    kind = str(event.get("kind", ""))
    parts = [
        str(event.get("occurred_at", "")),
        str(event.get("type", "")),
        kind,
        str(event.get("partition_key", "")),
        f"{event.get('document_id', '')}/{event.get('line_ref', '')}",
        money(event.get("amount"), kind) or "-",
        f"job {event.get('job_id', '')}",
    ]
    return " ".join(parts)


def message_lines(body: bytes, as_json: bool) -> list[str]:
    """One line per event of a message's body (its JSON with ``as_json``); a
    body that is not a batch of events is printed as it came."""
    text = body.decode("utf-8", "replace")
    try:
        events = json.loads(text)["events"]
        if not isinstance(events, list) or not all(isinstance(e, dict) for e in events):
            raise ValueError("not a list of events")
        return [_json(e) if as_json else event_line(e) for e in events]
    except (ValueError, TypeError, KeyError):
        return [text]


def _json(event: dict[str, Any]) -> str:
    # As compact as on the wire, and without escaping what was sent unescaped.
    return json.dumps(event, ensure_ascii=False, separators=(",", ":"))


def _connect(broker_url: str) -> pika.BlockingConnection:
    try:
        with silenced("pika"):  # its records of a refused connection carry a traceback
            return pika.BlockingConnection(connection_parameters(broker_url))
    except pika.exceptions.ProbableAuthenticationError:
        cause = "the broker refused the login: check the user and password in SETTLEQ_BROKER_URL"
    except (pika.exceptions.AMQPError, OSError) as exc:
        cause = (
            f"cannot reach the broker at {without_password(broker_url)} ({type(exc).__name__}):"
            " start RabbitMQ or correct SETTLEQ_BROKER_URL"
        )
    typer.echo(f"settleq events tail: {cause}", err=True)
    raise typer.Exit(1)


@app.command("tail")
def events_tail(
    routing_key: Annotated[
        str,
        typer.Option(help="Binding pattern: settlement.<outcome>.<kind>, * one word, # any words."),
    ] = "settlement.#",
    as_json: Annotated[bool, typer.Option("--json", help="Print each event's JSON.")] = False,
    count: Annotated[
        int, typer.Option(min=0, help="Stop after this many events; 0 = until Ctrl-C.")
    ] = 0,
    prefix: Annotated[
        str | None,
        typer.Option(help="Queue prefix of the stack." + default("SETTLEQ_QUEUE_PREFIX, settleq")),
    ] = None,
) -> None:
    """Print outcome events as they arrive, one line each (or --json), until Ctrl-C."""
    settings = load_settings("events tail")
    exchange = f"{prefix or settings.queue_prefix}.events"
    with interruptible() as stop:
        interrupted = _tail(settings.broker_url, exchange, routing_key, as_json, count, stop)
    if interrupted:
        raise typer.Exit(130)


def _tail(
    broker_url: str,
    exchange: str,
    routing_key: str,
    as_json: bool,
    count: int,
    stop: threading.Event,
) -> bool:
    """Print the events; whether Ctrl-C stopped it (rather than ``count``)."""
    # Ctrl-C only sets ``stop`` (interruptible): a KeyboardInterrupt inside pika
    # mid-frame left it waiting for a reply it had already read.
    connection = _connect(broker_url)
    seen = 0
    try:
        channel = connection.channel()
        channel.exchange_declare(exchange, exchange_type="topic", durable=True)
        queue = channel.queue_declare("", exclusive=True, auto_delete=True).method.queue
        channel.queue_bind(queue, exchange, routing_key=routing_key)
        typer.echo(f"tailing {exchange} ({routing_key}); Ctrl-C to stop", err=True)
        for _method, _properties, body in channel.consume(
            queue, auto_ack=True, inactivity_timeout=0.25
        ):
            if stop.is_set():
                break
            if body is None:  # nothing within the inactivity timeout
                continue
            for line in message_lines(body, as_json):
                print(line, flush=True)
                seen += 1
                if count and seen >= count:
                    break
            if count and seen >= count:
                break
        return stop.is_set()
    except KeyboardInterrupt:  # a second Ctrl-C, mid-frame
        return True
    finally:
        # Closing may fail half-way (Ctrl-C mid-frame, the broker gone): the queue
        # is exclusive, so it goes with the connection whatever happens here.
        with suppress(Exception):
            if connection.is_open:
                channel.cancel()
                connection.close()
