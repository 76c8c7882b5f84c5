"""``settleq``: run the services, migrate, submit and watch batches (SPEC §6)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Literal

import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table

from shared.settings import Settings
from shared.synthetic import GENERATORS

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
console = Console()

UrlOpt = Annotated[str, typer.Option(envvar="SETTLEQ_URL", help="API base URL.")]
KeyOpt = Annotated[
    str | None, typer.Option(envvar="SETTLEQ_CLIENT_KEY_ID", help="Producer key id (signs).")
]
SecretOpt = Annotated[
    str | None,
    typer.Option(envvar="SETTLEQ_CLIENT_SECRET", help="Producer key secret.", show_default=False),
]
TokenOpt = Annotated[
    str | None,
    typer.Option(
        envvar="SETTLEQ_CLIENT_TOKEN",
        help="Viewer or operator bearer token.",
        show_default=False,
    ),
]
DEFAULT_URL = "http://127.0.0.1:8000"


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
        typer.Option(help="Worker processes [default: SETTLEQ_WORKER_PROCESSES]."),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(help="Prometheus port of the first process (process i: +i); 0 = none."),
    ] = None,
) -> None:
    """Run Dramatiq workers: fast_path validates chunks, compute_heavy settles them."""
    settings = Settings()
    count = processes or settings.worker_processes
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
    heavy = metrics + settings.worker_processes if metrics else 0
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


def _client(url: str, key_id: str | None, secret: str | None, token: str | None) -> Any:
    from services.client import Client

    return Client(url, key_id=key_id, secret=secret, token=token)


def _print_job(job: dict[str, Any]) -> None:
    table = Table(title=f"job {job['job_id']} ({job['kind']}): {job['state']}")
    for column in (
        "lines",
        "posted",
        "disputed",
        "duplicate",
        "dead_lettered",
        "amount posted",
        "amount disputed",
    ):
        table.add_column(column, justify="right")
    o = job["outcomes"]
    table.add_row(
        str(job["lines"]),
        str(o["posted"]),
        str(o["disputed"]),
        str(o["duplicate"]),
        str(o["dead_lettered"]),
        job["amounts"]["posted"],
        job["amounts"]["disputed"],
    )
    console.print(table)


def _wait_with_progress(client: Any, job_id: str, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    with Progress(
        TextColumn("[bold]settling"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[detail]}"),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("job", total=1.0, detail="")
        while True:
            job: dict[str, Any] = client.job(job_id)
            done = job["chunks"]["done"]
            progress.update(
                task, completed=job["progress"], detail=f"chunks {done}/{job['chunks']['total']}"
            )
            if job["state"] == "completed" or time.monotonic() > deadline:
                return job
            time.sleep(0.25)


@app.command()
def submit(
    file: Annotated[
        Path,
        typer.Argument(
            help="Batch file: JSON, or NDJSON when named *.ndjson; - reads JSON from stdin."
        ),
    ],
    wait: Annotated[
        bool,
        typer.Option("--wait", help="Show a progress bar until the job completes; print outcomes."),
    ] = False,
    timeout: Annotated[
        float, typer.Option(help="With --wait: give up (exit 1) after this many seconds.")
    ] = 3600,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    idempotency_key: Annotated[
        str | None,
        typer.Option(help="Idempotency-Key header [default: the SHA-256 of the body]."),
    ] = None,
) -> None:
    """Sign and submit a batch; with --wait, follow it to its outcome table."""
    body = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    ctype = "application/x-ndjson" if file.suffix == ".ndjson" else "application/json"
    client = _client(url, key_id, secret, None)
    response = client.submit(body, ctype, idempotency_key)
    if response.status_code not in (200, 202):
        console.print(f"[red]{response.status_code}[/red] {response.text}")
        raise typer.Exit(1)
    accepted = response.json()
    console.print(f"accepted job {accepted['job_id']}: {accepted['lines']} lines")
    if wait:
        job = _wait_with_progress(client, accepted["job_id"], timeout=timeout)
        _print_job(job)
        if job["state"] != "completed":
            console.print(f"[red]not completed after {timeout:g} s[/red]")
            raise typer.Exit(1)


@app.command()
def status(
    job_id: Annotated[str, typer.Argument(help="The job id a submission answered.")],
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
) -> None:
    """Show a job's state, outcome counts and amounts (signed GET, or a bearer token)."""
    _print_job(_client(url, key_id, secret, token).job(job_id))


# The kinds shared.synthetic generates (a unit test keeps the two equal).
KindName = Literal["promo_accrual", "recipe_cost", "freight_audit"]
_PARTITIONS = {"promo_accrual": "vendors", "recipe_cost": "recipes", "freight_audit": "carriers"}


