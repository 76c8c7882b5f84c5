"""Who is calling: a producer (HMAC-signed request) or a bearer-token role."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from starlette.datastructures import Headers

from services.api.context import ApiContext, get_context
from services.api.errors import ApiError
from shared.config.settings import ProducerKey, Settings
from shared.domain.signing import (
    SignatureError,
    StreamingVerifier,
    token_digest,
)

Role = Literal["producer", "viewer", "operator"]


@dataclass(frozen=True)
class Principal:
    role: Role
    key: ProducerKey | None = None
    token_digest: str | None = None

    @property
    def key_id(self) -> str | None:
        return self.key.key_id if self.key else None

    @property
    def actor(self) -> str:
        """Who, for the audit log: a token's fingerprint (never the token) or a key id."""
        if self.token_digest is not None:
            return f"{self.role}:{self.token_digest[:12]}"
        return f"producer:{self.key_id}"


def path_and_query(request: Request) -> str:
    """The request's target as the client sent it, which it signed: the raw
    path (percent-encoded as it was on the wire: ``request.url.path`` decodes it
    and encodes it again its own way, and a partition key in a path may hold
    any character) and the raw query."""
    raw = request.scope.get("raw_path")
    path = raw.decode("ascii", "replace") if raw else request.url.path
    query = request.url.query
    return path + (f"?{query}" if query else "")


async def producer_verifier(
    ctx: ApiContext, request: Request
) -> tuple[ProducerKey, StreamingVerifier]:
    """Check a producer's headers now; the returned verifier checks the body as it streams."""
    return await signed_headers_off_loop(
        ctx, request.headers, request.method, path_and_query(request)
    )


async def signed_headers_off_loop(
    ctx: ApiContext, headers: Headers, method: str, target: str
) -> tuple[ProducerKey, StreamingVerifier]:
    """``signed_headers`` from the event loop: in a worker thread, since the
    keyring re-reads the database's keys (about every second) in whichever
    call finds them stale, and a slow read (a lock, a stalled connection) on
    the loop would stall every request the process serves."""
    return await run_in_threadpool(signed_headers, ctx, headers, method, target)


def signed_headers(
    ctx: ApiContext, headers: Headers, method: str, target: str
) -> tuple[ProducerKey, StreamingVerifier]:
    """A producer's key and signature header checked, before any of the body
    (``ApiError`` 401 otherwise); the verifier that checks the body."""
    key_id = headers.get("x-key-id")
    signature = headers.get("x-signature")
    if not key_id or not signature:
        raise ApiError(401, "signature_missing", "X-Key-Id and X-Signature are required")
    # The environment's keys and the database's, as of a second ago at most:
    # a key created, rescoped, rotated or revoked at runtime counts within seconds.
    key = ctx.keys.key(key_id)
    if key is None:
        # Told apart so that its holder stops retrying and asks for a new key;
        # it says no more than that the id was revoked.
        if ctx.keys.revoked(key_id):
            raise ApiError(401, "key_revoked", "this producer key has been revoked")
        raise ApiError(401, "unknown_key", "unknown producer key")
    try:
        verifier = StreamingVerifier(
            signature,
            key.secrets,
            method,
            target,
            now=int(time.time()),
            tolerance_s=ctx.settings.signature_tolerance_s,
        )
    except SignatureError as exc:
        raise ApiError(401, exc.code, str(exc)) from None
    return key, verifier


def authenticate_producer(ctx: ApiContext, request: Request, body: bytes) -> ProducerKey:
    """Verify ``X-Key-Id`` / ``X-Signature`` over method, path and body
    (docs/api.md#producer-signatures), on this thread: never the event loop's
    (``producer`` is the async form)."""
    key, verifier = signed_headers(ctx, request.headers, request.method, path_and_query(request))
    return _verified(key, verifier, body)


def _verified(key: ProducerKey, verifier: StreamingVerifier, body: bytes) -> ProducerKey:
    verifier.update(body)
    try:
        verifier.verify()
    except SignatureError as exc:
        raise ApiError(401, exc.code, str(exc)) from None
    return key


def bearer_token(headers: Headers) -> str | None:
    header = headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def bearer_refusal(settings: Settings, headers: Headers, *, write: bool) -> ApiError | None:
    """Why these headers may not send a body (None: they may). Any valid token
    may; only an operator's may write: every write but the front door's is an
    operator's (contracts, dead letters, dispute resolutions)."""
    token = bearer_token(headers)
    if token is None:
        return ApiError(401, "token_missing", "a bearer token is required to send a body")
    role = settings.token_role(token)
    if role is None:
        return ApiError(401, "invalid_token", "bearer token is not valid")
    if write and role != "operator":
        return ApiError(403, "forbidden", "this endpoint needs an operator token")
    return None


def _bearer(request: Request) -> str | None:
    return bearer_token(request.headers)


def _token_role(ctx: ApiContext, token: str) -> Role | None:
    return ctx.settings.token_role(token)


def reader(request: Request, ctx: Annotated[ApiContext, Depends(get_context)]) -> Principal:
    """Viewer or operator token, or a signed producer GET (limited to its own jobs)."""
    token = _bearer(request)
    if token is not None:
        role = _token_role(ctx, token)
        if role is None:
            raise ApiError(401, "invalid_token", "bearer token is not valid")
        return Principal(role, token_digest=token_digest(token))
    if request.headers.get("x-signature") or request.headers.get("x-key-id"):
        return Principal("producer", authenticate_producer(ctx, request, b""))
    raise ApiError(401, "token_missing", "a bearer token or a signed request is required")


def _token_holder(request: Request, ctx: ApiContext, missing: str) -> Principal:
    token = _bearer(request)
    if token is None:
        raise ApiError(401, "token_missing", missing)
    role = _token_role(ctx, token)
    if role is None:
        raise ApiError(401, "invalid_token", "bearer token is not valid")
    return Principal(role, token_digest=token_digest(token))


def viewer(request: Request, ctx: Annotated[ApiContext, Depends(get_context)]) -> Principal:
    """A viewer or operator token (dashboard, metrics); producers have no access."""
    return _token_holder(request, ctx, "a viewer or operator bearer token is required")


def operator(request: Request, ctx: Annotated[ApiContext, Depends(get_context)]) -> Principal:
    who = _token_holder(request, ctx, "an operator bearer token is required")
    if who.role != "operator":
        raise ApiError(403, "forbidden", "this endpoint needs an operator token")
    return who


async def producer(request: Request, ctx: Annotated[ApiContext, Depends(get_context)]) -> Principal:
    """A producer key's signed request, whatever its method (its body read and
    checked): what belongs to a key, such as its webhook endpoints."""
    if _bearer(request) is not None:
        raise ApiError(
            403, "forbidden", "this endpoint is a producer key's: sign the request with the key"
        )
    body = await request.body()
    key, verifier = await producer_verifier(ctx, request)
    return Principal("producer", _verified(key, verifier, body))


Reader = Annotated[Principal, Depends(reader)]
Producer = Annotated[Principal, Depends(producer)]
Viewer = Annotated[Principal, Depends(viewer)]
Operator = Annotated[Principal, Depends(operator)]
Ctx = Annotated[ApiContext, Depends(get_context)]
