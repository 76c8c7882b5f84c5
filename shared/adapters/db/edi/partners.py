"""Trading-partner profiles (docs/api.md#trading-partners): an operator's
``put`` (audited in its transaction), and reads by sender."""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass
from decimal import Decimal, localcontext
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    Engine,
    and_,
    delete,
    exists,
    func,
    or_,
    select,
    update,
)

from shared.adapters.db.dialect import insert_ignoring_conflicts
from shared.adapters.db.disputes.sql import d, disputes_query, to_dispute
from shared.adapters.db.disputes.types import Filter
from shared.adapters.db.edi.tables import (
    edi_interchanges,
    edi_partner_keys,
    edi_partners,
    edi_refusals,
)
from shared.adapters.db.operators import audit
from shared.adapters.db.tables import jobs, line_outcomes
from shared.adapters.db.types import EXACT_SUMS, utc
from shared.domain.partners import Acknowledge

p = edi_partners
pk = edi_partner_keys


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
    # The producer keys that alone may send its files; empty: any key may.
    key_ids: tuple[str, ...] = ()
    # Its remittances (docs/api.md#remittances-and-deductions): the partition its
    # payer maps to, its tolerance {"absolute", "percent"} as money strings, its
    # own reason codes {code: class}, the days a deduction may be disputed in.
    payer_partition_key: str | None = None
    tolerance: dict[str, str] | None = None
    deduction_reasons: dict[str, str] | None = None
    dispute_window_days: int | None = None


def _partner(row: Any, key_ids: tuple[str, ...]) -> Partner:
    return Partner(
        sender_qualifier=row.sender_qualifier,
        sender_id=row.sender_id,
        name=row.name,
        contract_version=row.contract_version,
        partition_key=row.partition_key,
        period=row.period,
        acknowledge=row.acknowledge,
        updated_at=utc(row.updated_at),
        key_ids=key_ids,
        payer_partition_key=row.payer_partition_key,
        tolerance=row.tolerance,
        deduction_reasons=row.deduction_reasons,
        dispute_window_days=row.dispute_window_days,
    )


def put(engine: Engine, partner: Partner, actor: str, now: dt.datetime) -> bool:
    """Create or replace a partner's profile (its key_ids with it); whether it was new."""
    values = {k: v for k, v in asdict(partner).items() if k not in ("updated_at", "key_ids")}
    values["updated_at"] = now
    key = (p.c.sender_qualifier == partner.sender_qualifier) & (p.c.sender_id == partner.sender_id)
    keys = (pk.c.sender_qualifier == partner.sender_qualifier) & (
        pk.c.sender_id == partner.sender_id
    )
    with engine.begin() as conn:
        # Inserted unless there is one (two first PUTs at once: one inserts,
        # the other replaces), then replaced.
        inserted = insert_ignoring_conflicts(conn, p).values(**values).returning(p.c.sender_id)
        created = conn.execute(inserted).first() is not None
        if not created:
            conn.execute(update(p).where(key).values(**values))
        conn.execute(delete(pk).where(keys))
        if partner.key_ids:
            conn.execute(
                pk.insert(),
                [
                    {
                        "sender_qualifier": partner.sender_qualifier,
                        "sender_id": partner.sender_id,
                        "key_id": k,
                    }
                    for k in sorted(set(partner.key_ids))
                ],
            )
        shown: dict[str, Any] = {k: v for k, v in values.items() if k != "updated_at"}
        if partner.key_ids:
            shown["key_ids"] = sorted(set(partner.key_ids))
        audit.record(
            conn,
            actor,
            "partner.put",
            f"{partner.sender_qualifier}/{partner.sender_id}",
            {**shown, "created": created},
        )
    return created


def _key_ids(conn: Connection, where: Any = None) -> dict[tuple[str, str], tuple[str, ...]]:
    query = select(pk.c.sender_qualifier, pk.c.sender_id, pk.c.key_id).order_by(pk.c.key_id)
    if where is not None:
        query = query.where(where)
    found: dict[tuple[str, str], tuple[str, ...]] = {}
    for q, i, k in conn.execute(query):
        found[q, i] = (*found.get((q, i), ()), k)
    return found


