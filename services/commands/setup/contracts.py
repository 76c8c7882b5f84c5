"""``settleq contracts``: publish, read and list contract versions
(docs/api.md#contracts). Every call needs an operator token."""

from __future__ import annotations

import csv
import json
import shlex
import sys
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote, urlencode

import typer
from rich.table import Table

from services.commands.errors import Refused, answer
from services.commands.options import (
    DEFAULT_URL,
    OperatorTokenOpt,
    UrlOpt,
    console,
    kind_name,
    print_more,
    show,
    token_client,
)
from shared.domain.kinds import KINDS

app = typer.Typer(help="Publish, read and list contract versions (operator token).")

KindArg = Annotated[
    str, typer.Argument(callback=kind_name, help="Settlement kind: " + ", ".join(KINDS) + ".")
]
PartitionArg = Annotated[str, typer.Argument(help="Vendor, recipe or carrier id.")]
VersionArg = Annotated[int, typer.Argument(min=1, help="Contract version (1, 2, ...).")]


def _operator(url: str, token: str | None) -> Any:
    return token_client(url, token, "an operator")


def _path(kind: str, partition: str, version: int | None = None) -> str:
    # The partition as one path segment, whatever it holds ("%", "?", "#", spaces).
    path = f"/v1/contracts/{kind}/{quote(partition, safe='')}"
    return path if version is None else f"{path}/{version}"


def read_body(file: str) -> Any:
    """The contract's JSON body, from a file or (``-``) stdin; bad JSON is a usage error."""
    text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError as exc:
        raise typer.BadParameter(f"{file} is not JSON: {exc}") from None


