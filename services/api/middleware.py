"""Refuse what no endpoint accepts before it reaches a route or the database."""

from __future__ import annotations

from urllib.parse import unquote

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from services.api.errors import error_response


class RefuseControlCharacters:
    """A NUL or other C0 control character in the path or query is never valid
    (PostgreSQL cannot even store NUL): 422 rather than a database error.

    Plain ASGI rather than ``@app.middleware("http")``: Starlette's
    ``BaseHTTPMiddleware`` wraps every received body part in a task group and
    an async generator, a cost on every line of a large NDJSON batch for a
    check of the URL alone."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            # The path as the server decoded it, once: a partition holding "%00"
            # (sent as %2500) is a "%" and two zeros, not a NUL. The query, decoded.
            target = scope["path"] + "?" + unquote(Request(scope).url.query)
            if any(ord(c) < 0x20 or ord(c) == 0x7F for c in target):
                response = error_response(
                    422, "invalid_characters", "control characters are not allowed in a URL"
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
