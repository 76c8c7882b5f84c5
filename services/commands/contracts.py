"""``settleq contracts``: publish, read and list contract versions
(docs/api.md#contracts). Every call needs an operator token."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from services.commands.errors import answer
from services.commands.options import (
    DEFAULT_URL,
    OperatorTokenOpt,
    UrlOpt,
    console,
    kind_name,
    make_client,
    show,
)
from shared.domain.kinds import KINDS

app = typer.Typer(help="Publish, read and list contract versions (operator token).")

KindArg = Annotated[
    str, typer.Argument(callback=kind_name, help="Settlement kind: " + ", ".join(KINDS) + ".")
]
PartitionArg = Annotated[str, typer.Argument(help="Vendor, recipe or carrier id.")]
VersionArg = Annotated[int, typer.Argument(min=1, help="Contract version (1, 2, ...).")]


def _operator(url: str, token: str | None) -> Any:
    if not token:
        raise typer.BadParameter("an operator token is needed (--token or SETTLEQ_CLIENT_TOKEN)")
    return make_client(url, None, None, token)


def _path(kind: str, partition: str, version: int | None = None) -> str:
    path = f"/v1/contracts/{kind}/{partition}"
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
    answer(response)
    verb = "published" if response.status_code == 201 else "already published, identical:"
    console.print(f"{verb} {kind}/{partition} version {version}")


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
    kind: KindArg,
    partition: PartitionArg,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """List a partition's contract versions, oldest first (the API lists per partition)."""
    page = answer(_operator(url, token).bearer("GET", _path(kind, partition)))
    table = Table(title=f"contracts {kind}/{partition}")
    for column in ("version", "created", "body sha-256"):
        table.add_column(column, no_wrap=True)
    for c in page["items"]:
        table.add_row(str(c["version"]), c["created_at"], c["body_sha256"])
    show(table)
    if not page["items"]:
        hint = f"settleq contracts put {kind} {partition} 1 FILE"
        console.print(f"no versions: publish one with `{hint}`", soft_wrap=True)