def get(engine: Engine, qualifier: str, sender_id: str) -> Partner | None:
    query = select(p).where(p.c.sender_qualifier == qualifier, p.c.sender_id == sender_id)
    with engine.connect() as conn:
        row = conn.execute(query).first()
        if row is None:
            return None
        keys = _key_ids(conn, (pk.c.sender_qualifier == qualifier) & (pk.c.sender_id == sender_id))
    return _partner(row, keys.get((qualifier, sender_id), ()))


def payer_profile(
    engine: Engine, payer: str, qualifier: str | None, sender: tuple[str, str] | None
) -> Partner | None:
    """The profile a remittance's payer is known by: the one named by the payer's
    id (with the interchange's qualifier first, then any), else the
    interchange sender's (``sender``); only a profile that maps a payer to a
    partition (``payer_partition_key``) counts."""
    mapped = p.c.payer_partition_key.is_not(None)
    tried: list[ColumnElement[bool]] = []
    if qualifier is not None:
        tried.append((p.c.sender_qualifier == qualifier) & (p.c.sender_id == payer))
    tried.append(p.c.sender_id == payer)
    if sender is not None:
        tried.append((p.c.sender_qualifier == sender[0]) & (p.c.sender_id == sender[1]))
    with engine.connect() as conn:
        for where in tried:
            query = select(p).where(where, mapped).order_by(p.c.sender_qualifier).limit(1)
            row = conn.execute(query).first()
            if row is not None:
                return _partner(row, ())
    return None


def of_payer_partition(engine: Engine, partition_key: str) -> Partner | None:
    """The profile whose payer maps to ``partition_key`` (a JSON remittance's), if any."""
    query = (
        select(p)
        .where(p.c.payer_partition_key == partition_key)
        .order_by(p.c.sender_qualifier, p.c.sender_id)
        .limit(1)
    )
    with engine.connect() as conn:
        row = conn.execute(query).first()
    return None if row is None else _partner(row, ())


@dataclass(frozen=True)
class Summary:
    """A partner's profile, its last file and its files accepted and refused
    (the refused counted as ``health`` counts them)."""

    partner: Partner
    last_file_at: dt.datetime | None
    accepted_files: int
    refused_files: int


def summaries(engine: Engine) -> list[Summary]:
    """Every profile, by name, with its files: two queries whatever the count of
    partners (each figure a correlated subquery of the one read of profiles)."""
    ic, rf = edi_interchanges, edi_refusals
    of_partner = (ic.c.sender_qualifier == p.c.sender_qualifier) & (ic.c.sender_id == p.c.sender_id)
    refused_of = (
        (rf.c.sender_qualifier == p.c.sender_qualifier)
        & (rf.c.sender_id == p.c.sender_id)
        & _counted(rf)
    )
    query = select(
        p,
        select(func.count(func.distinct(ic.c.job_id)))
        .where(of_partner)
        .scalar_subquery()
        .label("accepted_files"),
        select(func.max(ic.c.received_at)).where(of_partner).scalar_subquery().label("accepted_at"),
        select(func.count()).select_from(rf).where(refused_of).scalar_subquery().label("refused"),
        select(func.max(rf.c.received_at)).where(refused_of).scalar_subquery().label("refused_at"),
    ).order_by(p.c.name, p.c.sender_qualifier, p.c.sender_id)
    with engine.connect() as conn:
        rows = conn.execute(query).all()
        keys = _key_ids(conn)
    found = []
    for row in rows:
        times = [utc(t) for t in (row.accepted_at, row.refused_at) if t is not None]
        found.append(
            Summary(
                _partner(row, keys.get((row.sender_qualifier, row.sender_id), ())),
                max(times) if times else None,
                int(row.accepted_files),
                int(row.refused),
            )
        )
    return found


@dataclass(frozen=True)
class Refusal:
    """A file refused for its content, as one of its senders' health keeps it."""

    qualifier: str
    sender_id: str
    key_id: str
    code: str
    codes: tuple[str, ...]
    sets: int  # that sender's sets in the file
    sets_at_fault: int  # of them, those its 997 does not accept
    file_sha256: str
    message: str | None = None  # the 422's
    acknowledgement: bytes | None = None  # the 997 it carried, if any


