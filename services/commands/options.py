"""What the client commands share: their options, console and job display."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table

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


def make_client(url: str, key_id: str | None, secret: str | None, token: str | None) -> Any:
    from services.client import Client

    return Client(url, key_id=key_id, secret=secret, token=token)


def print_job(job: dict[str, Any]) -> None:
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


def wait_with_progress(client: Any, job_id: str, timeout: float) -> dict[str, Any]:
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
