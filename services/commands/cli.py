"""``settleq``: run the services, migrate, submit and watch batches
(docs/operations.md#commands)."""

from __future__ import annotations

import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from services.commands import demo, errors, openapi_doc, preflight
from services.commands.finance import history, ledger, periods, remittances
from services.commands.help import default
from services.commands.intake import batches, edi, events, jobs
from services.commands.options import console
from services.commands.preflight import BROKER, DATABASE, QUEUES, REDIS, load_settings
from services.commands.repair import audit, disputes, dlq
from services.commands.setup import contracts, credentials, partners, webhooks
from services.supervisor.policy import RestartPolicy
from services.supervisor.processes import ChildSpec, Supervisor
from shared.config.settings import RETIRED_SUPERVISION, Settings
from shared.domain.pipeline.messages import COMPUTE_HEAVY, FAST_PATH, WEBHOOKS

_ME = [sys.executable, "-m", "services.commands.cli"]
# A supervisor's children: their parent checked the services, and a child
# restarted during a short outage retries as it always did.
CHECKED = "--checked"
CheckedOpt = Annotated[
    bool, typer.Option(CHECKED, hidden=True, help="Skip the start-up checks (supervised).")
]

# The commands that run a part of the stack; every other one is a client's.
SERVERS = ("api", "worker", "relay", "up", "migrate")
# Local ones: they talk to no API.
LOCAL = {
    "gen": "a synthetic batch",
    "keys": "a producer key",
    "tokens": "a bearer token",
    "openapi": "the API's OpenAPI document",
}

app = typer.Typer(
    epilog=(
        "Start here: `settleq demo --start-stack` (embedded SQLite ledger, needs RabbitMQ and"
        " Redis on localhost). Logs are JSON lines unless stderr is a terminal;"
        " SETTLEQ_LOG_FORMAT=json|console overrides."
    ),
    no_args_is_help=True,
)


@app.callback()
def _configure(ctx: typer.Context) -> None:
    # Every command logs the same way (shared/logs.py), named by what it runs.
    from shared.logs import configure_logging

    try:
        settings = Settings()
    except (ValueError, OSError):
        configure_logging(service=ctx.invoked_subcommand)  # the command reports the setting
        return
    configure_logging(
        settings.log_format,
        settings.log_level,
        service=ctx.invoked_subcommand,
        secrets=settings.secrets(),
    )


@app.command()
def migrate() -> None:
    """Apply the database migrations and create the internal signing key."""
    _migrate_or_exit("migrate", load_settings("migrate"))
    console.print("migrated", style="green")


def _migrate_or_exit(command: str, settings: Settings) -> None:
    """Migrate; a database that cannot be reached is one line and exit 1 (a URL
    no engine opens was refused with the settings; a bug keeps its traceback)."""
    from sqlalchemy.exc import OperationalError

    try:
        _migrate(settings)
    except OperationalError as exc:
        typer.echo(f"settleq {command}: {preflight.unreachable_database(exc)}", err=True)
        raise typer.Exit(1) from None


def _migrate(settings: Settings) -> None:
    from shared.adapters.db.engine import make_engine
    from shared.adapters.db.migrate import ensure_internal_key, upgrade

    upgrade(
        settings.database_url,
        settings.first_period,
        settings.calendar(),
        currency=settings.currency,
    )
    engine = make_engine(settings.database_url, component="settleq-cli")
    ensure_internal_key(engine)
    engine.dispose()


