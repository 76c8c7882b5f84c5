"""``settleq jobs``: list jobs and a job's lines, on screen or as CSV
(docs/api.md#jobs). Reads need a viewer (or operator) token."""

from __future__ import annotations

import sys
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import Annotated, Any, TextIO
from urllib.parse import urlencode

import typer
from rich.table import Table

from services.commands.errors import answer
from services.commands.money import money
from services.commands.options import (
    DEFAULT_URL,
    TokenOpt,
    UrlOpt,
    amount_column,
    console,
    export_progress,
    partition_key_option,
    print_more,
    show,
    sums_money,
    token_client,
)

app = typer.Typer(help="List jobs and a job's lines; export lines as CSV (viewer token).")

LimitOpt = Annotated[int, typer.Option(min=1, help="At most this many (one page).")]
CursorOpt = Annotated[str | None, typer.Option(help="The next page's cursor.")]


def _reader(url: str, token: str | None) -> Any:
    return token_client(url, token, "a viewer")


def _get(client: Any, path: str, **query: Any) -> Any:
    params = urlencode({k: v for k, v in query.items() if v is not None})
    return answer(client.bearer("GET", f"{path}?{params}" if params else path))


@app.command("list")
def jobs_list(
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    state: Annotated[
        str | None, typer.Option(help="Only jobs in this state: accepted, processing, completed.")
    ] = None,
    partition_key: Annotated[
        str | None, partition_key_option("Only jobs with lines of this partition.")
    ] = None,
    limit: LimitOpt = 50,
    cursor: CursorOpt = None,
) -> None:
    """List jobs, newest first, with their outcome counts and posted amount (none
    for a kind whose amounts are unit costs)."""
    page = _get(
        _reader(url, token),
        "/v1/jobs",
        state=state,
        partition_key=partition_key,
        limit=limit,
        cursor=cursor,
    )
    table = Table(title="jobs")
    for column in ("job", "kind", "state", "created", "lines", "posted", "disputed"):
        table.add_column(column, no_wrap=column in ("job", "created"))
    amount_column(table, "amount posted")
    for j in page["items"]:
        o = j["outcomes"]
        table.add_row(
            j["job_id"],
            j["kind"],
            j["state"],
            j["created_at"][:19] + "Z",
            str(j["lines"]),
            str(o["posted"]),
            str(o["disputed"]),
            money(j["amounts"]["posted"], j["kind"]) if sums_money(j["kind"]) else "",
        )
    show(table)
    print_more(page)


def _output(target: str) -> AbstractContextManager[TextIO]:
    """``target`` opened for text, or stdout (left open) for ``-``."""
    if target == "-":
        return nullcontext(sys.stdout)
    return Path(target).open("w", newline="", encoding="utf-8")


def export_csv(client: Any, job_id: str, outcome: str | None, target: str) -> int:
    """The server's streamed CSV of the job's lines into ``target`` (``-``:
    stdout), chunk by chunk as it arrives, with a progress bar on the terminal
    (never in the file); the number of lines."""
    job = answer(client.get(f"/v1/jobs/{job_id}"))
    total = job["lines"] if outcome is None else job["outcomes"].get(outcome, 0)
    query = f"?{urlencode({'outcome': outcome})}" if outcome else ""
    lines = -1  # the header row
    with client.bearer_stream(f"/v1/jobs/{job_id}/lines.csv{query}", "text/csv") as response:
        if response.status_code >= 400:
            response.read()
            answer(response)
        with _output(target) as out, export_progress(f"job {job_id} lines", total) as advance:
            for text in response.iter_text():
                out.write(text)
                rows = text.count("\n")  # a CSV row ends in CRLF; no field holds one
                lines += rows
                advance(rows)
    return lines


@app.command("lines")
def jobs_lines(
    job_id: Annotated[str, typer.Argument(help="The job id a submission answered.")],
    outcome: Annotated[
        str | None,
        typer.Option(help="Only lines with this outcome: posted, disputed, duplicate, ..."),
    ] = None,
    csv_file: Annotated[
        str | None,
        typer.Option("--csv", help="Write EVERY matching line as CSV to this file ('-': stdout)."),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    limit: LimitOpt = 100,
    cursor: CursorOpt = None,
) -> None:
    """A job's lines in document order, with outcomes and amounts; or all as --csv FILE."""
    client = _reader(url, token)
    if csv_file is not None:
        rows = export_csv(client, job_id, outcome, csv_file)
        if csv_file != "-":
            console.print(f"wrote {csv_file} ({rows} lines)")
        return
    kind = client.job(job_id)["kind"]
    page = _get(client, f"/v1/jobs/{job_id}/lines", outcome=outcome, limit=limit, cursor=cursor)
    table = Table(title=f"job {job_id} lines" + (f" ({outcome})" if outcome else ""))
    for column in ("document", "line", "outcome", "reason"):
        table.add_column(column)
    for column in ("amount", "claimed", "delta"):
        amount_column(table, column)
    table.add_column("dispute")
    # A duplicate claimed_amount_differs: the ledger's claim, beside the one resent.
    differs = any(ln.get("ledger_claimed_amount") for ln in page["items"])
    if differs:
        amount_column(table, "ledger claimed")
    for ln in page["items"]:
        table.add_row(
            ln["document_id"],
            ln["line_ref"],
            ln["outcome"],
            ln["reason"] or "",
            *(money(ln[f], kind) for f in ("amount", "claimed_amount", "delta")),
            ln["dispute_status"] or "",
            *((money(ln.get("ledger_claimed_amount"), kind),) if differs else ()),
        )
    show(table)
    print_more(page)
