"""A contract version before it is published: the selected documents' stored
lines settled under it, writing nothing (docs/api.md#previewing-a-contract-version).

The documents are read from their stored chunks (each one's newest stored
copy: the job of its newest ledger row or dead letter), pinned to the version
the body would be published as (the partition's newest + 1), and settled by
``PreviewWriter``: the kind's own settlement and the ledger writer's own
rules, as if the producer re-sent them once the version is published. A
document whose chunks are gone (retention) is ``not_stored``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Connection, Engine, func, select

from shared.adapters.db.dialect import outcome_in
from shared.adapters.db.ledger import priors
from shared.adapters.db.ledger.preview import PreviewWriter, read_only
from shared.adapters.db.operators import audit
from shared.adapters.db.periods.tables import periods
from shared.adapters.db.stored_chunk import job_payloads
from shared.adapters.db.tables import (
    IDENTITY_OUTCOMES,
    contracts,
    dead_letters,
    ledger_entries,
)
from shared.domain.kinds.base import Document, Kind
from shared.domain.pipeline.settlement import (
    ChunkPlan,
    PlannedLine,
    decode_chunk,
    document_list,
    document_with,
    plan_chunk,
)
from shared.domain.pipeline.units import ChunkRef, Unit
from shared.domain.previews import Now, PreviewLine

# Documents settled per unit: its queries (lineages, identities) stay bounded.
UNIT_DOCUMENTS = 2000
_IN = 5000  # ids per IN list


class UnknownPeriod(LookupError):
    """The selection names a period that does not exist."""


@dataclass(frozen=True)
class Selection:
    """Which documents: those booked in a period, those of some jobs, or these."""

    period: str | None = None
    job_ids: tuple[str, ...] = ()
    document_ids: tuple[str, ...] = ()


@dataclass
class ContractPreview:
    """The selected documents' lines under the previewed version, what the
    ledger holds now for each, and the documents whose lines are gone."""

    version: int
    lines: list[PreviewLine] = field(default_factory=list)
    now: dict[tuple[str, str, str], Now] = field(default_factory=dict)
    not_stored: list[str] = field(default_factory=list)


def next_version(conn: Connection, kind: str, partition_key: str) -> int:
    newest = conn.execute(
        select(func.max(contracts.c.version)).where(
            contracts.c.kind == kind, contracts.c.partition_key == partition_key
        )
    ).scalar()
    return int(newest or 0) + 1


def partition_currency(conn: Connection, kind: str, partition_key: str) -> str | None:
    """The currency of the partition's versions (one, publishing keeps it so)."""
    found: str | None = conn.execute(
        select(contracts.c.currency)
        .where(contracts.c.kind == kind, contracts.c.partition_key == partition_key)
        .limit(1)
    ).scalar()
    return found


def preview_contract(
    engine: Engine,
    kind: Kind[Any, Any],
    partition_key: str,
    contract: Any,
    selection: Selection,
    *,
    actor: str,
    audit_details: dict[str, Any],
) -> ContractPreview:
    """Settle the selection under ``contract`` (a parsed body) as the partition's
    next version; the preview's own audit line is its only write."""
    with engine.connect() as conn:
        version = next_version(conn, kind.name, partition_key)
        wanted = _selected(conn, kind.name, partition_key, selection)
        stored_in = _stored_in(conn, kind.name, partition_key, wanted, selection)
    found = _stored_documents(engine, kind, partition_key, stored_in)
    result = ContractPreview(version)
    result.not_stored = sorted(set(wanted) - found.keys())
    documents = [document_with(found[d], contract_version=version) for d in sorted(found)]
    writer = PreviewWriter(unpublished=frozenset({(partition_key, version)}))
    contracts_now = {(partition_key, version): contract}
    with engine.connect() as conn:
        conn = read_only(conn)
        for start in range(0, len(documents), UNIT_DOCUMENTS):
            batch = documents[start : start + UNIT_DOCUMENTS]
            plan = plan_chunk(kind, batch, contracts_now)
            ref = ChunkRef("preview", "preview", kind.name, sum(map(kind.line_count, batch)))
            result.lines += writer.preview(conn, Unit(ref, plan, 1))
            # What the rounds did not read (a line dead-lettered under the body)
            # is read here, the same way.
            lines = list(_every_line(plan))
            unread = [p for p in lines if priors.lineage(kind.delta_basis, p) not in writer.asked]
            if unread:
                writer.latest_rows(conn, kind.name, kind.delta_basis, unread)
            for p in lines:
                row = writer.held.get(priors.lineage(kind.delta_basis, p))
                if row is not None:
                    d = p.document
                    result.now[(d.partition_key, d.document_id, p.line.line_ref)] = Now(
                        row.amount, row.outcome
                    )
    with engine.begin() as conn:
        audit.record(
            conn,
            actor,
            "contract.preview",
            f"contract:{kind.name}/{partition_key}/{version}",
            {**audit_details, "documents": len(found), "not_stored": len(result.not_stored)},
        )
    return result