@app.command()
def api(
    host: Annotated[
        str | None,
        typer.Option(help="Interface to bind." + default("SETTLEQ_API_HOST, 127.0.0.1")),
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to serve on." + default("SETTLEQ_API_PORT, 8000"))
    ] = None,
    checked: CheckedOpt = False,
) -> None:
    """Serve the HTTP API (the front door, jobs, contracts, dead letters, health)."""
    import uvicorn

    from services.api.app import create_app
    from services.tuning.malloc import pin_mmap_threshold

    pin_mmap_threshold()  # a batch's large buffers go back to the system once freed
    settings = load_settings("api")
    host, port = host or settings.api_host, port or settings.api_port
    preflight.warn_missing(settings)
    # Checked under `up` too: a restarted API may find its port taken since.
    _port_free("api", host, port)
    if not checked:
        preflight.check("api", settings, (DATABASE, BROKER, REDIS, QUEUES))
    if settings.x12_map_processes > 1:
        from services.api.edi.parallel.child import SERVER

        SERVER.start()  # X12 mapping's fork server, before the server's threads
    uvicorn.run(
        create_app(settings),
        host=host,
        port=port,
        log_level="warning",
        log_config=None,  # uvicorn's records go through settleq's formatter
    )


def worker_processes(settings: Settings, queues: str) -> int:
    """The processes a worker of these queue families runs: its tier's setting
    (the larger one for a worker of both)."""
    per_tier = {
        FAST_PATH: settings.fast_path_processes,
        COMPUTE_HEAVY: settings.compute_heavy_processes,
    }
    return max(per_tier.get(q.strip(), 1) for q in queues.split(","))


@app.command()
def worker(
    ctx: typer.Context,
    queues: Annotated[
        str,
        typer.Option(
            help="Queue families: fast_path, compute_heavy or both, comma-separated;"
            " or webhooks alone (the webhooks component)."
        ),
    ] = "fast_path,compute_heavy",
    threads: Annotated[
        int | None,
        typer.Option(help="Threads per process." + default("SETTLEQ_WORKER_THREADS, 2")),
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option(
            help="Worker processes."
            + default(
                "SETTLEQ_FAST_PATH_PROCESSES or SETTLEQ_COMPUTE_HEAVY_PROCESSES, by tier;"
                " the larger for both tiers"
            )
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            help="Prometheus port of the first process (process i: +i); 0 = none."
            + default("SETTLEQ_WORKER_METRICS_PORT, 0")
        ),
    ] = None,
    checked: CheckedOpt = False,
) -> None:
    """Run Dramatiq workers: fast_path validates chunks, compute_heavy settles them,
    webhooks delivers what producers hear back."""
    settings = load_settings("worker")
    tiers = [q.strip() for q in queues.split(",") if q.strip()]
    if WEBHOOKS in tiers:
        _webhooks(settings, tiers, processes, metrics_port, checked)
        return
    count = processes or worker_processes(settings, queues)
    port = settings.worker_metrics_port if metrics_port is None else metrics_port
    if not checked:
        preflight.warn_metrics_token(settings, port)
        preflight.check("worker", settings, (DATABASE, BROKER, REDIS, QUEUES))
    threads = threads or settings.worker_threads
    if count > 1:
        # One process of each; a process that dies is restarted (services/supervisor).
        preflight.warn_retired(RETIRED_SUPERVISION)
        component = tiers[0] if len(tiers) == 1 else "worker"
        specs = [
            ChildSpec(
                f"{component}-{i}",
                component,
                _worker_argv(queues, threads, port + i if port else 0),
            )
            for i in range(count)
        ]
        raise typer.Exit(_runs(ctx).supervise(settings, specs, None, None))
    from services.worker.runner import run_worker

    run_worker(settings, tiers, threads, port)


def _webhooks(
    settings: Settings,
    tiers: list[str],
    processes: int | None,
    metrics_port: int | None,
    checked: bool,
) -> None:
    """The webhooks component: one process (its threads are
    SETTLEQ_WEBHOOK_THREADS), its metrics on SETTLEQ_WEBHOOK_METRICS_PORT."""
    if tiers != [WEBHOOKS] or (processes or 1) != 1:
        typer.echo(
            "settleq worker: webhooks runs alone, one process a command:"
            " settleq worker --queues webhooks",
            err=True,
        )
        raise typer.Exit(2)
    port = settings.webhook_metrics_port if metrics_port is None else metrics_port
    if not checked:
        preflight.warn_metrics_token(settings, port)
        preflight.check("worker", settings, (DATABASE, BROKER))
    from services.webhooks.runner import run_webhooks

    run_webhooks(settings, port)


