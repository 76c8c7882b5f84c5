"""``settleq keys create|list|scope|rotate|revoke`` and ``settleq tokens
create``: credentials, a secret shown once, and the ``export`` lines that
configure them (docs/operations.md#credentials).

``keys create`` stores the key through the running API (an operator token):
it signs within seconds. Without a token or an API that answers (the
README's first commands, before the stack starts), or with ``--env``, it
prints a bootstrap key's ``SETTLEQ_PRODUCER_KEYS`` entry instead.

All they print can be pasted into a shell (or given to ``eval``): the
``export`` lines set the server's settings and this shell's client; every
other line is a comment. Pasted in the README's order (a key, an operator
token, a viewer token), the client is left signing with the key and holding
the operator's token: a viewer token's client line is a comment, for a
viewer's own shell, so that it never replaces the operator's.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from enum import StrEnum
from typing import Annotated, Any
from urllib.parse import quote

import httpx
import typer
from rich.table import Table

from services.commands.errors import answer
from services.commands.options import (
    DEFAULT_URL,
    OperatorTokenOpt,
    UrlOpt,
    console,
    show,
    token_client,
)
from shared.domain.signing import token_digest

keys = typer.Typer(
    help="Producer keys (HMAC-signed submissions): create, list, scope, rotate, revoke.",
    no_args_is_help=True,
)
tokens = typer.Typer(help="Viewer and operator bearer tokens.", no_args_is_help=True)

_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class Role(StrEnum):
    viewer = "viewer"
    operator = "operator"


def _partitions(text: str | None, exact: list[str] | None) -> list[str]:
    """``--partitions`` (comma-separated) and ``--partition`` (one each, as it
    is: a partition key may hold a comma) together."""
    found = [part.strip() for part in (text or "").split(",") if part.strip()]
    found += exact or []
    if not found:
        raise typer.BadParameter(
            "name partitions: --partitions A,B (comma-separated), --partition 'A,1' (one,"
            " as it is; repeatable), or --partitions '*' for all",
            param_hint="--partitions",
        )
    return ["*"] if "*" in found else list(dict.fromkeys(found))


PartitionsOpt = Annotated[
    str | None,
    typer.Option(help="Partition keys it may submit for, comma-separated, or * for all."),
]
PartitionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--partition",
        help="One partition key, as it is (it may hold a comma); repeatable.",
        show_default=False,
    ),
]
KeyIdArg = Annotated[str, typer.Argument(help="The key's id.")]


def _print_secret(key_id: str, secret: str, partitions: list[str], where: str) -> None:
    typer.echo(f"# key id:  {key_id}")
    typer.echo(f"# secret:  {secret}   (shown once: keep it in your secrets manager)")
    typer.echo(f"# partitions: {json.dumps(partitions)}")
    typer.echo(f"# {where}")
    typer.echo("# Clients sign with:")
    typer.echo(f"export SETTLEQ_CLIENT_KEY_ID={key_id} SETTLEQ_CLIENT_SECRET={secret}")


def _bootstrap(key_id: str, partitions: list[str], why: str | None) -> None:
    """The SETTLEQ_PRODUCER_KEYS lines: a key for a stack not yet running."""
    secret = secrets.token_urlsafe(32)
    entry = {"key_id": key_id, "secrets": [secret], "partitions": partitions}
    if why:
        typer.echo(f"# {why}")
    typer.echo(f"# key id:  {key_id}")
    typer.echo(f"# secret:  {secret}   (shown once: keep it in your secrets manager)")
    typer.echo("# The server's SETTLEQ_PRODUCER_KEYS, with this key as its only one (with other")
    typer.echo("# keys, add this entry to its JSON list):")
    typer.echo(f"#   {json.dumps(entry)}")
    typer.echo(f"export SETTLEQ_PRODUCER_KEYS={shlex.quote(json.dumps([entry]))}")
    typer.echo("# Clients sign with:")
    typer.echo(f"export SETTLEQ_CLIENT_KEY_ID={key_id} SETTLEQ_CLIENT_SECRET={secret}")


def _path(key_id: str, action: str = "") -> str:
    return f"/admin/producer-keys/{quote(key_id, safe='')}" + (f"/{action}" if action else "")


@keys.command("create")
def create_key(
    partitions: PartitionsOpt = None,
    partition: PartitionOpt = None,
    key_id: Annotated[
        str | None, typer.Option(help="Its id (default: key- and 8 random hex digits).")
    ] = None,
    env: Annotated[
        bool,
        typer.Option(
            "--env",
            help="Print a SETTLEQ_PRODUCER_KEYS entry (a bootstrap key, for a stack not yet"
            " started) instead of storing the key through the running API.",
        ),
    ] = False,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """A new producer key, its secret shown once. With an operator token and the
    API up: stored in the database, signing within seconds (no restart).
    Otherwise, or with --env: its SETTLEQ_PRODUCER_KEYS entry and export lines."""
    scope = _partitions(partitions, partition)
    if key_id is not None and not _KEY_ID.fullmatch(key_id):
        raise typer.BadParameter("1 to 64 letters, digits, '.', '_' or '-'", param_hint="--key-id")
    if env or not token:
        why = None if env else "no operator token (SETTLEQ_CLIENT_TOKEN): a bootstrap key"
        _bootstrap(key_id or f"key-{secrets.token_hex(4)}", scope, why)
        return
    body: dict[str, Any] = {"partitions": scope}
    if key_id is not None:
        body["key_id"] = key_id
    try:
        response = token_client(url, token, "an operator").bearer(
            "POST", "/admin/producer-keys", body
        )
    except httpx.ConnectError:
        # Before the stack's first start (the README's first commands).
        why = f"no API answers at {url}: a bootstrap key for the stack's settings"
        _bootstrap(key_id or f"key-{secrets.token_hex(4)}", scope, why)
        return
    made = answer(response)
    where = "Stored in the database: it signs within seconds, no restart needed."
    _print_secret(made["key_id"], made["secret"], made["partitions"], where)


@keys.command("list")
def list_keys(url: UrlOpt = DEFAULT_URL, token: OperatorTokenOpt = None) -> None:
    """Every producer key: the database's (revoked ones too) and the
    environment's bootstrap keys; never a secret (operator token)."""
    page = answer(token_client(url, token, "an operator").bearer("GET", "/admin/producer-keys"))
    table = Table(title="producer keys")
    for column in ("key id", "source", "status", "partitions", "created", "old secret until"):
        table.add_column(column)
    for k in page["items"]:
        table.add_row(
            k["key_id"],
            k["source"],
            k["status"],
            ", ".join(json.dumps(p) if "," in p else p for p in k["partitions"]),
            k["created_at"] or "",
            k["previous_until"] or "",
        )
    show(table)


