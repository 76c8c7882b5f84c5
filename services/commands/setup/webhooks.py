"""``settleq webhooks``: a producer key's endpoints (create, list, test,
deliveries, retry, rotate, delete: signed with the key, as ``submit``), an
operator's view of every key's (``list --all``, ``disable``), and what a
receiver's developer reaches for first, ``verify``: is this request's
signature ours? (docs/api.md#webhooks)."""

from __future__ import annotations

import json
import sys
import time
from typing import Annotated, Any
from urllib.parse import urlencode

import typer
from rich.table import Table
from rich.text import Text

from services.commands.errors import answer, refused
from services.commands.options import (
    DEFAULT_URL,
    KeyOpt,
    OperatorTokenOpt,
    SecretOpt,
    UrlOpt,
    console,
    make_client,
    print_more,
    show,
    token_client,
)
from shared.domain import webhooks

app = typer.Typer(
    help="Webhooks: a producer key's endpoints and their delivery log; verify a request."
)
IdArg = Annotated[str, typer.Argument(help="The endpoint's id (we_..., from webhooks list).")]
JsonOpt = Annotated[
    bool, typer.Option("--json", help="Print the API's answer as JSON (for a script).")
]


def _literal(value: str | None) -> Text:
    """Text as sent, never markup: a ``[`` stays, and a control character
    (an escape sequence an endpoint answered) is shown escaped, not obeyed."""
    shown = "".join(
        c if c.isprintable() or c == " " else c.encode("unicode_escape").decode()
        for c in value or ""
    )
    return Text(shown)


def _print_json(found: Any) -> None:
    sys.stdout.write(json.dumps(found, ensure_ascii=False, indent=2) + "\n")


def _producer(url: str, key_id: str | None, secret: str | None) -> Any:
    return make_client(url, key_id, secret, None)


def _operator(url: str, token: str | None) -> Any:
    return token_client(url, token, "an operator")


def _endpoints_table(items: list[dict[str, Any]], title: str) -> None:
    table = Table(title=title)
    for column in ("id", "key", "url", "events", "status", "failing since"):
        table.add_column(column)
    for e in items:
        status = e["status"] + (f" ({e['disabled_reason']})" if e["disabled_reason"] else "")
        table.add_row(
            e["id"],
            _literal(e["key_id"]),
            _literal(e["url"]),
            ",".join(e["events"]),
            status,
            e["failing_since"] or "",
        )
    show(table)


