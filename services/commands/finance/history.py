"""``settleq lines find`` and ``settleq identity``: a document's lines without
their job, and a line's whole story (docs/api.md#ledger-history-and-search).
Viewer (or operator) token."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlencode

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
    partition_key_option,
    print_more,
    show,
    token_client,
)

lines = typer.Typer(help="Find a document's lines across every job (viewer token).")
identity_app = typer.Typer()


def _reader(url: str, token: str | None) -> Any:
    return token_client(url, token, "a viewer")


@lines.command("find")
def lines_find(
    document: Annotated[str, typer.Option(help="The document's id, as its producer sent it.")],
    partition_key: Annotated[
        str | None, partition_key_option("Only the document of this partition.")
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option(help="Only lines with this outcome: posted, disputed, duplicate, ..."),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (one page).")] = 100,
    cursor: Annotated[str | None, typer.Option(help="The next page's cursor.")] = None,
) -> None:
    """A document's lines in every job that carried it, with their outcomes."""
    query = {
        "document_id": document,
        "partition_key": partition_key,
        "outcome": outcome,
        "limit": limit,
        "cursor": cursor,
    }
    params = urlencode({k: v for k, v in query.items() if v is not None})
    page = answer(_reader(url, token).bearer("GET", f"/v1/lines?{params}"))
    table = Table(title=f"document {document} lines")
    for column in ("job", "partition", "line", "version", "outcome", "reason"):
        table.add_column(column, no_wrap=column == "job")
    for column in ("amount", "claimed", "delta"):
        amount_column(table, column)
    table.add_column("dispute")
    for ln in page["items"]:
        table.add_row(
            ln["job_id"],
            ln["partition_key"] or "",
            ln["line_ref"],
            str(ln["contract_version"]),
            ln["outcome"],
            ln["reason"] or "",
            *(money(ln[f], ln["kind"]) for f in ("amount", "claimed_amount", "delta")),
            ln["dispute_status"] or "",
        )
    show(table)
    if not page["items"]:
        console.print("no line of this document")
    print_more(page)


@identity_app.command("identity")
def identity(
    key: Annotated[str, typer.Argument(help="A line's reconciliation key (64 hex digits).")],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """A line's whole story: its ledger rows oldest first, what it amounts to now,
    and its open dispute."""
    story = answer(_reader(url, token).bearer("GET", f"/v1/identities/{quote(key, safe='')}"))
    kind = story["kind"]
    table = Table(
        title=f"{kind} {story['partition_key']} / {story['document_id']} line {story['line_ref']}"
    )
    for column in ("row", "job", "version", "outcome"):
        table.add_column(column, no_wrap=column in ("row", "job"))
    for column in ("amount", "claimed", "delta"):
        amount_column(table, column)
    table.add_column("supersedes")
    table.add_column("at")
    for e in story["entries"]:
        table.add_row(
            str(e["ledger_entry_id"]),
            e["job_id"],
            str(e["contract_version"]),
            e["outcome"],
            *(money(e[f], kind) for f in ("amount", "claimed_amount", "delta")),
            "" if e["supersedes_id"] is None else str(e["supersedes_id"]),
            e["created_at"][:19] + "Z",
        )
    show(table)
    console.print(f"amount now: {money(story['amount_now'], kind)}")
    dispute = story["open_dispute"]
    if dispute is not None:
        console.print(
            f"open dispute {dispute['id']}: claimed {money(dispute['claimed_amount'], kind)},"
            f" model {money(dispute['model_amount'], kind)}"
            f" (settleq disputes resolve ... {dispute['id']})"
        )