@app.command()
def gen(
    kind: Annotated[KindName, typer.Option(help="Settlement kind of the batch.")] = "promo_accrual",
    lines: Annotated[int, typer.Option(min=1, help="Lines in the batch.")] = 100,
    partitions: Annotated[
        int,
        typer.Option(
            "--partitions", "--vendors", min=1, help="Vendors, recipes or carriers to spread over."
        ),
    ] = 5,
    seed: Annotated[int, typer.Option(help="Same seed, same batch.")] = 7,
    ndjson: Annotated[
        bool,
        typer.Option("--ndjson", help='NDJSON (first line {"kind": ...}) for `submit x.ndjson`.'),
    ] = False,
) -> None:
    """Print a synthetic batch on stdout (deterministic for a seed).

    Its contracts (version 1) are what `settleq demo` publishes.
    """
    make_batch = GENERATORS[kind][0]
    batch = make_batch(lines, seed=seed, **{_PARTITIONS[kind]: partitions})
    if ndjson:
        sys.stdout.write(json.dumps({"kind": batch["kind"]}) + "\n")
        sys.stdout.writelines(json.dumps(d) + "\n" for d in batch["documents"])
    else:
        sys.stdout.write(json.dumps(batch) + "\n")


dlq = typer.Typer(help="Inspect, requeue and discard dead letters (operator token).")
app.add_typer(dlq, name="dlq")


def _operator(url: str, token: str | None) -> Any:
    if not token:
        raise typer.BadParameter("an operator token is needed (--token or SETTLEQ_CLIENT_TOKEN)")
    return _client(url, None, None, token)


def _answer(response: Any) -> Any:
    if response.status_code >= 400:
        console.print(f"[red]{response.status_code}[/red] {response.text}")
        raise typer.Exit(1)
    return response.json()


@dlq.command("list")
def dlq_list(
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    reason: Annotated[str | None, typer.Option(help="Only this reason code.")] = None,
    status: Annotated[str | None, typer.Option(help="dead, requeued or discarded.")] = "dead",
    job_id: Annotated[str | None, typer.Option(help="Only this job's.")] = None,
    partition_key: Annotated[str | None, typer.Option(help="Only this partition's.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many.")] = 50,
) -> None:
    """List dead letters, newest first, filtered."""
    query = {
        "reason": reason,
        "status": status,
        "job_id": job_id,
        "partition_key": partition_key,
        "limit": limit,
    }
    params = "&".join(f"{k}={v}" for k, v in query.items() if v is not None)
    page = _answer(_operator(url, token).bearer("GET", f"/admin/dead-letters?{params}"))
    table = Table(title="dead letters")
    for column in ("id", "job", "partition", "document", "line", "reason", "lines", "status"):
        table.add_column(column)
    for d in page["items"]:
        table.add_row(
            str(d["id"]),
            d["job_id"][:12],
            d["partition_key"],
            d["document_id"] or "",
            d["line_ref"] or "",
            d["reason"],
            str(d["lines"]),
            d["status"],
        )
    console.print(table)


