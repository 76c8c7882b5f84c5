"""Error bodies (docs/api.md#errors): ``{"error": {"code", "message", "details"}}``.

Domain and adapter failures are mapped to HTTP here, at the edge; a 500 never
carries internals, and no error ever echoes a secret.
"""

from __future__ import annotations

import logging
from typing import Any

import dramatiq.errors
import pika.exceptions
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ValidationError
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from shared.domain.kinds import KINDS
from shared.domain.kinds.base import RepeatedLine

log = logging.getLogger("settleq.api")
CLIENT_CLOSED_REQUEST = 499  # nginx's status for a client that left first


class ErrorDetail(BaseModel):
    code: str
    message: str
    details: list[dict[str, Any]] = []
    # Only in the answer to an application/edi-x12 batch refused for its content
    # (docs/api.md#edi-intake): the 997 rejecting it, or null when its envelope
    # could not be read. Absent from every other error.
    acknowledgement: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.message = message
        self.details = details or []
        self.headers = headers
        self.extra = extra  # more members of the error object (ErrorDetail's optional ones)
        super().__init__(message)


class BodyRefused(StarletteHTTPException):
    """A body refused while it is being received (services/api/intake/body_guard.py).
    An ``HTTPException`` because FastAPI re-raises those from its body parsing;
    anything else raised there becomes a 400 "error parsing the body"."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(status, message)
        self.code = code


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: dict[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    error = {"code": code, "message": message, "details": details or [], **(extra or {})}
    return JSONResponse({"error": error}, status_code=status, headers=headers)


def validation_details(errors: list[Any]) -> list[dict[str, Any]]:
    """Pydantic errors without their ``input`` (it may be huge or sensitive), and
    without the batch's kind tag that the discriminated union puts first."""
    details = []
    for e in errors[:50]:
        loc = [str(p) for p in e.get("loc", ())]
        if loc and loc[0] in KINDS:
            loc = loc[1:]
        details.append({"loc": loc, "type": e.get("type"), "msg": e.get("msg")})
    return details


def validation_error(errors: list[Any]) -> ApiError:
    details = validation_details(errors)
    types = [d["type"] for d in details]
    # The most specific code wins: an unknown field or an out-of-range decimal
    # is what a producer needs to fix first.
    for preferred in ("extra_forbidden", "decimal_out_of_range", "decimal_must_be_string"):
        if preferred in types:
            code = preferred
            break
    else:
        code = types[0] if types else "validation_error"
    message = details[0]["msg"] if details else "request is invalid"
    return ApiError(422, code, message, details)


def duplicate_line(document_id: str, repeated: RepeatedLine, where: list[str]) -> ApiError:
    """docs/architecture.md#reconciliation-keys: a document names each line (promo ``line_no``,
    freight ``leg_no``, recipe location) once; ``where`` locates the document in the body."""
    message = f"document {document_id!r} holds {repeated.field} {repeated.value!r} more than once"
    detail = {
        "loc": [*where, *repeated.loc],
        "type": "duplicate_line",
        "msg": message,
        "document_id": document_id,
        "value": repeated.value,
    }
    return ApiError(422, "duplicate_line", message, [detail])


_BROKER_DOWN = (
    dramatiq.errors.BrokerConnectionError,
    pika.exceptions.AMQPConnectionError,
    pika.exceptions.AMQPChannelError,
)
DATABASE_DOWN = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError)


def install_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return error_response(
            exc.status, exc.code, exc.message, exc.details, exc.headers, exc.extra
        )

    @app.exception_handler(RequestValidationError)
    async def _request_validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        err = validation_error(list(exc.errors()))
        return error_response(err.status, err.code, err.message, err.details)

    @app.exception_handler(ValidationError)
    async def _validation(_: Request, exc: ValidationError) -> JSONResponse:
        err = validation_error(list(exc.errors()))
        return error_response(err.status, err.code, err.message, err.details)

    @app.exception_handler(BodyRefused)
    async def _body_refused(_: Request, exc: BodyRefused) -> JSONResponse:
        return error_response(exc.status_code, exc.code, str(exc.detail))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 400:
            # FastAPI's "error parsing the body" (e.g. invalid UTF-8): a bad body is 422.
            return error_response(422, "json_invalid", "the body is not valid JSON text")
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            exc.status_code, "http_error"
        )
        # Keep the exception's headers: a 405 carries its Allow (RFC 9110 15.5.6).
        headers = dict(exc.headers) if exc.headers else None
        return error_response(exc.status_code, code, str(exc.detail), headers=headers)

    @app.exception_handler(ClientDisconnect)
    async def _client_left(request: Request, _: ClientDisconnect) -> Response:
        # The client hung up before its body was read (Ctrl-C during an upload):
        # nothing was stored, nobody hears the answer, and it is no server error.
        # 499 is nginx's status for it: what /metrics counts, never a 500.
        log.info("client closed the connection during %s %s", request.method, request.url.path)
        return Response(status_code=CLIENT_CLOSED_REQUEST)

    @app.exception_handler(sa_exc.DataError)
    async def _data(_: Request, exc: sa_exc.DataError) -> JSONResponse:
        # A value the database cannot hold (e.g. a NUL character in a filter).
        log.info("refused a value the database cannot hold: %s", type(exc.orig).__name__)
        return error_response(
            422, "invalid_value", "a value in the request cannot be stored or searched"
        )

    _install_outage_handlers(app)


def _install_outage_handlers(app: FastAPI) -> None:
    """A dependency that is down is a 503, never a 500; anything else unexpected is a 500."""

    async def _broker_down(_: Request, exc: Exception) -> JSONResponse:
        log.warning("broker unavailable: %s", type(exc).__name__)
        return error_response(503, "broker_unavailable", "the message broker is unreachable")

    async def _database_down(_: Request, exc: Exception) -> JSONResponse:
        log.warning("database unavailable: %s", type(exc).__name__)
        return error_response(503, "database_unavailable", "the database is unreachable")

    for cls in _BROKER_DOWN:
        app.add_exception_handler(cls, _broker_down)
    for cls in DATABASE_DOWN:
        app.add_exception_handler(cls, _database_down)

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return error_response(500, "internal_error", "internal error")
