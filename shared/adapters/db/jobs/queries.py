"""Jobs for readers: a job's status and the job listing.

A job's progress is never a hot row: each processed chunk writes its own
``chunk_results`` row, and a job's counters are those rows summed when read.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal, localcontext

from sqlalchemy import Connection, Engine, func, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.tables import (
    chunk_results,
    job_partitions,
    jobs,
    ledger_entries,
    line_outcomes,
)
from shared.adapters.db.types import EXACT_SUMS
from shared.domain.money import ZERO


@dataclass
class JobStatus:
    job_id: str
    key_id: str
    kind: str
    stored_state: str
    created_at: dt.datetime
    documents: int
    lines: int
    chunks_total: int
    source_format: str = "json"  # json, ndjson or x12: what the producer sent
    chunks_done: int = 0
    finished_at: dt.datetime | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    amounts: dict[str, Decimal] = field(default_factory=dict)
    # Of the duplicates, those whose claim differs from their ledger row's.
    claim_differs: int = 0

    @property
    def state(self) -> str:
        if self.chunks_done >= self.chunks_total:
            return "completed"
        return "processing" if self.chunks_done else "accepted"


_OUTCOMES = ("posted", "disputed", "duplicate", "dead_lettered")


def job_status(engine: Engine, job_id: str) -> JobStatus | None:
    with engine.connect() as conn:
        job = conn.execute(
            select(jobs).where(jobs.c.id == job_id, jobs.c.state == "accepted")
        ).first()
        if job is None:
            return None
        results = conn.execute(
            select(
                chunk_results.c.posted,
                chunk_results.c.disputed,
                chunk_results.c.duplicate,
                chunk_results.c.dead_lettered,
                chunk_results.c.amount_posted,
                chunk_results.c.amount_disputed,
                chunk_results.c.created_at,
                chunk_results.c.source,
                chunk_results.c.claim_differs,
            ).where(chunk_results.c.job_id == job_id)
        ).all()
        # In the same connection: no second checkout per job a listing shows.
        disputed_model = _disputed_model(conn, job_id) if any(r.disputed for r in results) else ZERO
    # Requeues move counters but are not chunks: progress counts chunks only.
    chunk_rows = [r for r in results if r.source == "chunk"]
    with localcontext(EXACT_SUMS):  # exact however large the job's totals
        amounts = {
            "posted": sum((r.amount_posted for r in results), ZERO),
            "disputed": sum((r.amount_disputed for r in results), ZERO),
        }
    amounts["disputed_model"] = disputed_model
    status = JobStatus(
        job_id=job.id,
        key_id=job.key_id,
        kind=job.kind,
        stored_state=job.state,
        created_at=job.created_at,
        documents=job.documents,
        lines=job.lines,
        chunks_total=job.chunks_total,
        source_format=job.source_format,
        chunks_done=len(chunk_rows),
        outcomes={name: sum(getattr(r, name) for r in results) for name in _OUTCOMES},
        claim_differs=sum(r.claim_differs for r in results),
        # Summed in Python: exact on every backend (SQLite keeps money as text).
        amounts=amounts,
    )
    if status.state == "completed" and chunk_rows:
        status.finished_at = max(r.created_at for r in chunk_rows)
    return status


def _disputed_model(conn: Connection, job_id: str) -> Decimal:
    """The modelled amount of the job's disputed lines: what balances book for
    them (a chunk's result keeps only their claim). Read through the job's
    ``(job_id, outcome, …)`` index: it costs the job's disputed rows. SQLite's
    SUM would make a float of its text, so there the rows are added here."""
    le = ledger_entries.c
    where = (le.job_id == job_id, outcome_in(le.outcome, "disputed"))
    if conn.dialect.name == "postgresql":
        total = conn.execute(select(func.sum(le.amount)).where(*where)).scalar()
        return Decimal(total or 0)
    amounts = conn.execute(select(le.amount).where(*where)).scalars()
    with localcontext(EXACT_SUMS):
        return sum((Decimal(a) for a in amounts), ZERO)


def list_jobs(
    engine: Engine,
    *,
    state: str | None,
    partition_key: str | None,
    key_id: str | None,
    limit: int,
    before: tuple[dt.datetime, str] | None,
) -> list[tuple[str, dt.datetime]]:
    """Job ids newest first, filtered; the cursor is (created_at, id) of the last seen."""
    done = (
        select(func.count())
        .select_from(chunk_results)
        .where(chunk_results.c.job_id == jobs.c.id, chunk_results.c.source == "chunk")
        .scalar_subquery()
    )
    query = select(jobs.c.id, jobs.c.created_at).where(jobs.c.state == "accepted")
    if key_id is not None:
        query = query.where(jobs.c.key_id == key_id)
    if partition_key is not None:
        query = query.where(
            jobs.c.id.in_(
                select(job_partitions.c.job_id).where(
                    job_partitions.c.partition_key == partition_key
                )
            )
        )
    if state == "completed":
        query = query.where(done >= jobs.c.chunks_total)
    elif state == "processing":
        query = query.where(done > 0, done < jobs.c.chunks_total)
    elif state == "accepted":
        query = query.where(done == 0)
    if before is not None:
        created, job_id = before
        query = query.where(
            (jobs.c.created_at < created) | ((jobs.c.created_at == created) & (jobs.c.id < job_id))
        )
    query = query.order_by(jobs.c.created_at.desc(), jobs.c.id.desc()).limit(limit)
    with engine.connect() as conn:
        return [(r.id, r.created_at) for r in conn.execute(query).all()]


def dead_letter_reasons(engine: Engine, job_id: str) -> dict[str, int]:
    """A job's lines waiting in dead letters, counted by reason."""
    query = (
        select(line_outcomes.c.reason, func.count())
        .where(line_outcomes.c.job_id == job_id, line_outcomes.c.outcome == "dead_lettered")
        .group_by(line_outcomes.c.reason)
        .order_by(line_outcomes.c.reason)
    )
    with engine.connect() as conn:
        return {reason or "unknown": int(n) for reason, n in conn.execute(query)}