def _selected(conn: Connection, kind: str, partition_key: str, selection: Selection) -> list[str]:
    """The selected document ids: those with a posted or disputed row booked in
    the period; those with a ledger row or a dead letter in one of the jobs; or
    the ids given (each then looked for in the store, or ``not_stored``)."""
    le = ledger_entries.c
    if selection.period is not None:
        exists = conn.execute(select(periods.c.name).where(periods.c.name == selection.period))
        if exists.first() is None:
            raise UnknownPeriod(selection.period)
        query = (
            select(le.document_id)
            .distinct()
            .where(
                le.kind == kind,
                le.partition_key == partition_key,
                le.period == selection.period,
                outcome_in(le.outcome, *IDENTITY_OUTCOMES),
            )
        )
        return sorted(conn.execute(query).scalars())
    if selection.job_ids:
        ids: set[str] = set()
        for part in _parts(selection.job_ids):
            ids.update(
                conn.execute(
                    select(le.document_id)
                    .distinct()
                    .where(le.kind == kind, le.partition_key == partition_key, le.job_id.in_(part))
                ).scalars()
            )
            dl = dead_letters.c
            ids.update(
                d
                for d in conn.execute(
                    select(dl.document_id)
                    .distinct()
                    .where(dl.kind == kind, dl.partition_key == partition_key, dl.job_id.in_(part))
                ).scalars()
                if d is not None
            )
        return sorted(ids)
    return sorted(set(selection.document_ids))


def _stored_in(
    conn: Connection,
    kind: str,
    partition_key: str,
    wanted: Sequence[str],
    selection: Selection,
) -> dict[str, str]:
    """Each wanted document's newest job: its newest ledger row's, else its
    newest dead letter's (a job selection reads only those jobs)."""
    newest: dict[str, tuple[int, int, str]] = {}  # (rank, id, job): a ledger row outranks
    for rank, table in ((0, dead_letters), (1, ledger_entries)):
        c = table.c
        for part in _parts(wanted):
            query = (
                select(c.document_id, func.max(c.id), c.job_id)
                .where(c.kind == kind, c.partition_key == partition_key, c.document_id.in_(part))
                .group_by(c.document_id, c.job_id)
            )
            if selection.job_ids:
                query = query.where(c.job_id.in_(selection.job_ids))
            for document_id, top, job_id in conn.execute(query):
                if (rank, top) > newest.get(document_id, (-1, 0, ""))[:2]:
                    newest[document_id] = (rank, top, job_id)
    return {d: job for d, (_, _, job) in newest.items()}


def _stored_documents(
    engine: Engine, kind: Kind[Any, Any], partition_key: str, stored_in: dict[str, str]
) -> dict[str, Document]:
    """The documents as their jobs' stored chunks hold them, by id."""
    by_job: dict[str, set[str]] = {}
    for document_id, job_id in stored_in.items():
        by_job.setdefault(job_id, set()).add(document_id)
    found: dict[str, Document] = {}
    adapter = document_list(kind)
    for job_id in sorted(by_job):
        wanted = by_job[job_id]
        for chunk in job_payloads(engine, job_id):
            if chunk.kind != kind.name:
                continue
            decoded = decode_chunk(kind, adapter, chunk.payload, chunk.lines)
            for d in decoded.documents:
                if d.partition_key == partition_key and d.document_id in wanted:
                    found[d.document_id] = d
    return found


def _every_line(plan: ChunkPlan) -> Iterator[PlannedLine]:
    yield from plan.lines
    for f in plan.failed_documents:
        if f.document is not None:
            for line in f.lines:
                yield PlannedLine(f.document, line, None)


def _parts(values: Iterable[Any]) -> Iterator[list[Any]]:
    values = list(values)
    for start in range(0, len(values), _IN):
        yield values[start : start + _IN]
