"""Jobs at the front door: a submission stored with its chunks, accepted once
every chunk is enqueued, withdrawn when one could not be; an idempotent
resubmission finds the job it repeats."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.exc import IntegrityError

from shared.adapters.db.edi import store as edi
from shared.adapters.db.tables import chunks, job_partitions, jobs
from shared.domain.pipeline.chunking import NewChunk


@dataclass(frozen=True)
class NewJob:
    id: str
    key_id: str
    idempotency_key: str
    body_sha256: str
    kind: str
    documents: int
    lines: int
    partition_keys: Sequence[str]
    chunks: Sequence[NewChunk]
    source_format: str = "json"  # json, ndjson or x12
    edi: edi.EdiRecord | None = None  # an X12 job's interchanges and 997


@dataclass(frozen=True)
class ExistingJob:
    id: str
    kind: str
    body_sha256: str
    state: str
    documents: int
    lines: int
    chunks_total: int


_EXISTING = (
    jobs.c.id,
    jobs.c.kind,
    jobs.c.body_sha256,
    jobs.c.state,
    jobs.c.documents,
    jobs.c.lines,
    jobs.c.chunks_total,
)


def find_job(engine: Engine, key_id: str, idempotency_key: str) -> ExistingJob | None:
    with engine.connect() as conn:
        row = conn.execute(
            select(*_EXISTING).where(
                jobs.c.key_id == key_id, jobs.c.idempotency_key == idempotency_key
            )
        ).first()
    return None if row is None else ExistingJob(**row._mapping)


def job_by_id(engine: Engine, job_id: str) -> ExistingJob | None:
    with engine.connect() as conn:
        row = conn.execute(select(*_EXISTING).where(jobs.c.id == job_id)).first()
    return None if row is None else ExistingJob(**row._mapping)


class JobIdentity(Protocol):
    """What names a new job before its totals: a ``NewJob``, or the head of
    one written while its chunks are built (``job_writer.JobHead``)."""

    @property
    def id(self) -> str: ...
    @property
    def key_id(self) -> str: ...
    @property
    def idempotency_key(self) -> str: ...
    @property
    def body_sha256(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def source_format(self) -> str: ...


def job_row(
    job: JobIdentity, now: dt.datetime, *, documents: int, lines: int, chunks_total: int
) -> dict[str, object]:
    """The jobs row of a new job, ``receiving``."""
    return {
        "id": job.id,
        "key_id": job.key_id,
        "idempotency_key": job.idempotency_key,
        "body_sha256": job.body_sha256,
        "kind": job.kind,
        "state": "receiving",
        "documents": documents,
        "lines": lines,
        "chunks_total": chunks_total,
        "created_at": now,
        "source_format": job.source_format,
    }


def chunk_row(job_id: str, kind: str, chunk: NewChunk, now: dt.datetime) -> dict[str, object]:
    """A chunks row; ``jobs/writer.py`` writes them one at a time."""
    return {
        "id": chunk.id,
        "job_id": job_id,
        "seq": chunk.seq,
        "kind": kind,
        "documents": chunk.documents,
        "lines": chunk.lines,
        "payload": chunk.payload,
        "payload_sha256": chunk.payload_sha256,
        "created_at": now,
    }


def partition_rows(job_id: str, partition_keys: Iterable[str]) -> list[dict[str, object]]:
    return [{"job_id": job_id, "partition_key": p} for p in sorted(set(partition_keys))]


def create_job(engine: Engine, job: NewJob) -> bool:
    """Store the job in state ``receiving`` with its chunks (and an X12 job's
    interchanges and 997); False on a race: its idempotency key or one of its
    interchanges was stored first by another request."""
    now = dt.datetime.now(dt.UTC)
    try:
        with engine.begin() as conn:
            row = job_row(
                job, now, documents=job.documents, lines=job.lines, chunks_total=len(job.chunks)
            )
            conn.execute(jobs.insert().values(**row))
            conn.execute(job_partitions.insert(), partition_rows(job.id, job.partition_keys))
            conn.execute(chunks.insert(), [chunk_row(job.id, job.kind, c, now) for c in job.chunks])
            if job.edi is not None:
                edi.insert_edi(conn, job.id, job.key_id, job.edi, now)
    except IntegrityError:
        return False
    return True


def mark_accepted(engine: Engine, job_id: str) -> None:
    with engine.begin() as conn:
        conn.execute(update(jobs).where(jobs.c.id == job_id).values(state="accepted"))


def discard_unaccepted(engine: Engine, job_id: str) -> None:
    """Undo a submission whose chunks could not all be enqueued (503, not 202).

    Workers refuse chunks of a ``receiving`` job, so nothing of it has settled.
    """
    with engine.begin() as conn:
        if (
            conn.execute(
                select(jobs.c.id).where(jobs.c.id == job_id, jobs.c.state == "receiving")
            ).first()
            is None
        ):
            return
        conn.execute(delete(chunks).where(chunks.c.job_id == job_id))
        edi.delete_edi(conn, job_id)
        conn.execute(delete(job_partitions).where(job_partitions.c.job_id == job_id))
        conn.execute(delete(jobs).where(jobs.c.id == job_id))


def stored_chunks(engine: Engine, job_id: str) -> list[tuple[str, str]]:
    """(chunk id, payload SHA-256) of a job's chunks, in order."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(chunks.c.id, chunks.c.payload_sha256)
            .where(chunks.c.job_id == job_id)
            .order_by(chunks.c.seq)
        ).all()
    return [(r.id, r.payload_sha256) for r in rows]
