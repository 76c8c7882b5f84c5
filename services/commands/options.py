"""What the client commands share: their options, console and job display."""

from __future__ import annotations

import csv
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.cells import cell_len
from rich.measure import Measurement
from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn
from rich.table import Table

from services.commands.errors import FAILED, answer, say
from services.commands.literal import LiteralConsole
from services.commands.money import money
from shared.domain.kinds import KINDS

# Data is printed as sent (§6): the one console reads no markup in what it prints.
console = LiteralConsole()
WIDEST_TABLE = 240

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
        help="Viewer (or operator) bearer token: reads need a viewer's.",
        show_default=False,
    ),
]
OperatorTokenOpt = Annotated[
    str | None,
    typer.Option(
        envvar="SETTLEQ_CLIENT_TOKEN",
        help="Operator bearer token (this command writes, or reads operator data).",
        show_default=False,
    ),
]
DEFAULT_URL = "http://127.0.0.1:8000"


def kind_name(value: str | None) -> str | None:
    """A settlement kind the registry knows; else a usage error listing them."""
    if value is None or value in KINDS:
        return value
    raise typer.BadParameter(f"{value!r} is not a settlement kind; the kinds: {', '.join(KINDS)}")


def partition_key_option(help_text: str) -> Any:
    """``--partition-key``, the API's name; ``--partition`` is kept as an alias."""
    return typer.Option("--partition-key", "--partition", help=help_text, show_default=False)


def job_id_option(help_text: str) -> Any:
    """``--job-id``, the API's name; ``--job`` is kept as an alias."""
    return typer.Option("--job-id", "--job", help=help_text, show_default=False)


def make_client(url: str, key_id: str | None, secret: str | None, token: str | None) -> Any:
    from services.commands.client import Client

    return Client(url, key_id=key_id, secret=secret, token=token)


def token_client(url: str, token: str | None, role: str) -> Any:
    """A client with a bearer token; without one, a usage error naming the
    ``role`` the command needs ("an operator", "a viewer", "a bearer")."""
    if not token:
        raise typer.BadParameter(f"{role} token is needed (--token or SETTLEQ_CLIENT_TOKEN)")
    return make_client(url, None, None, token)


def amount_column(table: Table, name: str) -> None:
    """A money (or count) column: right-aligned, never cut off (``27515506…``); its
    header may wrap, its figures do not."""
    table.add_column(name, justify="right", no_wrap=True, overflow="fold")


def show(table: Table) -> None:
    """Print a table whose figures (its no-wrap columns) are whole however narrow the
    terminal: each is at least as wide as its widest figure; text columns give way."""
    for column in table.columns:
        if column.no_wrap:
            widths = [cell_len(str(cell)) for cell in column.cells]
            column.min_width = max([column.min_width or 0, *widths])
    # Narrower than its longest words, a table would cut every id to "INV…" and
    # squeeze columns to nothing: it is printed as wide as it needs instead
    # (a terminal wraps the rows; a file or a pager keeps them whole).
    measured = Measurement.get(console, console.options.update_width(10_000), table)
    # At its minimum, rich still cuts some words to fit: its natural width, unless
    # some long text (a failure message) would make that absurd on a terminal. To
    # a file or a pipe every cell is written whole, however long (a script reads it).
    widest = WIDEST_TABLE if console.is_terminal else measured.maximum
    need = max(measured.minimum, min(measured.maximum, widest))
    if need <= console.width:
        console.print(table)
        return
    # Console.print clamps any width to the console's own: widen it for this table.
    width = console.width
    console.width = need
    try:
        console.print(table)
    finally:
        console.width = width


def print_more(page: dict[str, Any]) -> None:
    """The hint a list that has more pages ends with."""
    if page.get("next_cursor"):
        console.print(f"more: --cursor {page['next_cursor']}", soft_wrap=True)


def sums_money(kind: str) -> bool:
    """Whether a job's total of ``kind``'s amounts is money (a recipe's unit
    costs of different recipes and locations add up to nothing)."""
    known = KINDS.get(kind)
    return known is None or known.amounts_are_totals


