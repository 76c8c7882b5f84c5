"""Disputes for tests: promo lines settled straight into the ledger (no broker,
no Redis), and what the ledger then holds of them."""

from __future__ import annotations

from collections import defaultdict
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, func, select

from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.config.settings import Settings
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.pipeline.settlement import ChunkPlan, plan_chunk
from shared.domain.pipeline.units import ChunkRef
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.ledger import commit_plan

KIND = get_kind("promo_accrual")
# T1 pays 0.125 a unit under version 1, 0.25 under version 2 and 0.50 under 3;
# a claim more than 0.05 away from that is disputed.
RATES = {1: "0.125", 2: "0.25", 3: "0.50"}
ACTOR = "operator:0123456789ab"
ledger = tables.ledger_entries


def contracts_for(vendor: str) -> dict[tuple[str, int], PromoContract]:
    return {
        (vendor, v): PromoContract.model_validate({"tier_rates": {"T1": r}, "tolerance": "0.05"})
        for v, r in RATES.items()
    }


def new_vendor(engine: Engine) -> str:
    vendor = uid("V-")
    for version, rate in RATES.items():
        body = {"tier_rates": {"T1": rate}, "tolerance": "0.05"}
        put_contract(engine, "promo_accrual", vendor, version, body)
    return vendor


def planned(engine: Engine, docs: list[dict[str, Any]]) -> tuple[ChunkRef, ChunkPlan]:
    """These documents stored as one chunk of a new job, and planned: what
    ``commit_plan`` records."""
    job_id, [message] = store_job(engine, Settings(), b"k", docs)
    parsed = [PromoDocument.model_validate(d) for d in docs]
    ref = ChunkRef(message["chunk_id"], job_id, "promo_accrual", sum(len(d.lines) for d in parsed))
    vendors = {d.partition_key for d in parsed}
    contracts = {k: c for v in vendors for k, c in contracts_for(v).items()}
    return ref, plan_chunk(KIND, parsed, contracts)


def settle(engine: Engine, docs: list[dict[str, Any]]) -> str:
    """Settle these documents as one chunk of a new job; its id."""
    ref, plan = planned(engine, docs)
    with engine.begin() as conn:
        assert commit_plan(conn, ref, plan, 1) is not None
    return ref.job_id


def disputed_doc(
    vendor: str, claims: list[str], version: int = 1, document_id: str | None = None
) -> dict[str, Any]:
    """A document of 8-unit T1 lines claiming these amounts (the model pays 1.00
    under version 1): a claim other than the model's amount is disputed."""
    lines = [promo_line(n + 1, "8", claim) for n, claim in enumerate(claims)]
    return promo_doc(vendor, lines, version=version, document_id=document_id)


def job_disputes(engine: Engine, job_id: str, docs: list[dict[str, Any]]) -> list[int]:
    """The job's disputed rows in the order of ``docs`` and their lines (ids
    follow key order within a chunk, not line order)."""
    position = {d["document_id"]: n for n, d in enumerate(docs)}
    with engine.connect() as conn:
        rows = conn.execute(
            select(ledger.c.id, ledger.c.document_id, ledger.c.line_ref).where(
                ledger.c.job_id == job_id, ledger.c.outcome == "disputed"
            )
        ).all()
    rows.sort(key=lambda r: (position[r.document_id], int(r.line_ref)))
    return [r.id for r in rows]


def row(engine: Engine, ledger_id: int) -> Any:
    with engine.connect() as conn:
        return conn.execute(select(ledger).where(ledger.c.id == ledger_id)).one()


def resolutions_of(engine: Engine, dispute_id: int) -> list[Any]:
    """Every ``resolved`` ledger row of this dispute."""
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(ledger).where(
                    ledger.c.supersedes_id == dispute_id, ledger.c.outcome == "resolved"
                )
            ).all()
        )


def counts_for(engine: Engine, dispute_id: int) -> tuple[int, int, int, int]:
    """(resolved rows, dispute_resolutions rows, outbox mentions of its resolved
    rows, audit entries) of one dispute."""
    resolved = [r.id for r in resolutions_of(engine, dispute_id)]
    dr, audit, outbox = tables.dispute_resolutions, tables.audit_log, tables.outbox
    with engine.connect() as conn:
        records = conn.execute(
            select(func.count()).where(dr.c.dispute_id == dispute_id)
        ).scalar_one()
        entries = conn.execute(
            select(func.count()).where(
                audit.c.action == "dispute_resolve", audit.c.target == str(dispute_id)
            )
        ).scalar_one()
        lists = conn.execute(select(outbox.c.ledger_entry_ids)).scalars().all()
    mentioned = [i for ids in lists if ids for i in ids]
    events = sum(mentioned.count(i) for i in resolved)
    return len(resolved), int(records), events, int(entries)


def delta_sums(engine: Engine, keys: set[str]) -> dict[str, tuple[Decimal, Decimal]]:
    """Per reconciliation key: (sum of delta over its rows, its latest row's amount)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(ledger.c.reconciliation_key, ledger.c.delta, ledger.c.amount)
            .where(ledger.c.reconciliation_key.in_(sorted(keys)))
            .order_by(ledger.c.id)
        ).all()
    sums: dict[str, Decimal] = defaultdict(Decimal)
    latest: dict[str, Decimal] = {}
    for r in rows:
        sums[r.reconciliation_key] += r.delta
        latest[r.reconciliation_key] = r.amount
    return {key: (sums[key], latest[key]) for key in latest}
