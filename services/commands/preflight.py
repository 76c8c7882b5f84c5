"""What a server command checks before it starts (docs/operations.md#start-up-checks):
its settings (one line and exit 2 when they are wrong), the credentials it runs
without and the retired settings still set (a WARNING each), and the services
it needs: the database, reachable and migrated, the broker's login and Redis
(one line with the cause and the fix, exit 1). The API, worker and relay
packages stay independent of one another: only services.commands.cli runs this."""

from __future__ import annotations

import errno
import logging
from collections.abc import Callable, Collection, Iterable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import typer

from shared.config.explain import explain
from shared.config.settings import RETIRED, Settings
from shared.logs import silenced

log = logging.getLogger("settleq.preflight")

DATABASE, BROKER, REDIS = "database", "broker", "redis"
QUEUES = "queues"  # after BROKER: the prefix's queues are of the configured type
TIMEOUT_S = 3.0


def load_settings(command: str) -> Settings:
    """The settings, or one line naming the variable that is wrong, and exit 2."""
    problem: str | None
    try:
        settings = Settings()
    except (ValueError, OSError) as exc:
        problem = explain(exc)
    else:
        problem = ledger_file_problem(settings.database_url)
        if problem is None:
            return settings
    typer.echo(f"settleq {command}: configuration error: {problem}", err=True)
    raise typer.Exit(2)


def ledger_file_problem(database_url: str) -> str | None:
    """An SQLite ledger in a directory that does not exist: SQLite would say only
    "unable to open database file", at the first connection."""
    if not database_url.startswith("sqlite") or "://" not in database_url:
        return None
    path = database_url.split("://", 1)[1].removeprefix("/").split("?", 1)[0]
    if not path or path == ":memory:":
        return None
    directory = Path(path).parent
    if directory.is_dir():
        return None
    return (
        f"SETTLEQ_DATABASE_URL: the SQLite file {path} cannot be created: its directory"
        f" {directory} does not exist; fix: create it, or name a file in a directory that"
        " exists (the default is sqlite:///./settleq.db)"
    )


def missing_credentials(settings: Settings) -> list[str]:
    """What the API cannot do with these settings, one sentence each."""
    missing = []
    if not settings.producer_keys:
        missing.append(
            "no producer keys in SETTLEQ_PRODUCER_KEYS: unless the database holds some"
            " (`settleq keys list`), every POST /v1/batches will be 401;"
            " create one with `settleq keys create`"
        )
    for role, tokens, what in (
        ("viewer", settings.viewer_tokens, "reads and metrics scrapes need an operator token"),
        (
            "operator",
            settings.operator_tokens,
            "publishing contracts and repairing dead letters and disputes will be 401",
        ),
    ):
        if not tokens:
            missing.append(
                f"no {role} tokens (SETTLEQ_{role.upper()}_TOKENS): {what};"
                f" create one with `settleq tokens create --role {role}`"
            )
    return missing


def warn_metrics_token(settings: Settings, metrics_port: int) -> None:
    """A worker serving metrics that no token may read."""
    if metrics_port and not (settings.viewer_tokens or settings.operator_tokens):
        log.warning(
            "no viewer tokens (SETTLEQ_VIEWER_TOKENS): every scrape of this worker's"
            " /metrics (port %d) will be 401; create one with"
            " `settleq tokens create --role viewer`",
            metrics_port,
        )


def warn_missing(settings: Settings) -> None:
    for sentence in missing_credentials(settings):
        log.warning(sentence)


def warn_retired(among: Collection[str] = tuple(RETIRED)) -> None:
    """A WARNING for each retired setting (of those ``among``) still set
    (accepted and ignored)."""
    for sentence in Settings.retired_in_use(among):
        log.warning(sentence)


