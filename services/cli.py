"""``settleq``: run the services, migrate, submit and watch batches (SPEC §6)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from typing import Annotated

import typer

from services.commands import batches, demo, dlq
from services.commands.options import console
from shared.messages import COMPUTE_HEAVY, FAST_PATH
from shared.settings import Settings

app = typer.Typer(
    help=(
        "settleq: exactly-once settlement pipeline. Servers (api, worker, relay, up, migrate)"
        " read SETTLEQ_* settings (or the YAML file named by SETTLEQ_CONFIG); client commands"
        " (submit, status, gen, demo, dlq) talk to a running API."
    ),
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
    from pydantic import ValidationError

    from shared.logs import configure_logging

    try:
        settings = Settings()
    except (ValidationError, OSError):
        configure_logging(service=ctx.invoked_subcommand)  # the command reports the setting
        return
    configure_logging(
        settings.log_format,
        settings.log_level,
        service=ctx.invoked_subcommand,
        secrets=settings.secrets(),
    )


@app.command()
def openapi() -> None:
    """Print the OpenAPI document the API serves, as YAML (for openapi.yaml)."""
    sys.stdout.write(render_openapi())


def render_openapi() -> str:
    import yaml

    from services.api.app import create_app

    return str(yaml.safe_dump(create_app(Settings()).openapi(), sort_keys=False, width=100))


@app.command()
def migrate() -> None:
    """Apply the database migrations and create the internal signing key."""
    _migrate(Settings())
    console.print("[green]migrated[/green]")


def _migrate(settings: Settings) -> None:
    from shared.db.engine import make_engine
    from shared.db.migrate import ensure_internal_key, upgrade

    upgrade(settings.database_url)
    engine = make_engine(settings.database_url)
    ensure_internal_key(engine)
    engine.dispose()


@app.command()
def api(
    host: Annotated[
        str | None, typer.Option(help="Interface to bind [default: SETTLEQ_API_HOST, 127.0.0.1].")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="Port to serve on [default: SETTLEQ_API_PORT, 8000].")
    ] = None,
) -> None:
    """Serve the HTTP API (the front door, jobs, contracts, dead letters, health)."""
    import uvicorn

    from services.api.app import create_app

    settings = Settings()
    uvicorn.run(
        create_app(settings),
        host=host or settings.api_host,
        port=port or settings.api_port,
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
    queues: Annotated[
        str, typer.Option(help="Queue families: fast_path, compute_heavy or both, comma-separated.")
    ] = "fast_path,compute_heavy",
    threads: Annotated[
        int | None, typer.Option(help="Threads per process [default: SETTLEQ_WORKER_THREADS].")
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option(
            help="Worker processes [default: SETTLEQ_FAST_PATH_PROCESSES or"
            " SETTLEQ_COMPUTE_HEAVY_PROCESSES, by tier; the larger for both tiers]."
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Prometheus port of the first process (process i: +i); 0 = none."),
    ] = None,
) -> None:
    """Run Dramatiq workers: fast_path validates chunks, compute_heavy settles them."""
    settings = Settings()
    count = processes or worker_processes(settings, queues)
    port = settings.worker_metrics_port if metrics_port is None else metrics_port
    if count > 1:
        children = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "services.cli",
                    "worker",
                    "--queues",
                    queues,
                    "--threads",
                    str(threads or settings.worker_threads),
                    "--processes",
                    "1",
                    "--metrics-port",
                    str(port + i if port else 0),
                ]
            )
            for i in range(count)
        ]
        _supervise(children)
        return
    from services.worker.runner import run_worker

    tiers = [q.strip() for q in queues.split(",") if q.strip()]
    run_worker(settings, tiers, threads or settings.worker_threads, port)


@app.command()
def relay() -> None:
    """Publish committed outcome events to the <prefix>.events exchange."""
    from services.worker.relay import run_relay

    run_relay(Settings())


def _supervise(children: list[subprocess.Popen[bytes]]) -> None:
    """Wait for children; on SIGTERM/SIGINT pass it on and wait for them to stop."""
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while any(child.poll() is None for child in children):
        if not stopping and any(child.poll() is not None for child in children):
            stop()  # one part died: take the stack down rather than run half of it
        time.sleep(0.2)


def _stack_commands(port: int) -> list[list[str]]:
    me = [sys.executable, "-m", "services.cli"]
    # Each worker process gets its own metrics port: the fast_path ones first.
    settings = Settings()
    metrics = settings.worker_metrics_port
    heavy = metrics + settings.fast_path_processes if metrics else 0
    return [
        [*me, "api", "--port", str(port)],
        [*me, "worker", "--queues", "fast_path", "--metrics-port", str(metrics)],
        [*me, "worker", "--queues", "compute_heavy", "--metrics-port", str(heavy)],
        [*me, "relay"],
    ]


@app.command()
def up(port: Annotated[int, typer.Option(help="Port of the API.")] = 8000) -> None:
    """Run the API, both worker tiers and the outbox relay on this machine.

    With no SETTLEQ_DATABASE_URL the ledger is the SQLite file ./settleq.db,
    migrated here first; on PostgreSQL run `settleq migrate` before.
    """
    settings = Settings()
    if settings.database_url.startswith("sqlite"):
        _migrate(settings)  # the embedded default needs no separate step
    children = [subprocess.Popen(cmd) for cmd in _stack_commands(port)]
    _supervise(children)


# The client commands, in the order `settleq --help` lists them.
app.add_typer(batches.app)
app.add_typer(dlq.app, name="dlq")
app.add_typer(demo.app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