def _worker_argv(queues: str, threads: int | None, metrics_port: int) -> list[str]:
    """One worker process (``--processes 1``) of these queue families."""
    argv = [*_ME, "worker", "--queues", queues, "--processes", "1", CHECKED]
    if threads is not None:
        argv += ["--threads", str(threads)]
    return [*argv, "--metrics-port", str(metrics_port)]


@app.command()
def relay(checked: CheckedOpt = False) -> None:
    """Publish committed outcome events to the <prefix>.events exchange."""
    from services.relay.relay import run_relay

    settings = load_settings("relay")
    preflight.warn_retired(["relay_defer_max_s"])  # went with batched events
    if not checked:
        preflight.check("relay", settings, (DATABASE, BROKER))
    run_relay(settings)


def _port_free(command: str, host: str, port: int) -> None:
    """One line and exit 1 when ``host:port`` is taken."""
    problem = preflight.port_problem(host, port)
    if problem is not None:
        typer.echo(f"settleq {command}: {problem}", err=True)
        raise typer.Exit(1)


Supervise = Callable[[Settings, list[ChildSpec], Path | None, Callable[[], None] | None], int]


def supervise(
    settings: Settings,
    specs: list[ChildSpec],
    counts: Path | None = None,
    started: Callable[[], None] | None = None,
) -> int:
    """Run these children under the supervision policy of ``settings``; the exit code.
    With ``counts``, the restart counts and crash-looping components are kept in
    that file, which the children (the API) find in their settings. ``started``
    is called once every child has been started."""
    supervisor = Supervisor(
        specs,
        RestartPolicy.from_settings(settings),
        grace_s=settings.shutdown_grace_s,
        counts_file=counts,
        env={"SETTLEQ_SUPERVISOR_COUNTS_FILE": str(counts)} if counts else None,
    )
    return supervisor.run(started)


@dataclass(frozen=True)
class Runs:
    """What ``up`` and a worker of several processes hand their children to:
    ``supervise`` unless whoever invokes the app passes another as the click
    context's object (``app(args, obj=Runs(...))``), as an embedding program
    or a test that looks at what would be run does."""

    supervise: Supervise = supervise


def _runs(ctx: typer.Context) -> Runs:
    return ctx.obj if isinstance(ctx.obj, Runs) else Runs()


def stack_children(settings: Settings, port: int) -> list[ChildSpec]:
    """What `settleq up` runs: the API, each worker process of each tier (one
    process each, so that a dead one is restarted alone), the relay and the
    webhooks component."""
    children = [ChildSpec("api", "api", [*_ME, "api", "--port", str(port), CHECKED])]
    # Each worker process gets its own metrics port: the fast_path ones first.
    metrics = settings.worker_metrics_port
    tiers = (
        (FAST_PATH, settings.fast_path_processes),
        (COMPUTE_HEAVY, settings.compute_heavy_processes),
    )
    offset = 0
    for tier, count in tiers:
        for i in range(count):
            argv = _worker_argv(tier, None, metrics + offset if metrics else 0)
            children.append(ChildSpec(f"{tier}-{i}", tier, argv))
            offset += 1
    children.append(ChildSpec("relay", "relay", [*_ME, "relay", CHECKED]))
    hooks = settings.webhook_metrics_port
    children.append(ChildSpec(WEBHOOKS, WEBHOOKS, _worker_argv(WEBHOOKS, None, hooks)))
    return children


def say_when_answering(url: str, message: str, poll_s: float = 0.25) -> None:
    """Print ``message`` once the API at ``url`` answers ``/healthz``: its process
    starts seconds before it listens. A thread waits, so that supervision goes
    on meanwhile; an API that never answers is never announced (the supervisor
    logs its deaths)."""
    import threading

    import httpx

    def wait() -> None:
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    typer.echo(message)
                    return
            except httpx.HTTPError:
                pass
            time.sleep(poll_s)

    threading.Thread(target=wait, name="announce-api", daemon=True).start()


