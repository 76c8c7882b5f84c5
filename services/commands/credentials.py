"""``settleq keys create`` and ``settleq tokens create``: new credentials, the
secret shown once, and the setting line that configures them
(docs/operations.md#credentials)."""

from __future__ import annotations

import json
import re
import secrets
from enum import StrEnum
from typing import Annotated

import typer

from shared.domain.signing import token_digest

keys = typer.Typer(help="Producer keys (HMAC-signed submissions).", no_args_is_help=True)
tokens = typer.Typer(help="Viewer and operator bearer tokens.", no_args_is_help=True)

_KEY_ID = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


class Role(StrEnum):
    viewer = "viewer"
    operator = "operator"


def _partitions(text: str) -> list[str]:
    found = [part.strip() for part in text.split(",") if part.strip()]
    if not found:
        raise typer.BadParameter(
            "name partitions, comma-separated, or * for all", param_hint="--partitions"
        )
    return ["*"] if "*" in found else found


@keys.command("create")
def create_key(
    partitions: Annotated[
        str,
        typer.Option(help="Partition keys it may submit for, comma-separated, or * for all."),
    ],
    key_id: Annotated[
        str | None, typer.Option(help="Its id (default: key- and 8 random hex digits).")
    ] = None,
) -> None:
    """A new producer key: its id, its secret (once) and its SETTLEQ_PRODUCER_KEYS entry."""
    key_id = key_id or f"key-{secrets.token_hex(4)}"
    if not _KEY_ID.fullmatch(key_id):
        raise typer.BadParameter("1 to 64 letters, digits, '.', '_' or '-'", param_hint="--key-id")
    secret = secrets.token_urlsafe(32)
    entry = {"key_id": key_id, "secrets": [secret], "partitions": _partitions(partitions)}
    typer.echo(f"key id:  {key_id}")
    typer.echo(f"secret:  {secret}   (shown once: keep it in your secrets manager)")
    typer.echo("")
    typer.echo("Add this entry to the server's SETTLEQ_PRODUCER_KEYS JSON list:")
    typer.echo(f"  {json.dumps(entry)}")
    typer.echo("or, as its only key:")
    typer.echo(f"  SETTLEQ_PRODUCER_KEYS='{json.dumps([entry])}'")
    typer.echo("Clients sign with:")
    typer.echo(f"  SETTLEQ_CLIENT_KEY_ID={key_id} SETTLEQ_CLIENT_SECRET={secret}")


@tokens.command("create")
def create_token(
    role: Annotated[Role, typer.Option(help="viewer (reads) or operator (reads and repairs).")],
) -> None:
    """A new bearer token: prints it (once) and its SHA-256 digest, which the server takes."""
    token = secrets.token_urlsafe(32)
    variable = f"SETTLEQ_{role.value.upper()}_TOKENS"
    typer.echo(f"token:   {token}   (shown once: give it to the {role.value})")
    typer.echo(f"sha-256: {token_digest(token)}")
    typer.echo("")
    typer.echo(f"Add the digest to the server's {variable} (comma-separated digests):")
    typer.echo(f"  {variable}={token_digest(token)}")
    typer.echo("Clients and the dashboard use the token:")
    typer.echo(f"  SETTLEQ_CLIENT_TOKEN={token}")