@keys.command("scope")
def scope_key(
    key_id: KeyIdArg,
    partitions: PartitionsOpt = None,
    partition: PartitionOpt = None,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Replace the partitions a key may submit for; honoured within seconds
    (operator token; audited)."""
    body = {"partitions": _partitions(partitions, partition)}
    client = token_client(url, token, "an operator")
    found = answer(client.bearer("PUT", _path(key_id, "partitions"), body))
    console.print(
        f"key {found['key_id']} may submit for {json.dumps(found['partitions'])}", markup=False
    )


@keys.command("rotate")
def rotate_key(
    key_id: KeyIdArg,
    previous_valid_for: Annotated[
        int,
        typer.Option(min=0, help="Seconds the secret it replaces still signs (0: not at all)."),
    ] = 24 * 3600,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """A new secret for a key, shown once; the old one signs for
    --previous-valid-for seconds more (operator token; audited)."""
    body = {"previous_valid_for_s": previous_valid_for}
    client = token_client(url, token, "an operator")
    made = answer(client.bearer("POST", _path(key_id, "rotate"), body))
    until = made["previous_until"]
    where = f"The old secret signs until {until}." if until else "The old secret no longer signs."
    _print_secret(made["key_id"], made["secret"], made["partitions"], where)


@keys.command("revoke")
def revoke_key(key_id: KeyIdArg, url: UrlOpt = DEFAULT_URL, token: OperatorTokenOpt = None) -> None:
    """Revoke a key: refused within seconds, for good (operator token; audited)."""
    found = answer(token_client(url, token, "an operator").bearer("POST", _path(key_id, "revoke")))
    console.print(f"key {found['key_id']} revoked at {found['revoked_at']}", markup=False)


@tokens.command("create")
def create_token(
    role: Annotated[Role, typer.Option(help="viewer (reads) or operator (reads and repairs).")],
) -> None:
    """A new bearer token: prints it (once) and its SHA-256 digest, which the server takes."""
    token = secrets.token_urlsafe(32)
    variable = f"SETTLEQ_{role.value.upper()}_TOKENS"
    digest = token_digest(token)
    typer.echo(f"# token:   {token}   (shown once: give it to the {role.value})")
    typer.echo(f"# sha-256: {digest}")
    typer.echo(f"# The server's {variable} takes the digest (several: comma-separated):")
    typer.echo(f"export {variable}={digest}")
    client = f"export SETTLEQ_CLIENT_TOKEN={token}"
    if role is Role.operator:
        typer.echo("# Clients use the token (an operator's also reads); so does the dashboard:")
        typer.echo(client)
        return
    # Pasted after the operator's, a viewer's client line would take this shell's
    # writes away (contracts, repairs): it is for a viewer's own shell.
    typer.echo("# The dashboard takes the token; in a viewer's own shell (reads only), run:")
    typer.echo(f"#   {client}")
