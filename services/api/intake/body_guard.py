"""Bodies only from the authenticated, and never a big one (docs/api.md#bodies-and-roles).

FastAPI reads and parses a route's body parameter *before* it resolves the
route's dependencies (``get_request_handler`` awaits ``request.body()`` and
only then calls ``solve_dependencies``), so an auth dependency runs too late:
a token-less 100 MiB POST to an operator endpoint was parsed, then refused.
This plain ASGI middleware decides on the headers alone, before any route:

- a request with a body (``Content-Length`` above 0, or any
  ``Transfer-Encoding``) needs a valid bearer token, else 401 with nothing
  read; a write (any method but GET, HEAD, OPTIONS) needs an operator's, else
  403: every write but the front door's is an operator's. The route's own
  dependency still checks the role it needs;
- a body above ``BODY_LIMIT`` is 413 ``payload_too_large``: at once when
  ``Content-Length`` says so, else when the streamed bytes pass the limit
  (counted as they arrive, never buffered here).

``POST /v1/batches`` is exempt: its producers authenticate by a signature over
the body, and the route streams and caps it itself (``max_body_bytes``).
A producer's own resources (``/v1/webhook-endpoints...``) take a signed body
instead of a token: its key and signature header are checked here, before
the body (which the route's dependency then verifies), within the same limit.
So does ``POST /v1/remittances``, a payer's file, within the front door's
limit (``max_body_bytes``): an 820 of ten thousand lines is megabytes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from services.api.auth import bearer_refusal, signed_headers_off_loop
from services.api.errors import DATABASE_DOWN, ApiError, BodyRefused, error_response
from shared.config.settings import Settings

BODY_LIMIT = 1 << 20  # 1 MiB: the largest request body any endpoint but the front door takes
# The front door's path, whatever the method: POST authenticates its body
# itself, and any other method is a 405 that reads nothing.
EXEMPT = "/v1/batches"
READS = frozenset({"GET", "HEAD", "OPTIONS"})
PRODUCER_OWNED = "/v1/webhook-endpoints"
REMITTANCES = "/v1/remittances"


def declared_length(headers: Headers) -> int | None:
    value = headers.get("content-length")
    return int(value) if value is not None and value.isdigit() else None


def has_body(headers: Headers) -> bool:
    declared = declared_length(headers)
    return bool(declared) or "transfer-encoding" in headers


class GuardBodies:
    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == EXEMPT:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        write = scope["method"] not in READS

        async def refusal() -> ApiError | None:
            if _producer_owned(scope["path"]) and "x-signature" in headers:
                return await _signature_refusal(headers, scope)
            return bearer_refusal(self.settings, headers, write=write)

        if not has_body(headers):
            # HTTP/1.1 sends no body then; a protocol that may send one
            # unannounced (HTTP/2) meets the same checks when its bytes arrive.
            await self.app(scope, _Guarded(receive, refusal), send)
            return
        limit = self.settings.max_body_bytes if scope["path"] == REMITTANCES else BODY_LIMIT
        refused = await refusal()
        if refused is None and (declared_length(headers) or 0) > limit:
            refused = ApiError(413, "payload_too_large", _too_large(limit))
        if refused is None:
            await self.app(scope, _Guarded(receive, None, limit), send)
            return
        # Answered without a byte of the body read: the server drops the rest.
        await error_response(refused.status, refused.code, refused.message)(scope, receive, send)


def _too_large(limit: int) -> str:
    return f"the request body is larger than {limit} bytes"


def _producer_owned(path: str) -> bool:
    return path in (PRODUCER_OWNED, REMITTANCES) or path.startswith(PRODUCER_OWNED + "/")


async def _signature_refusal(headers: Headers, scope: Scope) -> ApiError | None:
    query = scope.get("query_string", b"").decode("latin-1")
    target = scope["path"] + (f"?{query}" if query else "")
    # The app's context (made in its lifespan) holds the keys, the database's too.
    ctx = scope["app"].state.ctx
    try:
        await signed_headers_off_loop(ctx, headers, scope["method"], target)
    except ApiError as refused:
        return refused
    except DATABASE_DOWN:
        # The database's keys cannot be read: a 503, as any route says, not a 500
        # (this middleware runs outside the app's error handlers).
        return ApiError(503, "database_unavailable", "the database is unreachable")
    return None


class _Guarded:
    """``receive`` that refuses a body once it passes the limit, and checks the
    caller (``check``) when an unannounced body's first bytes arrive."""

    def __init__(
        self,
        receive: Receive,
        check: Callable[[], Awaitable[ApiError | None]] | None,
        limit: int = BODY_LIMIT,
    ) -> None:
        self.receive = receive
        self.check = check
        self.size = 0
        self.limit = limit

    async def __call__(self) -> Message:
        message = await self.receive()
        if message["type"] == "http.request":
            body = message.get("body", b"")
            if body and self.check is not None:
                refused, self.check = await self.check(), None
                if refused is not None:
                    raise BodyRefused(refused.status, refused.code, refused.message)
            self.size += len(body)
            if self.size > self.limit:
                raise BodyRefused(413, "payload_too_large", _too_large(self.limit))
        return message
