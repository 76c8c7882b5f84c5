"""A job on the wire (docs/api.md#jobs): what ``GET /v1/jobs/{job_id}`` answers
and a ``job.completed`` event's data holds. Amounts are strings."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Literal, Protocol

from pydantic import BaseModel

from shared.domain.kinds import shown
from shared.wire.times import iso


class JobRow(Protocol):
    """What ``job_view`` reads of a job, as the database's readers hold it
    (``shared.adapters.db.jobs.queries.JobStatus``): a protocol, so that the
    wire depends on no adapter."""

    @property
    def job_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def source_format(self) -> str: ...
    @property
    def state(self) -> str: ...
    @property
    def created_at(self) -> dt.datetime: ...
    @property
    def finished_at(self) -> dt.datetime | None: ...
    @property
    def documents(self) -> int: ...
    @property
    def lines(self) -> int: ...
    @property
    def chunks_total(self) -> int: ...
    @property
    def chunks_done(self) -> int: ...
    @property
    def outcomes(self) -> Mapping[str, int]: ...
    @property
    def claim_differs(self) -> int: ...
    @property
    def amounts(self) -> Mapping[str, Decimal]: ...


class ChunkProgress(BaseModel):
    total: int
    done: int


class Outcomes(BaseModel):
    posted: int
    disputed: int
    duplicate: int
    dead_lettered: int


class Amounts(BaseModel):
    posted: str  # the model's amounts of the posted lines
    disputed: str  # the claims of the disputed lines
    # The model's amounts of the disputed lines: what balances book for them.
    disputed_model: str


class Job(BaseModel):
    job_id: str
    kind: str
    # What the producer sent; an x12 job has a 997 at /v1/jobs/{job_id}/acknowledgement.
    source_format: Literal["json", "ndjson", "x12"]
    state: Literal["accepted", "processing", "completed"]
    created_at: str
    finished_at: str | None
    documents: int
    lines: int
    chunks: ChunkProgress
    outcomes: Outcomes
    # Of outcomes.duplicate, the lines sent again with a claim that differs from
    # their ledger row's (reason claimed_amount_differs, docs/api.md#jobs).
    duplicates_claim_differs: int = 0
    amounts: Amounts
    progress: float


def job_view(status: JobRow) -> Job:
    """A job as ``GET /v1/jobs/{job_id}`` shows it (and ``job.completed`` tells it)."""
    finished = sum(status.outcomes.values())
    return Job.model_validate(
        {
            "job_id": status.job_id,
            "kind": status.kind,
            "source_format": status.source_format,
            "state": status.state,
            "created_at": iso(status.created_at),
            "finished_at": iso(status.finished_at),
            "documents": status.documents,
            "lines": status.lines,
            "chunks": {"total": status.chunks_total, "done": status.chunks_done},
            "outcomes": status.outcomes,
            "duplicates_claim_differs": status.claim_differs,
            "amounts": {k: shown(status.kind, v) for k, v in status.amounts.items()},
            "progress": round(finished / status.lines, 4) if status.lines else 1,
        }
    )
