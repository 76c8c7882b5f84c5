"""Job status for dashboards (viewer token) and producers (signed GET, own jobs)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool
from sqlalchemy import Engine

from services.api.auth import Ctx, Principal, Reader
from services.api.context import ApiContext
from services.api.errors import ApiError, ErrorBody
from services.api.jobs.line_items import line_fields
from services.api.pagination import (
    CursorQuery,
    encode_job_cursor,
    encode_line_cursor,
    job_cursor,
    line_cursor,
)
from services.api.schemas import JobPage, LineOutcome, LinePage
from shared.adapters.db.jobs import queries as jobs_db
from shared.adapters.db.jobs.lines import list_lines
from shared.wire.jobs import Job, job_view

router = APIRouter(tags=["jobs"])
ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "unauthenticated"},
    404: {"model": ErrorBody, "description": "no such job"},
}


def _visible_job(
    ctx: ApiContext, who: Principal, job_id: str, engine: Engine | None = None
) -> jobs_db.JobStatus:
    """``engine``: where to read it (a replica's, once it shows the job completed)."""
    status = jobs_db.job_status(engine or ctx.engine, job_id)
    # A producer sees only its own jobs; another's is indistinguishable from none.
    if status is None or (who.role == "producer" and status.key_id != who.key_id):
        raise ApiError(404, "job_not_found", "no such job")
    return status


@router.get("/v1/jobs/{job_id}", operation_id="getJob", responses=ERRORS)
async def get_job(job_id: str, ctx: Ctx, who: Reader) -> Job:
    return job_view(await run_in_threadpool(_visible_job, ctx, who, job_id))


@router.get("/v1/jobs", operation_id="listJobs", responses=ERRORS)
async def list_jobs(
    ctx: Ctx,
    who: Reader,
    state: Literal["accepted", "processing", "completed"] | None = None,
    partition_key: Annotated[str | None, Query(max_length=128)] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    cursor: CursorQuery = None,
) -> JobPage:
    before = job_cursor(cursor)

    def load() -> JobPage:
        rows = jobs_db.list_jobs(
            ctx.engine,
            state=state,
            partition_key=partition_key,
            key_id=who.key_id,
            limit=limit,
            before=before,
        )
        items = [s for s in (jobs_db.job_status(ctx.engine, job_id) for job_id, _ in rows) if s]
        next_cursor = None
        if len(rows) == limit:
            last_id, last_created = rows[-1]
            next_cursor = encode_job_cursor(last_created, last_id)
        return JobPage(items=[job_view(s) for s in items], next_cursor=next_cursor)

    return await run_in_threadpool(load)


@router.get("/v1/jobs/{job_id}/lines", operation_id="listJobLines", responses=ERRORS)
async def job_lines(
    job_id: str,
    ctx: Ctx,
    who: Reader,
    outcome: Literal["posted", "disputed", "duplicate", "dead_lettered"] | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    cursor: CursorQuery = None,
) -> LinePage:
    """The job's lines, one item per line, in batch order: by document as the
    batch had them, then by line, whatever their outcome (`outcome` keeps the
    order). Lines settled before that order was recorded come last."""
    after = line_cursor(cursor)

    def load() -> LinePage:
        status = _visible_job(ctx, who, job_id)
        rows = list_lines(ctx.engine, job_id, outcome=outcome, after=after, limit=limit)
        items = [LineOutcome(**fields) for fields in line_fields(ctx.engine, rows, status.kind)]
        last = rows[-1] if len(rows) == limit else None
        next_cursor = encode_line_cursor(*last.cursor) if last else None
        return LinePage(items=items, next_cursor=next_cursor)

    return await run_in_threadpool(load)
