"""One line and an exit code for every failure a client command meets
(docs/operations.md#commands): an API refusal (status, error code and message),
an API that cannot be reached, a file that cannot be read. Never a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import httpx
import typer

from services.client import NoCredentials


class Refused(Exception):
    """The API answered with an error body (docs/api.md#errors)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code


def refused(response: httpx.Response) -> Refused:
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
    except (ValueError, KeyError, TypeError):
        code = response.reason_phrase or "http_error"
        message = " ".join(response.text.split())[:200] or "no error body"
    return Refused(response.status_code, code, message)


def answer(response: httpx.Response) -> Any:
    """The JSON of a successful answer; a refusal raises :class:`Refused`."""
    if response.status_code >= 400:
        raise refused(response)
    return response.json()


def _where(exc: httpx.TransportError) -> str:
    try:
        url = exc.request.url
    except RuntimeError:
        return "the API"
    return f"the API at {url.scheme}://{url.netloc.decode()}"


def explain(exc: BaseException) -> str | None:
    """The one line for a failure a user can fix; None for a bug (kept as a traceback)."""
    if isinstance(exc, Refused | NoCredentials):
        return str(exc)
    if isinstance(exc, httpx.HTTPStatusError):
        return str(refused(exc.response))
    if isinstance(exc, httpx.ConnectError):
        return f"cannot reach {_where(exc)}: is `settleq up` running? (--url or SETTLEQ_URL)"
    if isinstance(exc, httpx.TimeoutException):
        return f"{_where(exc)} did not answer in time: is it overloaded or stopped?"
    if isinstance(exc, httpx.TransportError):
        return f"cannot talk to {_where(exc)}: {type(exc).__name__}"
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"cannot read {exc.filename}: {exc.strerror or type(exc).__name__}"
    return None


def run(app: Callable[[], Any]) -> None:
    """Run the command line; a failure :func:`explain` knows is one line on stderr, exit 1."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - anything unexplained is re-raised
        line = explain(exc)
        if line is None:
            raise
        typer.echo(f"settleq: {line}", err=True)
        sys.exit(1)
