"""The FastAPI app factory: one place wires the API."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import Depends, FastAPI
from fastapi.concurrency import run_in_threadpool
from fastapi.staticfiles import StaticFiles

from services.api.context import ApiContext
from services.api.dead_letters import routes as dead_letters
from services.api.disputes import routes as disputes
from services.api.errors import install_handlers
from services.api.feed import routes as feed
from services.api.intake.body_guard import GuardBodies
from services.api.intake.publishers import Publishers
from services.api.jobs import page as job_page
from services.api.jobs import routes as jobs
from services.api.metrics import ApiMetrics, RequestMetrics
from services.api.middleware import RefuseControlCharacters
from services.api.openapi.doc import finish
from services.api.periods import routes as periods
from services.api.previews import contracts as contract_previews
from services.api.query_guard import refuse_unknown_query
from services.api.queue_stats import QueueStats
from services.api.remittances import decisions as deduction_decisions
from services.api.remittances import reads as remittance_reads
from services.api.remittances import routes as remittances
from services.api.routes import (
    acknowledgements,
    batches,
    contracts,
    dashboard,
    history,
    kinds,
    ops,
    partners,
    producer_keys,
)
from services.api.webhooks import routes as webhooks
from shared.adapters.db.engine import make_engine
from shared.adapters.db.periods import dated
from shared.adapters.rabbitmq.broker import close_broker, make_broker
from shared.adapters.rabbitmq.publisher import EventPublisher
from shared.config.settings import Settings


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings.database_url, pool_size=10, component="settleq-api")
        replica = (
            None
            if settings.read_database_url is None
            else make_engine(settings.read_database_url, component="settleq-api-read")
        )
        broker = make_broker(settings)
        publishers = Publishers(broker, threads=4)
        cutter = await run_in_threadpool(
            dated.start,
            engine,
            settings.calendar(),
            settings.period_tz,
            settings.close_wait_s,
        )
        app.state.ctx = ApiContext(
            settings=settings,
            engine=engine,
            broker=broker,
            queue_depth=QueueStats(settings, engine),
            publishers=publishers,
            events=EventPublisher(broker, engine, settings.queue_prefix, settings.event_batch_max),
            replica=replica,
        )
        try:
            yield
        finally:
            cutter.close()
            publishers.shutdown()
            close_broker(broker)
            engine.dispose()
            if replica is not None:
                replica.dispose()

    app = FastAPI(
        title="settleq",
        version="1.0.0",
        summary="Exactly-once settlement pipeline for financial batch data",
        lifespan=lifespan,
        dependencies=[Depends(refuse_unknown_query)],
        # Swagger UI and ReDoc would load from a public CDN: /docs is our own
        # page instead (routes/dashboard.py), linking /openapi.json.
        docs_url=None,
        redoc_url=None,
    )
    install_handlers(app)
    # Outside the routes: FastAPI parses a body before it runs the auth dependency.
    app.add_middleware(GuardBodies, settings=settings)
    # Added after, so it runs first: a bad URL is 422 whoever sends it.
    app.add_middleware(RefuseControlCharacters)
    app.state.metrics = ApiMetrics(
        lambda: getattr(app.state, "ctx", None), settings.supervisor_counts_file
    )
    # Added last, so outermost: it also times what the middleware above refuses.
    app.add_middleware(RequestMetrics, metrics=app.state.metrics)
    for module in (
        batches,
        jobs,
        job_page,
        acknowledgements,
        contracts,
        contract_previews,
        dead_letters,
        disputes,
        history,
        feed,
        kinds,
        ops,
        dashboard,
        partners,
        periods,
        producer_keys,
        remittances,
        remittance_reads,
        deduction_decisions,
        webhooks,
    ):
        app.include_router(module.router)
    app.mount("/dashboard/assets", StaticFiles(directory=dashboard.STATIC), name="dashboard-assets")

    default_openapi = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            # The batch's schema of the kinds registered now, not at import.
            body, components = batches.request_body()
            schema = default_openapi()
            schema["paths"]["/v1/batches"]["post"]["requestBody"] = body
            body, more = remittances.request_body()
            schema["paths"]["/v1/remittances"]["post"]["requestBody"] = body
            finish(schema, {**components, **more})
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
    return app
