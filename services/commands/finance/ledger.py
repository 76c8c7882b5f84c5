"""``settleq ledger feed``: the ledger's rows in commit order, each once
(docs/api.md#the-ledger-feed), printed or written as CSV; the cursor to resume
from is printed at the end and on Ctrl-C. A viewer token, or a producer key's
signature (its own partitions only)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, nullcontext
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any, TextIO
from urllib.parse import urlencode

import typer

from services.commands.errors import answer
from services.commands.options import (
    DEFAULT_URL,
    KeyOpt,
    SecretOpt,
    TokenOpt,
    UrlOpt,
    console,
    interruptible,
    make_client,
    partition_key_option,
)
from shared.domain.feed import COLUMNS
from shared.wire.cells import cell

app = typer.Typer(help="Read the ledger out: its rows in commit order, each once.")

_MONEY = frozenset({"amount", "claimed_amount", "delta"})
# A followed feed asks the server to wait this long for a row: Ctrl-C is
# answered within it (the request in flight is let finish).
FOLLOW_WAIT_S = 5


@app.command("feed")
def feed(
    partition_key: Annotated[
        str | None, partition_key_option("Only this partition's rows.")
    ] = None,
    kind: Annotated[str | None, typer.Option(help="Only this settlement kind's rows.")] = None,
    line_ref: Annotated[
        str | None,
        typer.Option(
            help="Only this line reference's rows, across partitions: for a kind"
            " whose line is a location (GET /v1/kinds: line_ref_name), a store's."
        ),
    ] = None,
    after: Annotated[
        str | None,
        typer.Option(
            help="Resume from this cursor (one this command printed), or 'now' for the"
            " ledger's current end; without it, from the ledger's first row."
        ),
    ] = None,
    follow: Annotated[
        bool, typer.Option("--follow", help="Keep reading new rows as they commit (Ctrl-C stops).")
    ] = False,
    csv_file: Annotated[
        str | None,
        typer.Option("--csv", help="Write the rows as CSV to this file ('-': stdout)."),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: TokenOpt = None,
) -> None:
    """Print the ledger's rows in commit order from a cursor, each once; then the
    cursor to resume from (also on Ctrl-C, exit 130)."""
    client = make_client(url, key_id, secret, token)
    filters = {"partition_key": partition_key, "kind": kind, "line_ref": line_ref}
    cursor, rows, stopped = after, 0, False
    with _output(csv_file) as out, interruptible() as stop:
        writer = None if out is None else csv.writer(out)
        if writer is not None:
            writer.writerow(COLUMNS)
        try:
            for page in _pages(client, filters, cursor, follow, stop):
                for item in page["items"]:
                    if writer is None:
                        _print_row(item)
                    else:
                        writer.writerow([_cell(name, item[name]) for name in COLUMNS])
                rows += len(page["items"])
                cursor = page["next_cursor"]  # only once its page is out whole
            stopped = stop.is_set()
        except KeyboardInterrupt:  # a second Ctrl-C, mid-request
            stopped = True
    written = f"{rows} rows" + ("" if csv_file in (None, "-") else f" written to {csv_file}")
    typer.echo(f"{written}; resume with --after {cursor or 'now'}", err=True)
    if stopped:
        raise typer.Exit(130)


def _pages(
    client: Any, filters: dict[str, str | None], cursor: str | None, follow: bool, stop: Any
) -> Iterator[dict[str, Any]]:
    """Pages until the end (or, following, until Ctrl-C)."""
    while not stop.is_set():
        query = {**filters, "after": cursor, "limit": 1000}
        if follow:
            query["wait"] = FOLLOW_WAIT_S
        params = urlencode({k: v for k, v in query.items() if v is not None})
        page = answer(client.get(f"/v1/ledger/feed?{params}"))
        yield page
        # A filtered page may be empty before the end; at the end its cursor stays.
        at_end = not page["items"] and page["next_cursor"] == cursor
        cursor = page["next_cursor"]
        if at_end and not follow:
            return


def _output(target: str | None) -> AbstractContextManager[TextIO | None]:
    if target is None:
        return nullcontext(None)
    if target == "-":
        return nullcontext(sys.stdout)
    return Path(target).open("w", newline="", encoding="utf-8")


def _cell(name: str, value: Any) -> str:
    # Money as a number a spreadsheet sums (a negative delta is no formula).
    return cell(Decimal(value) if name in _MONEY and value is not None else value)


def _print_row(item: dict[str, Any]) -> None:
    claimed = item["claimed_amount"]
    supersedes = item["supersedes_id"]
    console.print(
        f"{item['id']}  {item['created_at']}  {item['kind']}  {item['partition_key']}"
        f"  {item['document_id']} line {item['line_ref']} v{item['contract_version']}"
        f"  {item['outcome']}  amount {item['amount']}"
        + ("" if claimed is None else f" claimed {claimed}")
        + f" delta {item['delta']}"
        + ("" if supersedes is None else f" supersedes {supersedes}")
        + f"  job {item['job_id']}"
    )
