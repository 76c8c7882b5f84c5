"""``settleq webhooks``: what a receiver's developer reaches for first,
``verify``: is this request's signature ours? (docs/api.md#webhooks)."""

from __future__ import annotations

import sys
import time
from typing import Annotated

import typer

from services.commands.options import console
from shared.domain import webhooks

app = typer.Typer(help="Webhooks: verify a delivered request's signature.")


def _split(request: bytes) -> tuple[dict[str, str], bytes]:
    """A raw HTTP request's headers and body: an optional request line, the
    header lines, a blank line, then the body exactly as received."""
    for blank in (b"\r\n\r\n", b"\n\n"):
        head, found, body = request.partition(blank)
        if found:
            break
    else:
        head, body = request, b""
    headers: dict[str, str] = {}
    for line in head.decode("latin-1").splitlines():
        name, colon, value = line.partition(":")
        if colon and " " not in name.strip():
            headers[name.strip().lower()] = value.strip()
    return headers, body


@app.command("verify")
def verify(
    secret: Annotated[
        str,
        typer.Option(envvar="SETTLEQ_WEBHOOK_SECRET", help="The endpoint's secret (whsec_...)."),
    ],
    at: Annotated[
        int | None,
        typer.Option(help="Check as of this Unix time (a request saved earlier); default now."),
    ] = None,
) -> None:
    """Read one HTTP request from stdin (headers, a blank line, the body as
    received) and say whether its webhook-signature holds for SECRET, and why
    not. Exit 0 when it holds, 1 when it does not, 2 for a secret that is none."""
    headers, body = _split(sys.stdin.buffer.read())
    try:
        webhooks.signature(secret, "", 0, b"")
    except webhooks.BadSecret as exc:
        console.print(f"not a webhook secret: {exc}")
        raise typer.Exit(2) from None
    verdict = webhooks.verify(secret, headers, body, time.time() if at is None else at)
    console.print(f"{'valid' if verdict.ok else 'invalid'}: {verdict.why}")
    raise typer.Exit(0 if verdict.ok else 1)
