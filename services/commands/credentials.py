"""``settleq keys create`` and ``settleq tokens create``: new credentials, the
secret shown once, and the ``export`` lines that configure them
(docs/operations.md#credentials).

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
    typer.echo(f"# key id:  {key_id}")
    typer.echo(f"# secret:  {secret}   (shown once: keep it in your secrets manager)")
    typer.echo("# The server's SETTLEQ_PRODUCER_KEYS, with this key as its only one (with other")
    typer.echo("# keys, add this entry to its JSON list):")
    typer.echo(f"#   {json.dumps(entry)}")
    typer.echo(f"export SETTLEQ_PRODUCER_KEYS={shlex.quote(json.dumps([entry]))}")
    typer.echo("# Clients sign with:")
    typer.echo(f"export SETTLEQ_CLIENT_KEY_ID={key_id} SETTLEQ_CLIENT_SECRET={secret}")


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
