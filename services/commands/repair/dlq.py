"""``settleq dlq``: inspect, requeue and discard dead letters (docs/operations.md#dead-letters)."""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.table import Table

from services.commands.errors import answer as _answer
from services.commands.options import (
    DEFAULT_URL,
    OperatorTokenOpt,
    UrlOpt,
    console,
    job_id_option,
    kind_name,
    partition_key_option,
    print_more,
    show,
    token_client,
)

app = typer.Typer(help="Inspect, requeue and discard dead letters (operator token).")


def _operator(url: str, token: str | None) -> Any:
    return token_client(url, token, "an operator")


@app.command("list")
def dlq_list(
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
    reason: Annotated[str | None, typer.Option(help="Only this reason code.")] = None,
    status: Annotated[str | None, typer.Option(help="dead, requeued, discarded or all.")] = "dead",
    kind: Annotated[
        str | None, typer.Option(callback=kind_name, help="Only this settlement kind's.")
    ] = None,
    job_id: Annotated[str | None, job_id_option("Only this job's.")] = None,
    partition_key: Annotated[str | None, partition_key_option("Only this partition's.")] = None,
    limit: Annotated[int, typer.Option(help="At most this many (one page).")] = 50,
    cursor: Annotated[str | None, typer.Option(help="The next page's cursor.")] = None,
) -> None:
    """List dead letters, newest first, filtered."""
    query = {
        "reason": reason,
        "status": None if status == "all" else status,  # no filter is every status
        "kind": kind,
        "job_id": job_id,
        "partition_key": partition_key,
        "limit": limit,
        "cursor": cursor,
    }
    params = urlencode({k: v for k, v in query.items() if v is not None})
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
    show(table)
    print_more(page)


@app.command("show")
def dlq_show(
    dead_letter_id: Annotated[int, typer.Argument(help="Dead letter id (from dlq list).")],
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Show one dead letter with its payload."""
    console.print_json(
        data=_answer(_operator(url, token).bearer("GET", f"/admin/dead-letters/{dead_letter_id}"))
    )


@app.command("requeue")
def dlq_requeue(
    dead_letter_id: Annotated[
        int | None, typer.Argument(help="One dead letter; omit to requeue by the filters.")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
    reason: Annotated[str | None, typer.Option(help="Filter: reason code.")] = None,
    job_id: Annotated[str | None, job_id_option("Filter: job id.")] = None,
    partition_key: Annotated[str | None, partition_key_option("Filter: partition key.")] = None,
    kind: Annotated[
        str | None, typer.Option(callback=kind_name, help="Filter: settlement kind.")
    ] = None,
    limit: Annotated[int, typer.Option(help="Filter: requeue at most this many.")] = 1000,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="With no filter: requeue without asking.")
    ] = False,
) -> None:
    """Requeue one dead letter by id, or every dead one matching the filters.

    With neither an id nor a filter every dead letter (up to --limit) is
    requeued: that asks for confirmation first, unless --yes.
    """
    client = _operator(url, token)
    unfiltered = dead_letter_id is None and not (reason or job_id or partition_key or kind)
    if unfiltered and not yes:
        typer.confirm(f"Requeue every dead letter (up to {limit})?", abort=True)
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
    skipped = result.get("would_fail_again") or {}
    if skipped:
        # A requeue reruns at the pinned contract version: these would fail again.
        causes = ", ".join(f"{reason} {count}" for reason, count in sorted(skipped.items()))
        console.print(
            f"skipped {result.get('skipped', 0)} that would be dead-lettered again: {causes}",
            markup=False,
        )


@app.command("discard")
def dlq_discard(
    dead_letter_id: Annotated[int, typer.Argument(help="Dead letter id (from dlq list).")],
    note: Annotated[str, typer.Option(help="Why it is discarded (kept in the audit log).")],
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Discard one dead letter, with a note for the audit log."""
    _answer(
        _operator(url, token).bearer(
            "POST", f"/admin/dead-letters/{dead_letter_id}/discard", {"note": note}
        )
    )
    console.print(f"discarded {dead_letter_id}")
