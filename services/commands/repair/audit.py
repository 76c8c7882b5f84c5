"""``settleq audit list``: who did what, newest first (docs/operations.md#dead-letters).
Needs an operator token."""

from __future__ import annotations

import json
from typing import Annotated
from urllib.parse import urlencode

import typer
from rich.table import Table

from services.commands.errors import answer
from services.commands.options import (
    DEFAULT_URL,
    OperatorTokenOpt,
    UrlOpt,
    make_client,
    print_more,
    show,
)

app = typer.Typer(help="Read the audit log: requeues, discards, resolutions (operator token).")


@app.command("list")
def audit_list(
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many (one page).")] = 50,
    cursor: Annotated[str | None, typer.Option(help="The next page's cursor.")] = None,
) -> None:
    """List audit entries, newest first: when, who, what, on what, and the details."""
    if not token:
        raise typer.BadParameter("an operator token is needed (--token or SETTLEQ_CLIENT_TOKEN)")
    query = urlencode({k: v for k, v in {"limit": limit, "cursor": cursor}.items() if v})
    page = answer(make_client(url, None, None, token).bearer("GET", f"/admin/audit?{query}"))
    table = Table(title="audit log")
    for column in ("id", "at", "actor", "action", "target", "details"):
        table.add_column(column, no_wrap=column in ("id", "at"))
    for e in page["items"]:
        details = json.dumps(e["details"], separators=(",", ":"), sort_keys=True)
        at = e["at"][:19] + "Z"
        table.add_row(str(e["id"]), at, e["actor"], e["action"], e["target"], details)
    show(table)
    print_more(page)