@dlq.command("show")
def dlq_show(
    dead_letter_id: Annotated[int, typer.Argument(help="Dead letter id (from dlq list).")],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Show one dead letter with its payload."""
    console.print_json(
        data=_answer(_operator(url, token).bearer("GET", f"/admin/dead-letters/{dead_letter_id}"))
    )


@dlq.command("requeue")
def dlq_requeue(
    dead_letter_id: Annotated[
        int | None, typer.Argument(help="One dead letter; omit to requeue by the filters.")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    reason: Annotated[str | None, typer.Option(help="Filter: reason code.")] = None,
    job_id: Annotated[str | None, typer.Option(help="Filter: job id.")] = None,
    partition_key: Annotated[str | None, typer.Option(help="Filter: partition key.")] = None,
    kind: Annotated[str | None, typer.Option(help="Filter: settlement kind.")] = None,
    limit: Annotated[int, typer.Option(help="Filter: requeue at most this many.")] = 1000,
) -> None:
    """Requeue one dead letter by id, or every dead one matching the filters."""
    client = _operator(url, token)
    if dead_letter_id is not None:
        result = _answer(client.bearer("POST", f"/admin/dead-letters/{dead_letter_id}/requeue"))
    else:
        body = {
            "reason": reason,
            "job_id": job_id,
            "partition_key": partition_key,
            "kind": kind,
            "limit": limit,
        }
        result = _answer(
            client.bearer(
                "POST",
                "/admin/dead-letters/requeue",
                {k: v for k, v in body.items() if v is not None},
            )
        )
    console.print(f"requeued {result['requeued']}")


@dlq.command("discard")
def dlq_discard(
    dead_letter_id: Annotated[int, typer.Argument(help="Dead letter id (from dlq list).")],
    note: Annotated[str, typer.Option(help="Why it is discarded (kept in the audit log).")],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Discard one dead letter, with a note for the audit log."""
    _answer(
        _operator(url, token).bearer(
            "POST", f"/admin/dead-letters/{dead_letter_id}/discard", {"note": note}
        )
    )
    console.print(f"discarded {dead_letter_id}")


def _demo_credentials() -> dict[str, str]:
    from shared.signing import token_digest

    secret = secrets.token_hex(16)
    token = secrets.token_hex(16)
    return {
        "SETTLEQ_PRODUCER_KEYS": json.dumps(
            [{"key_id": "demo", "secrets": [secret], "partitions": ["*"]}]
        ),
        "SETTLEQ_OPERATOR_TOKENS": token_digest(token),
        "SETTLEQ_CLIENT_KEY_ID": "demo",
        "SETTLEQ_CLIENT_SECRET": secret,
        "SETTLEQ_CLIENT_TOKEN": token,
    }


def wait_ready(url: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"the stack at {url} did not become ready")


def run_demo(url: str, key_id: str, secret: str, token: str, lines: int) -> list[dict[str, Any]]:
    """Contracts and one batch of each kind through a running stack."""
    client = _client(url, key_id, secret, token)
    jobs = []
    for kind, (make_batch, make_contract) in GENERATORS.items():
        batch = make_batch(lines, seed=int(time.time()))
        for partition in sorted({d["partition_key"] for d in batch["documents"]}):
            path = f"/v1/contracts/{kind}/{partition}/1"
            response = client.bearer("PUT", path, make_contract())
            if response.status_code not in (200, 201, 409):
                raise RuntimeError(f"contract PUT failed: {response.status_code} {response.text}")
        response = client.submit(json.dumps(batch).encode())
        if response.status_code not in (200, 202):
            raise RuntimeError(f"submit failed: {response.status_code} {response.text}")
        job_id = response.json()["job_id"]
        console.print(f"submitted {kind} job {job_id}: {response.json()['lines']} lines")
        job = _wait_with_progress(client, job_id, timeout=300)
        _print_job(job)
        jobs.append(job)
    return jobs


DEMO_LOG = "settleq-demo.log"


@app.command()
def demo(
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
    lines: Annotated[int, typer.Option(min=1, help="Lines in each kind's batch.")] = 500,
    start_stack: Annotated[
        bool,
        typer.Option(
            "--start-stack",
            help=f"Migrate and start a stack here with fresh credentials (logs: ./{DEMO_LOG}),"
            " then stop it.",
        ),
    ] = False,
) -> None:
    """Publish contracts and run one batch of each kind through the stack; print outcomes.

    Without --start-stack it needs a running stack and an operator token plus a
    producer key (--key-id, --secret, --token).
    """
    if not start_stack:
        if not (key_id and secret and token):
            raise typer.BadParameter("needs --key-id, --secret and --token (or --start-stack)")
        run_demo(url, key_id, secret, token, lines)
        return
    creds = _demo_credentials()
    env = {**os.environ, **creds}
    port = int(url.rsplit(":", 1)[-1]) if url.count(":") == 2 else 8000
    with open(DEMO_LOG, "wb") as log:
        # The stack's own log would interleave with the progress bars: it goes to a file.
        me = [sys.executable, "-m", "services.cli"]
        migrated = subprocess.run([*me, "migrate"], env=env, stdout=log, stderr=subprocess.STDOUT)
        if migrated.returncode != 0:
            console.print(f"[red]migrate failed[/red]: see {DEMO_LOG}")
            raise typer.Exit(1)
        stack = subprocess.Popen(
            [*me, "up", "--port", str(port)],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        console.print(f"stack starting on {url} (logs: {DEMO_LOG})")
        try:
            _wait_for_stack(url, stack)
            jobs = run_demo(
                url,
                creds["SETTLEQ_CLIENT_KEY_ID"],
                creds["SETTLEQ_CLIENT_SECRET"],
                creds["SETTLEQ_CLIENT_TOKEN"],
                lines,
            )
        finally:
            stack.send_signal(signal.SIGTERM)
            stack.wait(timeout=60)
    if any(job["state"] != "completed" for job in jobs):
        raise typer.Exit(1)


def _wait_for_stack(url: str, stack: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if stack.poll() is not None:
            tail = Path(DEMO_LOG).read_text(errors="replace")[-3000:]
            console.print(f"[red]the stack stopped (exit {stack.returncode}):[/red]\n{tail}")
            raise typer.Exit(1)
        try:
            wait_ready(url, timeout=1)
            return
        except RuntimeError:
            pass
    raise RuntimeError(f"the stack at {url} did not become ready; see {DEMO_LOG}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
