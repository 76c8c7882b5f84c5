"""Trading-partner profiles (docs/api.md#trading-partners): an operator's
``put`` (audited in its transaction), and reads by sender."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from decimal import Decimal, localcontext
from typing import Any

from sqlalchemy import Engine, func, select, update

from shared.adapters.db.dead_letters import audit
from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.disputes.sql import d, disputes_query, to_dispute
from shared.adapters.db.disputes.types import Filter
from shared.adapters.db.edi.tables import edi_interchanges, edi_partners, edi_refusals
from shared.adapters.db.tables import jobs, line_outcomes
from shared.adapters.db.types import EXACT_SUMS, utc
from shared.domain.partners import Acknowledge

p = edi_partners


@dataclass(frozen=True)
class Partner:
    sender_qualifier: str  # ISA05
    sender_id: str  # ISA06, trimmed
    name: str
    contract_version: int
    partition_key: str | None
    period: str | None
    acknowledge: Acknowledge
    updated_at: dt.datetime | None = None


def _partner(row: Any) -> Partner:
    return Partner(
        sender_qualifier=row.sender_qualifier,
        sender_id=row.sender_id,
        name=row.name,
        contract_version=row.contract_version,
        partition_key=row.partition_key,
        period=row.period,
        acknowledge=row.acknowledge,
        updated_at=utc(row.updated_at),
    )


def put(engine: Engine, partner: Partner, actor: str, now: dt.datetime) -> bool:
    """Create or replace a partner's profile; whether it was new."""
    values = {k: v for k, v in asdict(partner).items() if k != "updated_at"}
    values["updated_at"] = now
    key = (p.c.sender_qualifier == partner.sender_qualifier) & (p.c.sender_id == partner.sender_id)
    with engine.begin() as conn:
        # Inserted unless there is one (two first PUTs at once: one inserts,
        # the other replaces), then replaced.
        inserted = insert_ignoring_conflicts(conn, p).values(**values).returning(p.c.sender_id)
        created = conn.execute(inserted).first() is not None
        if not created:
            conn.execute(update(p).where(key).values(**values))
        shown = {k: v for k, v in values.items() if k != "updated_at"}
        audit(
            conn,
            actor,
            "partner.put",
            f"{partner.sender_qualifier}/{partner.sender_id}",
            {**shown, "created": created},
        )
    return created


def get(engine: Engine, qualifier: str, sender_id: str) -> Partner | None:
    query = select(p).where(p.c.sender_qualifier == qualifier, p.c.sender_id == sender_id)
    with engine.connect() as conn:
        row = conn.execute(query).first()
    return None if row is None else _partner(row)


def listing(engine: Engine) -> list[Partner]:
    """Every profile, by name."""
    query = select(p).order_by(p.c.name, p.c.sender_qualifier, p.c.sender_id)
    with engine.connect() as conn:
        return [_partner(row) for row in conn.execute(query)]


@dataclass(frozen=True)
class Refusal:
    """A file refused for its content, as its sender's health keeps it."""

    qualifier: str
    sender_id: str
    key_id: str
    code: str
    codes: tuple[str, ...]
    sets: int
    sets_at_fault: int
    file_sha256: str


def record_refusal(engine: Engine, refusal: Refusal, now: dt.datetime) -> None:
    with engine.begin() as conn:
        conn.execute(
            edi_refusals.insert().values(
                sender_qualifier=refusal.qualifier,
                sender_id=refusal.sender_id,
                key_id=refusal.key_id,
                received_at=now,
                code=refusal.code,
                codes=",".join(sorted(set(refusal.codes))),
                sets=refusal.sets,
                sets_at_fault=refusal.sets_at_fault,
                file_sha256=refusal.file_sha256,
            )
        )


@dataclass(frozen=True)
class FileSeen:
    """One of a partner's files: accepted (its job) or refused (its codes)."""

    received_at: dt.datetime
    job_id: str | None  # None: refused
    sets_accepted: int
    sets_refused: int
    codes: tuple[str, ...]


@dataclass(frozen=True)
class Health:
    files: list[FileSeen]  # the latest, newest first
    accepted_files: int
    refused_files: int
    dead_letters: dict[str, int]  # lines of its jobs waiting, by reason
    open_disputes: int
    open_variance: Decimal  # their claimed - model, summed


def _reason(row: Any) -> str:
    return str(row[0] or "")


def health(engine: Engine, qualifier: str, sender_id: str, limit: int = 20) -> Health:
    """What became of a sender's files: the latest, how many were refused, the
    lines of its jobs waiting in dead letters and its open disputes."""
    ic, rf = edi_interchanges, edi_refusals
    mine = (ic.c.sender_qualifier == qualifier) & (ic.c.sender_id == sender_id)
    its_jobs = select(ic.c.job_id).where(mine)
    refused_by = (rf.c.sender_qualifier == qualifier) & (rf.c.sender_id == sender_id)
    with engine.connect() as conn:
        accepted = conn.execute(
            select(ic.c.job_id, func.min(ic.c.received_at).label("at"), jobs.c.documents)
            .join(jobs, jobs.c.id == ic.c.job_id)
            .where(mine)
            .group_by(ic.c.job_id, jobs.c.documents)
            .order_by(func.min(ic.c.received_at).desc())
            .limit(limit)
        ).all()
        refused = conn.execute(
            select(rf)
            .where(refused_by)
            .order_by(rf.c.received_at.desc(), rf.c.id.desc())
            .limit(limit)
        ).all()
        accepted_files = conn.execute(
            select(func.count(func.distinct(ic.c.job_id))).where(mine)
        ).scalar_one()
        refused_files = conn.execute(select(func.count()).where(refused_by)).scalar_one()
        letters = conn.execute(
            select(line_outcomes.c.reason, func.count())
            .where(line_outcomes.c.job_id.in_(its_jobs), line_outcomes.c.outcome == "dead_lettered")
            .group_by(line_outcomes.c.reason)
        ).all()
        disputes = conn.execute(
            disputes_query(Filter(status="open"), conn.dialect.name).where(d.c.job_id.in_(its_jobs))
        ).all()
    files = [FileSeen(utc(r.at), r.job_id, r.documents, 0, ()) for r in accepted] + [
        # A refused file settles none of its sets, whatever its 997 says of each.
        FileSeen(utc(r.received_at), None, 0, r.sets, tuple(r.codes.split(",")))
        for r in refused
    ]
    files.sort(key=lambda f: f.received_at, reverse=True)
    found = [to_dispute(row) for row in disputes]
    with localcontext(EXACT_SUMS):
        variance = sum((x.variance for x in found), Decimal(0))
    return Health(
        files=files[:limit],
        accepted_files=int(accepted_files),
        refused_files=int(refused_files),
        dead_letters={
            (reason or "unknown"): int(n) for reason, n in sorted(letters, key=lambda r: r[0] or "")
        },
        open_disputes=len(found),
        open_variance=variance,
    )


def refusals_by_partner(engine: Engine) -> dict[str, int]:
    """Files refused, by profiled partner (``Q/ID``); refusals are never
    deleted, so each count only grows (the API's metric is a counter)."""
    rf = edi_refusals
    query = (
        select(rf.c.sender_qualifier, rf.c.sender_id, func.count())
        .join(
            p,
            (p.c.sender_qualifier == rf.c.sender_qualifier) & (p.c.sender_id == rf.c.sender_id),
        )
        .group_by(rf.c.sender_qualifier, rf.c.sender_id)
    )
    with engine.connect() as conn:
        return {f"{q}/{i}": int(n) for q, i, n in conn.execute(query)}
