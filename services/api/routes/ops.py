"""Liveness and readiness (docs/api.md#operations-endpoints): no token needed; metrics: a viewer
token."""

from __future__ import annotations

import logging
from pathlib import Path

import pika
import redis
from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from prometheus_client import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from sqlalchemy import text

from services.api.auth import Ctx, Viewer
from services.api.context import ApiContext
from services.api.schemas import Health
from services.supervisor.counts import read_counts
from shared.adapters.rabbitmq.broker import connection_parameters
from shared.adapters.rabbitmq.logs import attempts_reported_by_caller

router = APIRouter(tags=["operations"])
log = logging.getLogger("settleq.api")


@router.get("/healthz", operation_id="healthz")
async def healthz() -> Health:
    return Health(status="ok")


def _checks(ctx: ApiContext) -> dict[str, str]:
    checks = {}
    try:
        with ctx.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unavailable ({type(exc).__name__})"
    try:
        client = redis.Redis.from_url(ctx.settings.redis_url, socket_timeout=2)
        client.ping()
        client.close()
        checks["redis"] = "ok"
    except Exception as exc:
        checks["redis"] = f"unavailable ({type(exc).__name__})"
    try:
        with attempts_reported_by_caller():  # below, in one line
            pika.BlockingConnection(connection_parameters(ctx.settings.broker_url, 2)).close()
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"unavailable ({type(exc).__name__})"
        log.warning("readyz: broker unavailable: %s", type(exc).__name__)
    return checks | _components(ctx)


def _components(ctx: ApiContext) -> dict[str, str]:
    """Under `settleq up`, each supervised component: ``ok``, or ``crash_looping``
    (docs/operations.md#a-component-keeps-restarting: restarted at the capped
    backoff, the stack not ready until it stays up), as the supervisor's counts
    file says. No supervisor, or a file that holds no counts (the metrics log
    that): no such check."""
    if not ctx.settings.supervisor_counts_file:
        return {}
    try:
        counts = read_counts(Path(ctx.settings.supervisor_counts_file))
    except (OSError, ValueError):
        return {}
    if counts is None:
        return {}
    return {
        component: "crash_looping" if component in counts.crash_looping else "ok"
        for component in sorted(counts.restarts)
    }


@router.get("/readyz", operation_id="readyz", responses={503: {"model": Health}})
async def readyz(ctx: Ctx) -> JSONResponse:
    checks = await run_in_threadpool(_checks, ctx)
    ready = all(v == "ok" for v in checks.values())
    body = Health(status="ready" if ready else "unavailable", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)


@router.get(
    "/metrics",
    operation_id="metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text exposition format (docs/operations.md#metrics)",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def metrics(request: Request, _: Viewer) -> Response:
    registry = request.app.state.metrics.registry
    # Collectors read RabbitMQ and the database: off the event loop.
    body = await run_in_threadpool(generate_latest, registry)
    return Response(body, media_type=CONTENT_TYPE_PLAIN_0_0_4)
