"""One job as its page shows it (docs/api.md#jobs): when each chunk settled, its
outcomes per partition, and its lines waiting in dead letters by reason.

Both are reads of one job through ``job_id`` indexes (``chunk_results``,
``ledger_entries``, ``dead_letters``): a page costs the size of the job, never
a scan of the ledger.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal

from sqlalchemy import Engine, func, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.tables import chunk_results, dead_letters, ledger_entries
from shared.adapters.db.types import utc


@dataclass(frozen=True)
class ChunkDone:
    at: dt.datetime
    lines: int  # lines that reached an outcome in this chunk (a requeue's row too)


@dataclass
class PartitionOutcomes:
    partition_key: str
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("posted", "disputed", "dead_lettered"), 0)
    )
    amounts: dict[str, Decimal] = field(
        default_factory=lambda: {"posted": Decimal(0), "disputed": Decimal(0)}
    )


def chunks_done(engine: Engine, job_id: str) -> list[ChunkDone]:
    """Each settled chunk of the job (and each requeue's result), oldest first."""
    c = chunk_results.c
    lines = c.posted + c.disputed + c.duplicate + c.dead_lettered
    with engine.connect() as conn:
        rows = conn.execute(
            select(c.created_at, lines.label("lines"))
            .where(c.job_id == job_id)
            .order_by(c.created_at, c.chunk_id)
        ).all()
    return [ChunkDone(utc(r.created_at), int(r.lines or 0)) for r in rows]


def partitions(engine: Engine, job_id: str) -> list[PartitionOutcomes]:
    """Posted and disputed lines (and their amounts) and dead-lettered lines, per
    partition. Duplicates are not kept per partition: they are in the job's totals."""
    found: dict[str, PartitionOutcomes] = {}
    le = ledger_entries.c
    dl = dead_letters.c
    with engine.connect() as conn:
        ledger = conn.execute(
            select(
                le.partition_key,
                le.outcome,
                func.count(),
                func.sum(le.amount),
                func.sum(le.claimed_amount),
            )
            .where(le.job_id == job_id, outcome_in(le.outcome, "posted", "disputed"))
            .group_by(le.partition_key, le.outcome)
        ).all()
        dead = conn.execute(
            select(dl.partition_key, func.sum(dl.lines))
            .where(dl.job_id == job_id, dl.status == "dead")
            .group_by(dl.partition_key)
        ).all()
    for key, outcome, count, amount, claimed in ledger:
        entry = found.setdefault(key, PartitionOutcomes(key))
        entry.counts[outcome] = int(count)
        # As the job's amounts: posted at the model's amount, disputed at the claim.
        entry.amounts[outcome] = Decimal((amount if outcome == "posted" else claimed) or 0)
    for key, lines in dead:
        found.setdefault(key, PartitionOutcomes(key)).counts["dead_lettered"] = int(lines or 0)
    return [found[key] for key in sorted(found)]


def dead_letters_by_reason(engine: Engine, job_id: str) -> list[tuple[str, int]]:
    """The job's lines waiting in dead letters (status ``dead``), per reason: most
    lines first, then by reason. Counted here, whatever their number."""
    dl = dead_letters.c
    lines = func.sum(dl.lines)
    with engine.connect() as conn:
        rows = conn.execute(
            select(dl.reason, lines)
            .where(dl.job_id == job_id, dl.status == "dead")
            .group_by(dl.reason)
            .order_by(lines.desc(), dl.reason)
        ).all()
    return [(reason, int(count or 0)) for reason, count in rows]
