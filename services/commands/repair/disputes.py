"""``settleq disputes``: list, export, inspect and resolve disputes (docs/operations.md#disputes).

Reads need a viewer or operator token, resolutions an operator's. An answer
the API refuses is printed on one line (status and body) with exit code 1.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.table import Table

from services.commands.errors import answer as _answer
from services.commands.money import money
from services.commands.options import (
    DEFAULT_URL,
    OperatorTokenOpt,
    TokenOpt,
    UrlOpt,
    amount_column,
    console,
    export_csv,
    job_id_option,
    kind_name,
    partition_key_option,
    print_more,
    show,
    token_client,
)

app = typer.Typer(
    help="List, export (CSV), inspect and resolve disputes (viewer token to read, operator"
    " token to resolve)."
)

StatusOpt = Annotated[str, typer.Option(help="open, resolved, superseded or all.")]
KindOpt = Annotated[str | None, typer.Option(callback=kind_name, help="Only this settlement kind.")]
PartitionOpt = Annotated[
    str | None, partition_key_option("Only this partition (vendor, carrier, recipe).")
]
JobOpt = Annotated[str | None, job_id_option("Only this job's.")]
DecisionOpt = Annotated[
    str, typer.Option(help="accept_claim, accept_model or settle_at (one dispute only).")
]
NoteOpt = Annotated[str, typer.Option(help="Why (1-2,000 characters; kept in the audit log).")]


def _client(url: str, token: str | None) -> Any:
    return token_client(url, token, "a bearer")


def _query(**fields: Any) -> str:
    return urlencode({k: v for k, v in fields.items() if v is not None})


@app.command("list")
def disputes_list(
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
    status: StatusOpt = "open",
    kind: KindOpt = None,
    partition_key: PartitionOpt = None,
    job_id: JobOpt = None,
    min_abs_variance: Annotated[
        str | None, typer.Option(help="Only disputes with abs(variance) >= this amount.")
    ] = None,
    opened_before: Annotated[
        str | None, typer.Option(help="Only disputes opened before this ISO-8601 UTC time.")
    ] = None,
    limit: Annotated[int, typer.Option(help="At most this many (one page).")] = 50,
    cursor: Annotated[str | None, typer.Option(help="The next page's cursor.")] = None,
    csv_file: Annotated[
        str | None,
        typer.Option(
            "--csv", help="Write EVERY matching dispute as CSV to this file ('-': stdout)."
        ),
    ] = None,
) -> None:
    """List disputes, oldest first, filtered; or export them all with --csv FILE."""
    client = _client(url, token)
    filters = {
        "status": status,
        "kind": kind,
        "partition_key": partition_key,
        "job_id": job_id,
        "min_abs_variance": min_abs_variance,
        "opened_before": opened_before,
    }
    if csv_file is not None:
        export_csv(client, f"/v1/disputes?{_query(**filters)}", csv_file, "disputes")
        return
    page = _answer(
        client.bearer("GET", f"/v1/disputes?{_query(**filters, limit=limit, cursor=cursor)}")
    )
    table = Table(title=f"disputes ({status})")
    for column in ("id", "kind", "partition", "document", "line"):
        table.add_column(column)
    for column in ("claimed", "model", "variance"):
        amount_column(table, column)
    table.add_column("status")
    table.add_column("opened")
    for d in page["items"]:
        table.add_row(
            str(d["id"]),
            d["kind"],
            d["partition_key"],
            d["document_id"],
            d["line_ref"],
            money(d["claimed_amount"], d["kind"]),
            money(d["model_amount"], d["kind"]),
            money(d["variance"], d["kind"]),
            d["status"],
            d["opened_at"][:19] + "Z",  # to the second: the table stays narrow
        )
    show(table)
    print_more(page)


@app.command("show")
def disputes_show(
    dispute_id: Annotated[int, typer.Argument(help="Dispute id (from disputes list).")],
    url: UrlOpt = DEFAULT_URL,
    token: TokenOpt = None,
) -> None:
    """Show one dispute, with its resolution if it has one."""
    console.print_json(
        data=_answer(_client(url, token).bearer("GET", f"/v1/disputes/{dispute_id}"))
    )


@app.command("stats")
def disputes_stats(url: UrlOpt = DEFAULT_URL, token: TokenOpt = None) -> None:
    """Counts and sums per status and kind, and the partitions with the most open variance."""
    stats = _answer(_client(url, token).bearer("GET", "/v1/disputes/stats"))
    totals = Table(title="disputes by status and kind")
    for column in ("status", "kind", "count"):
        totals.add_column(column, justify="right" if column == "count" else "left")
    for column in ("claimed", "model", "variance", "abs variance"):
        amount_column(totals, column)
    for t in stats["totals"]:
        totals.add_row(
            t["status"],
            t["kind"],
            str(t["count"]),
            *(money(t[f], t["kind"]) for f in ("claimed", "model", "variance", "abs_variance")),
        )
    show(totals)
    top = Table(title="partitions with the largest open variance")
    for column in ("kind", "partition", "open"):
        top.add_column(column, justify="right" if column == "open" else "left")
    amount_column(top, "variance")
    amount_column(top, "abs variance")
    for p in stats["top_partitions"]:
        top.add_row(
            p["kind"],
            p["partition_key"],
            str(p["open_count"]),
            money(p["open_variance"], p["kind"]),
            money(p["open_abs_variance"], p["kind"]),
        )
    show(top)
    console.print(f"oldest open: {stats['oldest_open_at'] or '-'}")


@app.command("resolve")
def disputes_resolve(
    decision: DecisionOpt,
    note: NoteOpt,
    dispute_id: Annotated[
        int | None, typer.Argument(help="One dispute; omit it and pass --all to resolve in bulk.")
    ] = None,
    amount: Annotated[str | None, typer.Option(help="The amount, for settle_at.")] = None,
    all_matching: Annotated[
        bool,
        typer.Option(
            "--all", help="Bulk: resolve the open disputes matching the filters (needs --limit)."
        ),
    ] = False,
    kind: KindOpt = None,
    partition_key: PartitionOpt = None,
    job_id: JobOpt = None,
    max_abs_variance: Annotated[
        str | None, typer.Option(help="Bulk: only disputes with abs(variance) <= this amount.")
    ] = None,
    limit: Annotated[
        int | None, typer.Option(help="Bulk: resolve at most this many (1-10,000).")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Resolve one dispute by id, or with --all every open one matching the filters."""
    client = _client(url, token)
    if dispute_id is not None:
        if all_matching:
            raise typer.BadParameter("give a dispute id or --all, not both")
        body = {"decision": decision, "note": note}
        if amount is not None:
            body["amount"] = amount
        d = _answer(client.bearer("POST", f"/admin/disputes/{dispute_id}/resolve", body))
        r = d["resolution"]
        row = r["ledger_entry_id"]
        amount = money(r["amount"], d.get("kind"))
        console.print(f"dispute {d['id']}: {r['decision']} at {amount} (ledger row {row})")
        return
    if not all_matching:
        raise typer.BadParameter("give a dispute id, or --all with filters and --limit")
    if limit is None:
        raise typer.BadParameter("--all needs --limit (at most this many are resolved)")
    if amount is not None:
        raise typer.BadParameter("--all takes no --amount (settle_at is for one dispute)")
    bulk = {
        "decision": decision,
        "note": note,
        "kind": kind,
        "partition_key": partition_key,
        "job_id": job_id,
        "max_abs_variance": max_abs_variance,
        "limit": limit,
    }
    result = _answer(
        client.bearer(
            "POST", "/admin/disputes/resolve", {k: v for k, v in bulk.items() if v is not None}
        )
    )
    console.print(f"resolved {result['resolved']}")