@app.command("create")
def create(
    endpoint_url: Annotated[str, typer.Argument(metavar="URL", help="https:// receiver URL.")],
    events: Annotated[
        str,
        typer.Option(
            help="Comma-separated: " + ", ".join(webhooks.EVENT_TYPES) + ".",
        ),
    ] = ",".join(webhooks.EVENT_TYPES),
    description: Annotated[str | None, typer.Option(help="A note for your team.")] = None,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Register an endpoint for your key's events; prints its secret, once."""
    body: dict[str, Any] = {
        "url": endpoint_url,
        "events": [e.strip() for e in events.split(",") if e.strip()],
    }
    if description is not None:
        body["description"] = description
    made = answer(_producer(url, key_id, secret).signed_json("POST", "/v1/webhook-endpoints", body))
    if as_json:
        _print_json(made)
        return
    console.print(
        f"endpoint {made['id']} ({made['status']}): {made['url']}", soft_wrap=True, markup=False
    )
    console.print(f"events: {', '.join(made['events'])}")
    console.print(f"secret: {made['secret']}", soft_wrap=True)
    console.print("keep the secret now: it is not shown again (rotate makes a new one)")


@app.command("list")
def list_endpoints(
    every: Annotated[
        bool, typer.Option("--all", help="Every key's endpoints (operator token).")
    ] = False,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: OperatorTokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List your key's endpoints; with --all, every key's."""
    if every:
        page = answer(_operator(url, token).bearer("GET", "/admin/webhook-endpoints"))
    else:
        page = answer(_producer(url, key_id, secret).signed("GET", "/v1/webhook-endpoints"))
    if as_json:
        _print_json(page)
        return
    _endpoints_table(page["items"], "webhook endpoints")


@app.command("test")
def test(
    endpoint_id: IdArg,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send the endpoint a ping event; see it with webhooks deliveries."""
    client = _producer(url, key_id, secret)
    sent = answer(client.signed("POST", f"/v1/webhook-endpoints/{endpoint_id}/test"))
    if as_json:
        _print_json(sent)
        return
    console.print(f"ping {sent['event_id']} queued for {endpoint_id}")
    console.print(f"follow it: settleq webhooks deliveries {endpoint_id}")


@app.command("deliveries")
def deliveries(
    endpoint_id: IdArg,
    status: Annotated[
        str | None, typer.Option(help="Only these: pending, delivered or failed.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=200, help="At most this many.")] = 20,
    cursor: Annotated[str | None, typer.Option(help="The next page's cursor.")] = None,
    every: Annotated[
        bool, typer.Option("--all", help="Any key's endpoint (operator token).")
    ] = False,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
    token: OperatorTokenOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The endpoint's deliveries, newest first, with each attempt: its answer
    (status or error), detail, latency and the answer's first KiB; a pending
    delivery's next attempt."""
    query = urlencode(
        {k: v for k, v in {"status": status, "limit": limit, "cursor": cursor}.items() if v}
    )
    if every:
        path = f"/admin/webhook-endpoints/{endpoint_id}/deliveries?{query}"
        page = answer(_operator(url, token).bearer("GET", path))
    else:
        path = f"/v1/webhook-endpoints/{endpoint_id}/deliveries?{query}"
        page = answer(_producer(url, key_id, secret).signed("GET", path))
    if as_json:
        _print_json(page)
        return
    _deliveries_table(endpoint_id, page["items"])
    print_more(page)


def _deliveries_table(endpoint_id: str, items: list[dict[str, Any]]) -> None:
    table = Table(title=f"deliveries of {endpoint_id}")
    columns = ("delivery", "event", "type", "status", "next attempt")
    for column in (*columns, "attempt", "at", "result", "ms", "detail", "answer"):
        table.add_column(column)
    for d in items:
        tries = d["attempt_log"] or [None]
        for n, t in enumerate(tries, 1):
            head = (
                (d["id"], d["event_id"], d["event_type"], d["status"], d["next_attempt_at"] or "")
                if n == 1
                else ("",) * 5
            )
            if t is None:
                table.add_row(*head, "", "", "", "", "", "")
                continue
            table.add_row(
                *head,
                str(n),
                t["at"],
                str(t["status_code"]) if t["status_code"] else t["error"] or "",
                str(t["latency_ms"]),
                _literal(t["detail"]),
                _literal(t["answer"]),
            )
    show(table)


@app.command("retry")
def retry(
    endpoint_id: IdArg,
    delivery_id: Annotated[str, typer.Argument(help="The delivery's id (dlv_...).")],
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
) -> None:
    """Send a delivery again now (same webhook-id), whatever became of it."""
    path = f"/v1/webhook-endpoints/{endpoint_id}/deliveries/{delivery_id}/retry"
    found = answer(_producer(url, key_id, secret).signed("POST", path))
    console.print(f"delivery {found['id']} ({found['event_type']}) is sent again now")


@app.command("rotate")
def rotate(
    endpoint_id: IdArg,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
) -> None:
    """A new secret (printed once); the old one signs too for 24 hours."""
    path = f"/v1/webhook-endpoints/{endpoint_id}/rotate-secret"
    rotated = answer(_producer(url, key_id, secret).signed("POST", path))
    console.print(f"secret: {rotated['secret']}", soft_wrap=True)
    console.print(f"the old secret signs too until {rotated['previous_secret_expires_at']}")


@app.command("delete")
def delete(
    endpoint_id: IdArg,
    url: UrlOpt = DEFAULT_URL,
    key_id: KeyOpt = None,
    secret: SecretOpt = None,
) -> None:
    """Delete the endpoint and its delivery log."""
    gone = _producer(url, key_id, secret).signed("DELETE", f"/v1/webhook-endpoints/{endpoint_id}")
    if gone.status_code >= 400:
        raise refused(gone)  # 204 has no body to read
    console.print(f"endpoint {endpoint_id} deleted")


@app.command("disable")
def disable(
    endpoint_id: IdArg,
    url: UrlOpt = DEFAULT_URL,
    token: OperatorTokenOpt = None,
) -> None:
    """Stop deliveries to any key's endpoint (operator token; audited)."""
    path = f"/admin/webhook-endpoints/{endpoint_id}/disable"
    found = answer(_operator(url, token).bearer("POST", path))
    console.print(f"endpoint {found['id']} of {found['key_id']} is disabled")


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
