"""What a job's page reads (docs/api.md#jobs): its timeline and outcomes per
partition, and all its lines as CSV, streamed.

Both take the same token as ``GET /v1/jobs/{job_id}`` (a producer sees only its
own jobs).
"""

from __future__ import annotations

from typing import Literal

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse
from pydantic import BaseModel
from sqlalchemy import Engine

from services.api import csv_export
from services.api.auth import Ctx, Reader
from services.api.jobs import lines_csv as job_csv
from services.api.jobs.routes import ERRORS, _visible_job
from shared.adapters.db.jobs import detail as job_detail
from shared.adapters.db.jobs import queries as jobs_db
from shared.domain.kinds import shown
from shared.wire.times import iso

router = APIRouter(tags=["jobs"])
Outcome = Literal["posted", "disputed", "duplicate", "dead_lettered"]


class ChunkPoint(BaseModel):
    at: str  # when the chunk's outcomes were committed (UTC)
    lines: int  # lines it settled
    lines_done: int  # lines settled so far, this chunk included


class PartitionOutcome(BaseModel):
    partition_key: str
    posted: int
    disputed: int
    dead_lettered: int
    amount_posted: str
    amount_disputed: str


class ReasonLines(BaseModel):
    reason: str  # the dead letters' machine reason (docs/api.md#dead-letters-and-the-audit-log)
    lines: int  # the job's lines waiting in dead letters for it


class JobTimeline(BaseModel):
    job_id: str
    kind: str
    accepted_at: str
    completed_at: str | None  # null while a chunk is still to settle
    lines: int
    chunks_total: int
    chunks: list[ChunkPoint]  # oldest first
    partitions: list[PartitionOutcome]  # duplicates are counted per job only
    dead_letters: list[ReasonLines]  # lines waiting in dead letters, by reason, most first


@router.get("/v1/jobs/{job_id}/timeline", operation_id="getJobTimeline", responses=ERRORS)
async def job_timeline(job_id: str, ctx: Ctx, who: Reader) -> JobTimeline:
    """Accepted, each chunk done (with the running line count), completed; the
    job's posted, disputed and dead-lettered lines and amounts per partition; and
    its lines waiting in dead letters, counted by reason."""

    def load() -> JobTimeline:
        status = _visible_job(ctx, who, job_id)
        points, done = [], 0
        for chunk in job_detail.chunks_done(ctx.engine, job_id):
            done += chunk.lines
            points.append(ChunkPoint(at=iso(chunk.at) or "", lines=chunk.lines, lines_done=done))
        partitions = [
            PartitionOutcome(
                partition_key=p.partition_key,
                posted=p.counts["posted"],
                disputed=p.counts["disputed"],
                dead_lettered=p.counts["dead_lettered"],
                amount_posted=shown(status.kind, p.amounts["posted"]),
                amount_disputed=shown(status.kind, p.amounts["disputed"]),
            )
            for p in job_detail.partitions(ctx.engine, job_id)
        ]
        return JobTimeline(
            job_id=status.job_id,
            kind=status.kind,
            accepted_at=iso(status.created_at) or "",
            completed_at=iso(status.finished_at),
            lines=status.lines,
            chunks_total=status.chunks_total,
            chunks=points,
            partitions=partitions,
            dead_letters=[
                ReasonLines(reason=reason, lines=lines)
                for reason, lines in job_detail.dead_letters_by_reason(ctx.engine, job_id)
            ],
        )

    return await run_in_threadpool(load)


def _completed_on(engine: Engine, job_id: str) -> bool:
    there = jobs_db.job_status(engine, job_id)
    return there is not None and there.state == "completed"


@router.get(
    "/v1/jobs/{job_id}/lines.csv",
    operation_id="exportJobLines",
    response_class=StreamingResponse,
    responses={
        **ERRORS,
        200: {
            "description": "Every line of the job (or of one outcome) as CSV, header row"
            " first, in the order of its lines page.",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        },
    },
)
async def job_lines_csv(
    job_id: str, ctx: Ctx, who: Reader, outcome: Outcome | None = None
) -> StreamingResponse:
    # A completed job's lines from the replica once it shows the job completed
    # (its every chunk's marker, committed with the chunk's rows); a requeued
    # dead letter's row may then lag, as history does.
    engine = await ctx.settled_reader(lambda replica: _completed_on(replica, job_id), job_id)
    status = await run_in_threadpool(_visible_job, ctx, who, job_id, engine)
    source = job_csv.chunks(engine, job_id, status.kind, outcome)
    suffix = f"-{outcome}" if outcome else ""
    return await csv_export.response(source, f"job-{job_id}{suffix}.csv")
