"""Refuse what no endpoint accepts before it reaches a route or the database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from urllib.parse import unquote

from fastapi import Request, Response

from services.api.errors import error_response


async def refuse_control_characters(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    """A NUL or other C0 control character in the path or query is never valid
    (PostgreSQL cannot even store NUL): 422 rather than a database error."""
    target = unquote(request.url.path + "?" + request.url.query)
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
        return error_response(
            422, "invalid_characters", "control characters are not allowed in a URL"
        )
    return await call_next(request)
