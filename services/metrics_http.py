"""A process's Prometheus metrics on a port of its own, for a viewer or
operator bearer token: the workers' and the webhooks component's (the API
serves its own on ``/metrics``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app

from shared.config.settings import Settings

log = logging.getLogger("settleq.metrics")


def serve(
    registry: CollectorRegistry, settings: Settings, host: str, port: int
) -> ThreadingWSGIServer | None:
    """Serve ``GET /metrics`` on a daemon thread; None (and an error logged) if
    the port cannot be had: a process without metrics still does its work."""
    try:
        server = make_server(
            host,
            port,
            metrics_app(registry, settings),
            ThreadingWSGIServer,
            handler_class=_QuietHandler,
        )
    except OSError as exc:
        log.error("metrics: cannot listen on %s:%d (%s); serving none", host, port, exc)
        return None
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    log.info("metrics on http://%s:%d/metrics", host, port)
    return server


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass  # no access log: scrapes every few seconds would drown the worker's own


StartResponse = Callable[[str, list[tuple[str, str]]], Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _refuse(start_response: StartResponse, status: str, code: str, message: str) -> list[bytes]:
    body = f'{{"error": {{"code": "{code}", "message": "{message}", "details": []}}}}'.encode()
    start_response(status, [("Content-Type", "application/json")])
    return [body]


def metrics_app(registry: CollectorRegistry, settings: Settings) -> WsgiApp:
    """``/metrics`` for a viewer or operator bearer token (docs/operations.md#metrics), nothing
    else."""
    exposition = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/metrics":
            return _refuse(start_response, "404 Not Found", "not_found", "only /metrics is here")
        scheme, _, token = environ.get("HTTP_AUTHORIZATION", "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _refuse(
                start_response, "401 Unauthorized", "token_missing", "a bearer token is required"
            )
        if settings.token_role(token.strip()) is None:
            return _refuse(
                start_response, "401 Unauthorized", "invalid_token", "bearer token is not valid"
            )
        result: Iterable[bytes] = exposition(environ, start_response)
        return result

    return app