@app.command("put")
def contracts_put(
    kind: KindArg,
    partition: PartitionArg,
    version: VersionArg,
    file: Annotated[str, typer.Argument(help="The contract body as JSON; - reads stdin.")],
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Publish a contract version (the same content again is accepted, unchanged)."""
    response = _operator(url, token).bearer("PUT", _path(kind, partition, version), read_body(file))
    try:
        answer(response)
    except Refused as refused:
        _suggest_next_version(refused, kind, partition, file)
        raise
    verb = "published" if response.status_code == 201 else "already published, identical:"
    console.print(f"{verb} {kind}/{partition} version {version}")


def _suggest_next_version(refused: Refused, kind: str, partition: str, file: str) -> None:
    """A version taken by other content: the command that publishes it as the
    partition's next free version, which the API's 409 names."""
    if refused.code != "contract_version_conflict":
        return
    found = [
        d["next_version"] for d in refused.details if isinstance(d, dict) and "next_version" in d
    ]
    if found:
        command = shlex.join(["settleq", "contracts", "put", kind, partition, str(found[0]), file])
        console.print(f"to publish it as the next free version: {command}", soft_wrap=True)


@app.command("get")
def contracts_get(
    kind: KindArg,
    partition: PartitionArg,
    version: VersionArg,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Print one contract version as JSON (its body, kind, partition and date)."""
    client = _operator(url, token)
    console.print_json(data=answer(client.bearer("GET", _path(kind, partition, version))))


@app.command("list")
def contracts_list(
    kind: Annotated[
        str | None,
        typer.Argument(callback=kind_name, help="Only this kind's (" + ", ".join(KINDS) + ")."),
    ] = None,
    partition: Annotated[
        str | None, typer.Argument(help="Only this partition's versions (after a kind).")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
    limit: Annotated[int, typer.Option(min=1, max=500, help="At most this many (one page).")] = 50,
    cursor: Annotated[str | None, typer.Option(help="The next page's cursor.")] = None,
) -> None:
    """List every contract version, oldest first; or a kind's; or one partition's."""
    client = _operator(url, token)
    if kind is None or partition is None:
        _list_all(client, kind, limit, cursor)
        return
    page = answer(client.bearer("GET", _path(kind, partition)))
    table = Table(title=f"contracts {kind}/{partition}")
    for column in ("version", "created", "body sha-256"):
        table.add_column(column, no_wrap=True)
    for c in page["items"]:
        table.add_row(str(c["version"]), c["created_at"], c["body_sha256"])
    show(table)
    if not page["items"]:
        hint = f"settleq contracts put {kind} {partition} 1 FILE"
        console.print(f"no versions: publish one with `{hint}`", soft_wrap=True)


def _list_all(client: Any, kind: str | None, limit: int, cursor: str | None) -> None:
    query = {"kind": kind, "limit": limit, "cursor": cursor}
    params = urlencode({k: v for k, v in query.items() if v is not None})
    page = answer(client.bearer("GET", f"/v1/contracts?{params}"))
    table = Table(title=f"contracts {kind}" if kind else "contracts")
    for column in ("kind", "partition", "version", "created", "body sha-256"):
        table.add_column(column, no_wrap=column != "partition")
    for c in page["items"]:
        table.add_row(
            c["kind"], c["partition_key"], str(c["version"]), c["created_at"], c["body_sha256"]
        )
    show(table)
    print_more(page)
    if not page["items"] and cursor is None:
        hint = f"settleq contracts put {kind or 'KIND'} PARTITION 1 FILE"
        console.print(f"no contracts: publish one with `{hint}`", soft_wrap=True)


# Documents shown by the preview's table: the largest changes; --csv writes all.
SHOWN_CHANGES = 20
PREVIEW_COLUMNS = (
    "partition_key",
    "document_id",
    "lines",
    "amount_now",
    "amount_preview",
    "delta",
    "changes",
)


@app.command("preview")
def contracts_preview(
    kind: KindArg,
    partition: PartitionArg,
    file: Annotated[str, typer.Argument(help="The unpublished body as JSON; - reads stdin.")],
    period: Annotated[
        str | None, typer.Option(help="The documents booked in this period (2026-11).")
    ] = None,
    job: Annotated[
        list[str] | None, typer.Option(help="The documents of this job (repeatable).")
    ] = None,
    document: Annotated[list[str] | None, typer.Option(help="This document (repeatable).")] = None,
    csv_file: Annotated[
        str | None,
        typer.Option("--csv", help="Write every document's figures as CSV to this file."),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Settle the selected documents' stored lines under an unpublished body,
    writing nothing: the largest changes, the totals and the outcome changes."""
    chosen = {
        name: value
        for name, value in (("period", period), ("job_ids", job), ("document_ids", document))
        if value
    }
    if len(chosen) != 1:
        raise typer.BadParameter("give exactly one of --period, --job, --document")
    request = {"contract": read_body(file), "select": chosen}
    path = _path(kind, partition) + "/preview"
    client = _operator(url, token)
    try:
        found = answer(client.bearer("POST", path, request))
    finally:
        client.close()
    _preview_table(found)
    if csv_file is not None:
        with open(csv_file, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out, lineterminator="\r\n")
            writer.writerow(PREVIEW_COLUMNS)
            for d in found["documents"]:
                changes = "; ".join(f"{k}: {n}" for k, n in d["changes"].items())
                writer.writerow([*(d[c] for c in PREVIEW_COLUMNS[:-1]), changes])
        console.print(f"{len(found['documents'])} documents written to {csv_file}")


def _preview_table(found: dict[str, Any]) -> None:
    version = f"{found['kind']}/{found['partition_key']} as version {found['version']}"
    documents = sorted(
        found["documents"], key=lambda d: (-abs(Decimal(d["delta"])), d["document_id"])
    )
    table = Table(title=f"preview of {version}, largest changes ({found['currency']})")
    for column in ("document", "lines", "now", "under the preview", "delta", "outcome changes"):
        table.add_column(column, no_wrap=column not in ("document", "outcome changes"))
    for d in documents[:SHOWN_CHANGES]:
        changes = ", ".join(f"{k}: {n}" for k, n in d["changes"].items())
        table.add_row(
            d["document_id"],
            str(d["lines"]),
            d["amount_now"],
            d["amount_preview"],
            d["delta"],
            changes,
        )
    show(table)
    if len(documents) > SHOWN_CHANGES:
        console.print(f"{len(documents) - SHOWN_CHANGES} more documents: --csv FILE lists all")
    totals = Table(title="totals")
    for column in ("partition", "documents", "lines", "now", "under the preview", "delta"):
        totals.add_column(column, no_wrap=column != "partition")
    for key, t in found["totals"].items():
        totals.add_row(
            key,
            str(t["documents"]),
            str(t["lines"]),
            t["amount_now"],
            t["amount_preview"],
            t["delta"],
        )
    show(totals)
    flips: dict[str, int] = {}
    for t in found["totals"].values():
        for change, n in t["changes"].items():
            flips[change] = flips.get(change, 0) + n
    for change, n in sorted(flips.items()):
        console.print(f"{change}: {n} lines")
    if found["not_stored"]:
        console.print(
            f"not stored (retention): {len(found['not_stored'])} documents, e.g. "
            + ", ".join(found["not_stored"][:5])
        )
    console.print(f"digest {found['digest']}")