def print_job(job: dict[str, Any]) -> None:
    """A job's outcome counts and amounts, one row per outcome: narrow enough for
    80 columns with ten-digit amounts. ``amount`` is the model's, as balances
    book it (a disputed line too); a disputed line's claim is ``claimed``. A
    kind whose amounts are no money totals (a recipe's unit costs) shows none."""
    # The title above the table, not in it: a table this narrow would wrap it.
    console.print(f"job {job['job_id']} ({job['kind']}): {job['state']}, {job['lines']:,} lines")
    totals = sums_money(job["kind"])
    table = Table()
    table.add_column("outcome")
    amount_column(table, "lines")
    if totals:
        amount_column(table, "amount")
        amount_column(table, "claimed")
    outcomes, amounts = job["outcomes"], job["amounts"]
    for outcome in ("posted", "disputed", "duplicate", "dead_lettered"):
        row = [outcome, f"{outcomes[outcome]:,}"]
        if totals:
            model = {"posted": "posted", "disputed": "disputed_model"}.get(outcome)
            claimed = amounts.get("disputed") if outcome == "disputed" else None
            row += [money(amounts.get(model or ""), job["kind"]), money(claimed, job["kind"])]
        table.add_row(*row)
    show(table)
    if not totals:
        console.print(
            f"{job['kind']} amounts are unit costs, not totalled:"
            f" settleq jobs lines {job['job_id']} shows each",
            soft_wrap=True,
        )
    differs = job.get("duplicates_claim_differs") or 0
    if differs:
        # A resent line whose claim changed is not a correction: say so.
        console.print(
            f"{differs:,} duplicates were sent again with a different claim"
            f" (settleq jobs lines {job['job_id']} --outcome duplicate)",
            soft_wrap=True,
            markup=False,
        )


@contextmanager
def export_progress(what: str, total: int) -> Iterator[Callable[[int], None]]:
    """A progress bar of rows written, on stderr and only on a terminal (an
    export to stdout stays the file alone); yields ``advance(rows)``."""
    err = LiteralConsole(stderr=True)
    with Progress(
        TextColumn(f"[bold]{what}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.completed:,.0f} of {task.total:,.0f} rows"),
        console=err,
        transient=True,
        disable=not err.is_terminal,
    ) as progress:
        task = progress.add_task("export", total=max(total, 1))
        yield lambda rows: progress.advance(task, rows)


@contextmanager
def interruptible() -> Iterator[threading.Event]:
    """Ctrl-C sets the event instead of raising wherever the main thread is. A
    KeyboardInterrupt raised inside a library's I/O or lock (pika mid-frame,
    Rich's live display refreshing) could leave the command waiting forever
    for a reply or a lock it would never get: on a loaded machine, where the
    signal lands there more often, it did. The command checks the event where
    stopping is safe; a second Ctrl-C raises at once."""
    stop = threading.Event()
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # Started with Ctrl-C ignored (in the background): it stays so, as
        # Python leaves it at start.
        yield stop
        return

    def handler(signum: int, frame: object) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield stop
    finally:
        signal.signal(signal.SIGINT, previous)


def export_csv(client: Any, path: str, target: str, noun: str) -> None:
    """The API's streamed CSV into ``target`` (``-``: stdout) as it arrives,
    then how many ``noun`` rows it holds (a quoted note may hold line breaks)."""
    with client.bearer_stream(path, "text/csv") as response:
        if response.status_code >= 400:
            response.read()
            answer(response)
        if target == "-":
            for text in response.iter_text():
                sys.stdout.write(text)
            sys.stdout.flush()
            return
        try:
            with Path(target).open("wb") as out:
                for chunk in response.iter_bytes():
                    out.write(chunk)
        except OSError as exc:
            say(f"cannot write {target}: {exc.strerror or type(exc).__name__}")
            raise typer.Exit(FAILED) from None
    with Path(target).open(newline="", encoding="utf-8") as written:
        rows = sum(1 for _ in csv.reader(written)) - 1
    console.print(f"wrote {target} ({rows} {noun})")


def wait_with_progress(client: Any, job_id: str, timeout: float) -> dict[str, Any]:
    """Polls the job until it completes (or ``timeout``); KeyboardInterrupt,
    raised between polls, on Ctrl-C."""
    with interruptible() as stop:
        job = _poll_with_progress(client, job_id, timeout, stop)
    if job is None:
        raise KeyboardInterrupt
    return job


def _poll_with_progress(
    client: Any, job_id: str, timeout: float, stop: threading.Event
) -> dict[str, Any] | None:
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
            if stop.wait(0.25):
                return None
