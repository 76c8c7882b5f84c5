"""Liveness and readiness (SPEC §3.6): no token needed."""

from __future__ import annotations

import pika
import redis
from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from sqlalchemy import text

from services.api.auth import Ctx
from services.api.context import ApiContext
from services.api.schemas import Health

router = APIRouter(tags=["operations"])


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
        params = pika.URLParameters(ctx.settings.broker_url)
        params.socket_timeout = 2
        params.connection_attempts = 1
        pika.BlockingConnection(params).close()
        checks["broker"] = "ok"
    except Exception as exc:
        checks["broker"] = f"unavailable ({type(exc).__name__})"
    return checks


@router.get("/readyz", operation_id="readyz", responses={503: {"model": Health}})
async def readyz(ctx: Ctx) -> JSONResponse:
    checks = await run_in_threadpool(_checks, ctx)
    ready = all(v == "ok" for v in checks.values())
    body = Health(status="ready" if ready else "unavailable", checks=checks)
    return JSONResponse(body.model_dump(), status_code=200 if ready else 503)