def host_port(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def http_url(host: str, port: int) -> str:
    return f"http://{host_port(host, port)}"


def port_problem(host: str, port: int) -> str | None:
    """Whether the API could listen on ``host:port``, found by listening there
    a moment: a server started on a taken port dies on it only once it runs."""
    import socket

    where = host_port(host, port)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        with socket.socket(family, kind, proto) as probe:
            # As uvicorn binds: a port left in TIME_WAIT by a stopped server is free.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
            probe.listen()
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return (
                f"port_in_use: {where} is already in use (another settleq or another program"
                " listens there); fix: stop it, or choose another --port or SETTLEQ_API_PORT"
            )
        return (
            f"port_unavailable: cannot listen on {where} ({exc.strerror or exc});"
            " fix: correct SETTLEQ_API_HOST, or choose another --port or SETTLEQ_API_PORT"
        )
    return None


def check(command: str, settings: Settings, needs: Iterable[str]) -> None:
    """Exit 1 with one line (the cause and the fix) at the first service that fails."""
    probes: dict[str, Callable[[Settings], str | None]] = {
        DATABASE: database_problem,
        BROKER: broker_problem,
        REDIS: redis_problem,
        QUEUES: queues_problem,
    }
    for need in needs:
        problem = probes[need](settings)
        if problem is not None:
            typer.echo(f"settleq {command}: {problem}", err=True)
            raise typer.Exit(1)


def database_problem(settings: Settings) -> str | None:
    from sqlalchemy.exc import SQLAlchemyError

    from shared.adapters.db.engine import make_engine
    from shared.adapters.db.migrate import unmigrated

    engine = make_engine(settings.database_url, component="settleq-cli")
    try:
        problem = unmigrated(engine, settings.database_url)
    except SQLAlchemyError as exc:
        return unreachable_database(exc)
    finally:
        engine.dispose()
    return None if problem is None else f"database_unmigrated: {problem}"


def unreachable_database(exc: Exception) -> str:
    # The driver's own first line (it names the host and database, never a password).
    reason = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
    return (
        f"database_unreachable: cannot reach the database (SETTLEQ_DATABASE_URL): {reason};"
        " fix: start it, create the database or correct SETTLEQ_DATABASE_URL"
    )


def broker_problem(settings: Settings) -> str | None:
    import pika
    import pika.exceptions as pe

    from shared.adapters.rabbitmq.broker import connection_parameters

    where = without_password(settings.broker_url)
    params = connection_parameters(settings.broker_url, TIMEOUT_S)
    for node in params:
        node.blocked_connection_timeout = TIMEOUT_S
    try:
        with silenced("pika"):  # its errors carry a traceback: the line says it
            pika.BlockingConnection(params).close()
    except (pe.ProbableAuthenticationError, pe.AuthenticationError):
        return (
            f"broker_auth_failed: RabbitMQ at {where} refused the login;"
            " fix: put a user and password RabbitMQ knows in SETTLEQ_BROKER_URL"
        )
    except pe.ProbableAccessDeniedError:
        return (
            f"broker_auth_failed: RabbitMQ at {where} denied access to the virtual host;"
            " fix: grant the user that vhost or correct SETTLEQ_BROKER_URL"
        )
    except (pe.AMQPError, OSError) as exc:
        return (
            f"broker_unreachable: cannot reach RabbitMQ at {where} ({type(exc).__name__});"
            " fix: start RabbitMQ or correct SETTLEQ_BROKER_URL"
        )
    return None


def queues_problem(settings: Settings) -> str | None:
    """Queues of another type under this prefix, or one of ours declared otherwise.

    Declares the stack's queues (what its first publish or consumer would do),
    so that a mismatch is this one line rather than a worker's endless retries."""
    import pika

    from shared.adapters.rabbitmq.broker import close_broker, connection_parameters, make_broker
    from shared.adapters.rabbitmq.declare import QueueMismatch, foreign_message, foreign_queues
    from shared.domain.pipeline.queues import FAMILIES

    connection = pika.BlockingConnection(connection_parameters(settings.broker_url, TIMEOUT_S))
    try:
        found = foreign_queues(connection.channel, settings.queue_prefix, settings.queue_type)
    finally:
        connection.close()
    if found:
        return foreign_message(found, settings.queue_type)
    broker = make_broker(settings)
    try:
        for family in FAMILIES:
            for name in settings.queues_of(family):
                broker.declare_queue(name, ensure=True)
    except QueueMismatch as exc:
        return str(exc)
    finally:
        close_broker(broker)
    return None


def redis_problem(settings: Settings) -> str | None:
    import redis

    where = without_password(settings.redis_url)
    client = redis.Redis.from_url(
        settings.redis_url, socket_connect_timeout=TIMEOUT_S, socket_timeout=TIMEOUT_S
    )
    try:
        client.ping()
    except redis.AuthenticationError:
        return (
            f"redis_auth_failed: Redis at {where} refused the password;"
            " fix: correct the password in SETTLEQ_REDIS_URL"
        )
    except (redis.RedisError, OSError) as exc:
        return (
            f"redis_unreachable: cannot reach Redis at {where} ({type(exc).__name__});"
            " fix: start Redis or correct SETTLEQ_REDIS_URL"
        )
    finally:
        client.close()
    return None


def without_password(url: str) -> str:
    """The URL to show: its password, if any, as ***."""
    if ";" in url:  # a cluster's nodes
        return ";".join(without_password(node) for node in url.split(";"))
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{netloc}"))
