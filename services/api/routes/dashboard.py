"""The dashboard (docs/api.md#operations-endpoints): a static page, and the viewer endpoint it
reads.

A browser cannot send a bearer token on a plain navigation, and a token in the
URL would end up in logs and history. So ``GET /dashboard`` is a static shell
holding no data at all: it asks for a viewer (or operator) token, keeps it in
``sessionStorage`` (shared by the session's tabs; in ``localStorage`` too when
the user asks to be remembered) and reads the API with ``Authorization:
Bearer``. Everything it shows needs that token.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Annotated, Any, Literal

import pika.exceptions
from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse

from services.api.auth import Ctx, Viewer
from services.api.context import ApiContext
from services.api.errors import ErrorBody, log
from services.api.schemas import (
    DashboardRole,
    DashboardSummary,
    DeadLetterCount,
    KindMoney,
    ProcessState,
    QueueState,
    RelayState,
    Throughput,
)
from services.supervisor.counts import read_counts
from shared.adapters.db import dead_letters as dl_db
from shared.adapters.db import stats
from shared.domain.kinds import shown
from shared.wire.times import iso

STATIC = Path(__file__).resolve().parents[1] / "static"
# The throughput chart's ranges: (window, bucket) in seconds, 60 to 96 points each.
RANGES: dict[str, tuple[int, int]] = {"10m": (600, 10), "1h": (3600, 60), "24h": (86400, 900)}
Range = Literal["10m", "1h", "24h"]

# The page loads nothing but its own files and talks to nothing but this API.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}

router = APIRouter(tags=["operations"])


@router.get(
    "/dashboard",
    operation_id="dashboard",
    response_class=FileResponse,
    responses={
        200: {
            "description": "The dashboard page (no data: it reads the API with a viewer token)",
            "content": {"text/html": {"schema": {"type": "string"}}},
        }
    },
)
async def dashboard() -> FileResponse:
    return FileResponse(STATIC / "dashboard.html", media_type="text/html", headers=PAGE_HEADERS)


@router.get("/favicon.ico", include_in_schema=False, response_class=FileResponse)
async def favicon() -> FileResponse:
    """The dashboard's icon (every browser asks for /favicon.ico): a small SVG."""
    headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "max-age=86400"}
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml", headers=headers)


@router.get("/docs", include_in_schema=False, response_class=FileResponse)
async def api_reference() -> FileResponse:
    """Where the API is described, served from the package: FastAPI's own /docs
    loads Swagger UI from a public CDN, which a site without internet cannot."""
    return FileResponse(STATIC / "docs.html", media_type="text/html", headers=PAGE_HEADERS)


def _queues(ctx: ApiContext) -> tuple[list[QueueState], str | None]:
    try:
        readings = ctx.queue_depth.readings()
    except (pika.exceptions.AMQPError, OSError) as exc:
        log.warning("queue depths: broker unavailable: %s", type(exc).__name__)
        return [], "broker_unavailable"
    return [QueueState.model_validate(r, from_attributes=True) for r in readings], None


def _processes(ctx: ApiContext) -> list[ProcessState] | None:
    """The supervisor's restart counts, as ``/metrics`` reads them; None when
    there is no counts file to read, or it cannot be read."""
    if not ctx.settings.supervisor_counts_file:
        return None
    try:
        counts = read_counts(Path(ctx.settings.supervisor_counts_file))
    except (OSError, ValueError):
        return None
    if counts is None:
        return None
    return [
        ProcessState(component=c, restarts=n, crash_looping=c in counts.crash_looping)
        for c, n in sorted(counts.restarts.items())
    ]


def _summary(ctx: ApiContext, span: Range) -> DashboardSummary:
    now = dt.datetime.now(dt.UTC)
    window_s, bucket_s = RANGES[span]
    with ctx.engine.connect() as conn:
        flow = stats.throughput(conn, now, window_s, bucket_s)
        money = stats.money(conn, flow.since)
        relay = stats.relay_state(conn)
    letters = dl_db.stats(ctx.engine)
    queues, queues_error = _queues(ctx)
    rates = [round(n / flow.bucket_s, 2) for n in flow.lines]
    oldest = relay.oldest_unpublished_at
    body: dict[str, Any] = {
        "generated_at": iso(now),
        "range": span,
        "window_s": window_s,
        # The last bucket is still filling: the one before is the latest full one.
        "rate_now": rates[-2] if len(rates) > 1 else rates[0],
        "outcomes": flow.outcomes,
        "money": [
            KindMoney(kind=kind, posted=shown(kind, posted), disputed=shown(kind, disputed))
            for kind, (posted, disputed) in sorted(money.items())
        ],
        "throughput": Throughput(
            since=iso(flow.since) or "", bucket_s=flow.bucket_s, lines_per_s=rates
        ),
        "dead_letters": [
            DeadLetterCount(reason=r.reason, status=r.status, count=r.count, lines=r.lines or 0)
            for r in letters
        ],
        "queues": queues,
        "queues_error": queues_error,
        "relay": RelayState(
            backlog=relay.backlog,
            lag_s=None if oldest is None else round(max(0.0, (now - oldest).total_seconds()), 1),
        ),
        "processes": _processes(ctx),
    }
    return DashboardSummary.model_validate(body)


@router.get(
    "/v1/dashboard/summary",
    operation_id="dashboardSummary",
    responses={401: {"model": ErrorBody, "description": "unauthenticated"}},
)
async def dashboard_summary(
    ctx: Ctx, _: Viewer, span: Annotated[Range, Query(alias="range")] = "10m"
) -> DashboardSummary:
    """Throughput over the range (10 min, 1 h or 24 h) with "lines/s now" taken from
    it, dead letters by reason, queue depths, and the relay's lag and outbox backlog."""
    return await run_in_threadpool(_summary, ctx, span)


@router.get(
    "/v1/dashboard/role",
    operation_id="dashboardRole",
    responses={401: {"model": ErrorBody, "description": "unauthenticated"}},
)
async def dashboard_role(who: Viewer) -> DashboardRole:
    """The role of the bearer token: whether the page shows an operator's buttons.
    A viewer's page learns it here, without asking an operator endpoint for a 403
    (which a browser logs in its console as an error)."""
    return DashboardRole(role="operator" if who.role == "operator" else "viewer")
