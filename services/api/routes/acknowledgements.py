"""``GET /v1/jobs/{job_id}/acknowledgement``: an X12 job's 997 (docs/api.md#edi-intake).

Read as the job is (a viewer or operator token, or the producer's signed GET
of its own job), and answered as the partner's translator takes it:
``application/edi-x12``, the bytes stored when the job was accepted.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from services.api.auth import Ctx, Principal, Reader
from services.api.context import ApiContext
from services.api.errors import ApiError, ErrorBody
from services.api.intake.ingest import EDI_X12
from services.api.jobs.routes import _visible_job
from shared.adapters.db.edi import store as edi_db

router = APIRouter(tags=["jobs"])


def _acknowledgement(ctx: ApiContext, who: Principal, job_id: str) -> bytes:
    job = _visible_job(ctx, who, job_id)
    body = edi_db.acknowledgement(ctx.engine, job_id)
    if body is None:
        why = (
            "its partner's profile asks for no 997 of an accepted file (acknowledge:"
            " errors_only or never)"
            if job.source_format == "x12"
            else "this job was not an X12 file: it has no 997"
        )
        raise ApiError(404, "no_acknowledgement", why)
    return body


@router.get(
    "/v1/jobs/{job_id}/acknowledgement",
    operation_id="getJobAcknowledgement",
    response_class=Response,
    responses={
        200: {
            "description": "the 997 functional acknowledgement of the job's X12 file",
            "content": {EDI_X12: {"schema": {"type": "string"}}},
        },
        401: {"model": ErrorBody, "description": "unauthenticated"},
        404: {
            "model": ErrorBody,
            "description": "no such job (job_not_found), or a JSON job (no_acknowledgement)",
        },
    },
)
async def job_acknowledgement(job_id: str, ctx: Ctx, who: Reader) -> Response:
    body = await run_in_threadpool(_acknowledgement, ctx, who, job_id)
    return Response(body, media_type=EDI_X12)
