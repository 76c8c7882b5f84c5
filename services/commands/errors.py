"""Every failure a client command meets, said one line per problem with an exit
code (docs/operations.md#commands): an API refusal (status, the error's code,
each detail's location and message, as the API sent them), an API that cannot
be reached, a setting or option that is wrong, a file that cannot be read.
Never a traceback.

:func:`refusal_lines` is the one formatter of an API error body: every command
prints a refusal through it (``run`` below, ``edi.refuse`` for an X12 file
with its 997)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import typer

from services.commands.client import BadApiUrl, NoCredentials
from services.commands.literal import visible

# Exit codes (docs/operations.md#commands): a refusal or a failure, and a usage or
# configuration error.
FAILED, USAGE = 1, 2

# What a detail says (its own code and message), apart from where it points.
_CODE_KEYS = ("code", "type")
_MESSAGE_KEYS = ("msg", "message")
# An X12 problem's place in the file (docs/api.md#edi-intake).
_EDI_KEYS = ("segment", "tag", "element", "control_number")
# pydantic's own members, never a location (the API drops ``input``: it may be huge).
_NOT_A_PLACE = frozenset({"loc", "input", "ctx", "url", *_CODE_KEYS, *_MESSAGE_KEYS, *_EDI_KEYS})


class Refused(Exception):
    """The API answered with an error body (docs/api.md#errors)."""

    def __init__(self, status: int, code: str, message: str, details: Sequence[Any] = ()) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = list(details)
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        return refusal_lines(self.status, self.code, self.message, self.details)


def refusal_lines(status: int, code: str, message: str, details: Sequence[Any]) -> list[str]:
    """One line per problem: ``<status> <code>: <where>: <message>``.

    A refusal without details is one problem, its own message. Each detail is
    one: where it points (a field path, an NDJSON line, an X12 segment, the
    partition or job it names) and its message, else the error's; the
    detail's own code, when it is not the error's, follows in parentheses."""
    if not details:
        return [f"{status} {code}: {message}"]
    lines = []
    for detail in details:
        if not isinstance(detail, dict):
            lines.append(f"{status} {code}: {detail}")
            continue
        said = _first(detail, _MESSAGE_KEYS) or message
        own = _first(detail, _CODE_KEYS)
        also = f" ({own})" if own and own != code else ""
        place = where(detail)
        lines.append(f"{status} {code}: {place + ': ' if place else ''}{said}{also}")
    return lines


def where(detail: dict[str, Any]) -> str:
    """Where one detail points: ``line 3, lines[0].sku``, ``documents[1].bogus``,
    ``query parameter x``, ``segment 12 SE, element 1, control number 0001``,
    ``partition_key V-9``."""
    places = []
    loc = detail.get("loc")
    if isinstance(loc, list | tuple) and loc:
        places.append(_path([str(part) for part in loc]))
    if detail.get("segment") is not None:
        tag = f" {detail['tag']}" if detail.get("tag") else ""
        places.append(f"segment {detail['segment']}{tag}")
    if detail.get("element") is not None:
        places.append(f"element {detail['element']}")
    if detail.get("control_number"):
        places.append(f"control number {detail['control_number']}")
    for key, value in detail.items():
        if key in _NOT_A_PLACE or value is None:
            continue
        if isinstance(value, list | tuple):
            value = ",".join(str(v) for v in value)
        if isinstance(value, str | int | float):
            places.append(f"{key} {value}")
    return ", ".join(places)


def _path(loc: list[str]) -> str:
    """A pydantic location as a person reads it: ``documents[1].lines[0].sku``;
    an NDJSON line (``line 3``, which the API puts first) and a query
    parameter named as such."""
    head = ""
    if loc[0].startswith("line "):
        head, loc = loc[0], loc[1:]
    elif loc[0] == "query":
        head, loc = "query parameter", loc[1:]
    elif loc[0] == "body":
        loc = loc[1:]
    path = ""
    for part in loc:
        path += f"[{part}]" if part.isdigit() else f".{part}" if path else part
    if head == "query parameter":
        return f"{head} {path}".strip()
    return ", ".join(p for p in (head, path) if p)


def _first(detail: dict[str, Any], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = detail.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def refused(response: httpx.Response) -> Refused:
    try:
        error = response.json()["error"]
        code, message = str(error["code"]), str(error["message"])
        details = error.get("details") or []
    except (ValueError, KeyError, TypeError, AttributeError):
        code = response.reason_phrase or "http_error"
        message = " ".join(response.text.split())[:200] or "no error body"
        details = []
    return Refused(
        response.status_code, code, message, details if isinstance(details, list) else []
    )


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
    """The lines (one per problem) for a failure a user can fix; None for a bug
    (kept as a traceback)."""
    if isinstance(exc, Refused | NoCredentials | BadApiUrl):
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


def exit_code(exc: BaseException) -> int:
    """2 for what the user's options or settings got wrong, else 1
    (docs/operations.md#commands)."""
    return USAGE if isinstance(exc, NoCredentials | BadApiUrl) else FAILED


def say(text: str) -> None:
    """Each line of ``text`` on stderr, as ``settleq: <line>``; an API's message may
    quote data, whose control characters are shown as escapes."""
    for line in text.splitlines():
        typer.echo(f"settleq: {visible(line)}", err=True)


def run(app: Callable[[], Any]) -> None:
    """Run the command line; a failure :func:`explain` knows is said on stderr,
    one line per problem, with its exit code."""
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - anything unexplained is re-raised
        text = explain(exc)
        if text is None:
            raise
        say(text)
        sys.exit(exit_code(exc))