def record_refusals(engine: Engine, refusals: list[Refusal], now: dt.datetime) -> None:
    with engine.begin() as conn:
        conn.execute(
            edi_refusals.insert(),
            [
                {
                    "sender_qualifier": r.qualifier,
                    "sender_id": r.sender_id,
                    "key_id": r.key_id,
                    "received_at": now,
                    "code": r.code,
                    "codes": ",".join(sorted(set(r.codes))),
                    "sets": r.sets,
                    "sets_at_fault": r.sets_at_fault,
                    "file_sha256": r.file_sha256,
                    "message": r.message,
                    "acknowledgement": r.acknowledgement,
                }
                for r in refusals
            ],
        )


def _counted(rf: Any) -> ColumnElement[bool]:
    """Whether a kept refusal counts against its sender's partner: it came from
    a producer key that may send the partner's files. With ``key_ids``, a key
    named there; without, a key that has had a file of that sender accepted
    (another key's garbage under a sender's name is not the partner's doing;
    to count a new partner's refusals before its first accepted file, name its
    keys)."""
    named = (pk.c.sender_qualifier == rf.c.sender_qualifier) & (pk.c.sender_id == rf.c.sender_id)
    ic = edi_interchanges
    accepted_from_key = exists().where(
        ic.c.key_id == rf.c.key_id,
        ic.c.sender_qualifier == rf.c.sender_qualifier,
        ic.c.sender_id == rf.c.sender_id,
    )
    return or_(
        exists().where(named, pk.c.key_id == rf.c.key_id),
        and_(~exists().where(named), accepted_from_key),
    )


@dataclass(frozen=True)
class FileSeen:
    """One of a partner's files: accepted (its job) or refused (its codes)."""

    received_at: dt.datetime
    job_id: str | None  # None: refused
    sets_accepted: int
    sets_refused: int
    codes: tuple[str, ...]
    message: str | None = None  # a refusal's
    acknowledgement: bytes | None = None  # the 997 a refusal carried


@dataclass(frozen=True)
class Health:
    files: list[FileSeen]  # the latest, newest first
    accepted_files: int
    refused_files: int
    dead_letters: dict[str, int]  # lines of its jobs waiting, by reason
    open_disputes: int
    open_variance: Decimal  # their claimed - model, summed


def health(engine: Engine, qualifier: str, sender_id: str, limit: int = 20) -> Health:
    """What became of a sender's files: the latest, how many were refused (by
    the keys that may send them: ``_counted``), the lines of its jobs waiting
    in dead letters and its open disputes. An accepted file's sets are its
    interchanges of this sender's, all accepted (its 997 says so)."""
    ic, rf = edi_interchanges, edi_refusals
    mine = (ic.c.sender_qualifier == qualifier) & (ic.c.sender_id == sender_id)
    its_jobs = select(ic.c.job_id).where(mine)
    refused_by = (rf.c.sender_qualifier == qualifier) & (rf.c.sender_id == sender_id) & _counted(rf)
    with engine.connect() as conn:
        accepted = conn.execute(
            select(
                ic.c.job_id,
                func.min(ic.c.received_at).label("at"),
                # Interchanges stored before 0024 did not count their sets: the job's documents.
                func.coalesce(func.sum(ic.c.sets), jobs.c.documents).label("sets"),
            )
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
    files = [FileSeen(utc(r.at), r.job_id, int(r.sets), 0, ()) for r in accepted] + [
        # Its sets as the 997 it carried counts them (``services/api/edi/refusal.py::kept``).
        FileSeen(
            utc(r.received_at),
            None,
            r.sets - r.sets_at_fault,
            r.sets_at_fault,
            tuple(r.codes.split(",")),
            r.message,
            None if r.acknowledgement is None else bytes(r.acknowledgement),
        )
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
    """Files refused, by profiled partner (``Q/ID``), counted as ``health``
    counts them: from the keys that may send its files."""
    rf = edi_refusals
    query = (
        select(rf.c.sender_qualifier, rf.c.sender_id, func.count())
        .join(
            p,
            (p.c.sender_qualifier == rf.c.sender_qualifier) & (p.c.sender_id == rf.c.sender_id),
        )
        .where(_counted(rf))
        .group_by(rf.c.sender_qualifier, rf.c.sender_id)
    )
    with engine.connect() as conn:
        return {f"{q}/{i}": int(n) for q, i, n in conn.execute(query)}
