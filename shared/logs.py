"""Logging for every settleq process: JSON lines for machines, readable lines for people.

``configure_logging`` is called once per process by the command line. Code
logs with the standard ``logging`` module (Dramatiq, uvicorn and pika do too);
one formatter renders every record:

- ``json``: one JSON object per line (``timestamp``, ``level``, ``logger``,
  ``service``, ``event`` and the record's ``extra`` fields), for log shippers;
- ``console``: aligned ``key=value`` lines, coloured on a terminal;
- ``auto`` (the default): console when stderr is a terminal, else JSON.

The pipeline's stages each log ONE event per unit of work (``stage_event``),
never one per line: at the pipeline's rate a per-line log would cost more than
the settlement. Every event is scrubbed before it is written: credentials in URLs
become ``***`` and so does every secret registered with ``mask`` (producer
secrets, bearer tokens and the internal signing key). Tracebacks are rendered
plainly, never with local variables (they may hold secrets).
"""

from __future__ import annotations

import logging
import re
import sys
import threading
import time
from collections.abc import Iterable, Iterator, MutableMapping
from contextlib import contextmanager
from typing import IO, Any, Literal

import structlog
from structlog.dev import ConsoleRenderer, plain_traceback
from structlog.stdlib import ProcessorFormatter
from structlog.typing import EventDict, ExcInfo, Processor

from shared.adapters.rabbitmq.logs import quiet_connection_loss

LogFormat = Literal["auto", "json", "console"]

# The fields every stage event carries (null where the unit of work has no single value).
STAGE_FIELDS = ("stage", "correlation_id", "job_id", "chunk_id", "partition_key", "latency_ms")

_URL_CREDENTIALS = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@\s]+@")
_MASK = "***"
_masked: set[str] = set()
_masked_lock = threading.Lock()
# Attributes uvicorn adds to its records for its own colouring.
_DROPPED = ("color_message",)


def mask(*secrets: str | bytes | None) -> None:
    """Never write these values: every log event containing one shows ``***``."""
    with _masked_lock:
        for secret in secrets:
            if isinstance(secret, bytes):
                secret = secret.decode(errors="replace")
            # Very short values would mask ordinary words; secrets are never that short.
            if secret and len(secret) >= 8:
                _masked.add(secret)


def redact(text: str) -> str:
    """``text`` without URL credentials or registered secrets."""
    if "://" in text:
        text = _URL_CREDENTIALS.sub(rf"\g<scheme>\g<user>:{_MASK}@", text)
    for secret in _masked:
        if secret in text:
            text = text.replace(secret, _MASK)
    return text


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    return value


def _scrub_event(_: Any, __: str, event: EventDict) -> EventDict:
    for key, value in event.items():
        if key not in ("_record", "exc_info"):
            event[key] = _scrub(value)
    return event


def _drop_noise(_: Any, __: str, event: EventDict) -> EventDict:
    for key in _DROPPED:
        event.pop(key, None)
    return event


_FIRST = ("timestamp", "level", "service", "logger", "event")


def _first_keys(_: Any, __: str, event: EventDict) -> EventDict:
    # A reader scanning JSON lines finds when, how bad and who at the start of each.
    ordered = {k: event.pop(k) for k in _FIRST if k in event}
    ordered.update(event)
    return ordered


def _scrubbed_traceback(sio: IO[str], exc_info: ExcInfo) -> None:
    import io

    buffer = io.StringIO()
    plain_traceback(buffer, exc_info)
    sio.write(redact(buffer.getvalue()))


def _service(name: str | None) -> Processor:
    def add(_: Any, __: str, event: EventDict) -> EventDict:
        if name:
            event.setdefault("service", name)
        return event

    return add


def make_formatter(
    fmt: Literal["json", "console"], *, service: str | None = None, colors: bool = False
) -> logging.Formatter:
    """The formatter of every settleq log record (``fmt`` already resolved)."""
    pre_chain: list[Processor] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _service(service),
        _drop_noise,
    ]
    renderer: list[Processor]
    if fmt == "json":
        renderer = [
            structlog.processors.format_exc_info,
            _scrub_event,
            _first_keys,
            structlog.processors.JSONRenderer(default=str),
        ]
    else:
        renderer = [
            _scrub_event,
            ConsoleRenderer(
                colors=colors, exception_formatter=_scrubbed_traceback, sort_keys=False
            ),
        ]
    return ProcessorFormatter(
        processors=[ProcessorFormatter.remove_processors_meta, *renderer],
        foreign_pre_chain=pre_chain,
    )


def resolve_format(fmt: str, stream: IO[str]) -> Literal["json", "console"]:
    if fmt == "json":
        return "json"
    if fmt == "console":
        return "console"
    return "console" if _tty(stream) else "json"


def configure_logging(
    fmt: str = "auto",
    level: str = "INFO",
    *,
    service: str | None = None,
    secrets: Iterable[str | None] = (),
    stream: IO[str] | None = None,
) -> None:
    """Send every record of this process, rendered as ``fmt``, to ``stream`` (stderr)."""
    stream = stream or sys.stderr
    resolved = resolve_format(fmt, stream)
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        make_formatter(resolved, service=service, colors=resolved == "console" and _tty(stream))
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in ("pika", "httpx", "httpcore", "alembic.runtime.plugins"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    quiet_connection_loss()
    mask(*secrets)
    # Code that prefers structlog's API goes through the same handler.
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.contextvars.merge_contextvars,
            ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=True,
    )


@contextmanager
def silenced(name: str) -> Iterator[None]:
    """In this block, logger ``name`` and its children write nothing: for a
    command that says in one line of its own why a connection failed, where
    the library's records would come first with a traceback (pika's do)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        logger.setLevel(level)


def _tty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty is not None and isatty())


def only(values: Iterable[str]) -> str | None:
    """The single distinct value, or None when there are none or several."""
    found = set(values)
    return next(iter(found)) if len(found) == 1 else None


def stage_event(
    logger: logging.Logger,
    stage: str,
    *,
    started: float,
    job_id: str | None,
    chunk_id: str | None,
    partition_key: str | None,
    correlation_id: str | None,
    level: int = logging.INFO,
    **extra: Any,
) -> None:
    """Log the one event of a unit of work at a stage; ``started`` is ``time.perf_counter()``
    at its start. Every field of ``STAGE_FIELDS`` is present, null where the unit
    has no single value (a chunk of several partitions has no one partition key)."""
    fields: MutableMapping[str, Any] = {
        "stage": stage,
        "correlation_id": correlation_id,
        "job_id": job_id,
        "chunk_id": chunk_id,
        "partition_key": partition_key,
        "latency_ms": round((time.perf_counter() - started) * 1000, 2),
        **extra,
    }
    logger.log(level, stage, extra=fields)