@app.command()
def up(
    ctx: typer.Context,
    port: Annotated[
        int | None, typer.Option(help="Port of the API." + default("SETTLEQ_API_PORT, 8000"))
    ] = None,
) -> None:
    """Run the API, both worker tiers, the outbox relay and webhooks on this machine, supervised.

    A process that dies is restarted (backoff 1 s doubling to 30 s); one that
    keeps dying is crash-looping: restarted every 30 s and named by /readyz,
    while the rest goes on. Only SIGTERM or SIGINT stops the stack:
    SETTLEQ_SHUTDOWN_GRACE_S (30 s) to stop, then what is left is killed (exit 1).
    With no SETTLEQ_DATABASE_URL the ledger is the SQLite file ./settleq.db,
    migrated here first; on PostgreSQL run `settleq migrate` before.
    """
    settings = load_settings("up")
    preflight.warn_retired(RETIRED_SUPERVISION)
    port = settings.api_port if port is None else port
    # Before anything else: on a taken port the workers and relay would consume
    # the live queues while the API died on its port, over and over.
    _port_free("up", settings.api_host, port)
    if settings.database_url.startswith("sqlite"):
        # The broker and Redis first, so a refusal is not preceded by the
        # migration's log lines (their queues are declared only once it is done).
        preflight.check("up", settings, (BROKER, REDIS))
        _migrate_or_exit("up", settings)  # the embedded default needs no separate step
    # Every child would die on a missing service, be restarted and die again,
    # each time with a traceback: refuse in one line.
    preflight.check("up", settings, (DATABASE, BROKER, REDIS, QUEUES))
    url = preflight.http_url(settings.api_host, port)

    def started() -> None:
        say_when_answering(url, f"settleq: API on {url}, dashboard {url}/dashboard")

    with tempfile.TemporaryDirectory(prefix="settleq-up-") as scratch:
        counts = Path(settings.supervisor_counts_file or Path(scratch) / "restarts.json")
        children = stack_children(settings, port)
        code = _runs(ctx).supervise(settings, children, counts, started)
    raise typer.Exit(code)


# The client commands, in the order `settleq --help` lists them.
app.add_typer(batches.app)
app.add_typer(jobs.app, name="jobs")
app.add_typer(contracts.app, name="contracts")
app.add_typer(dlq.app, name="dlq")
app.add_typer(disputes.app, name="disputes")
app.add_typer(history.lines, name="lines")
app.add_typer(history.identity_app)
app.add_typer(ledger.app, name="ledger")
app.add_typer(periods.app, name="periods")
app.add_typer(periods.finance)
app.add_typer(remittances.app, name="remittances")
app.add_typer(remittances.deductions, name="deductions")
app.add_typer(webhooks.app, name="webhooks")
app.add_typer(partners.app, name="partners")
app.add_typer(partners.partitions, name="partitions")
app.add_typer(edi.ack_app, name="edi")
app.add_typer(audit.app, name="audit")
app.add_typer(events.app, name="events")
app.add_typer(credentials.keys, name="keys")
app.add_typer(credentials.tokens, name="tokens")
app.add_typer(demo.app)
app.add_typer(openapi_doc.app)


def summary(names: list[str]) -> str:
    """The top-level help: every command, by what it needs (written from the
    registered commands, so none is left out)."""
    clients = [n for n in names if n not in SERVERS and n not in LOCAL and n != "events"]
    local = ", ".join(f"{n} ({LOCAL[n]})" for n in names if n in LOCAL)
    return (
        f"settleq: exactly-once settlement pipeline. Servers ({', '.join(SERVERS)}) read"
        " SETTLEQ_* settings (or the YAML file named by SETTLEQ_CONFIG); client commands"
        f" ({', '.join(clients)}) talk to a running API; `events tail` watches the broker;"
        f" {local} are made here, without a service."
    )


app.info.help = summary(list(typer.main.get_command(app).commands))  # type: ignore[attr-defined]


def main() -> None:
    errors.run(app)  # a failure a user can fix is one line and exit 1, never a traceback


if __name__ == "__main__":
    main()
