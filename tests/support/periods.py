"""Ledger rows for the periods tests: a promo chunk settled through the real
ledger writer, booked in the open period as a worker's would be."""

from __future__ import annotations

import datetime as dt
import hashlib
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Engine, insert, select

from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.ledger.writer import write_outbox
from shared.adapters.db.periods import booking
from shared.config.settings import Settings
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.pipeline.settlement import ChunkPlan, plan_chunk
from shared.domain.pipeline.units import ChunkRef
from tests.support.factories import store_job
from tests.support.ledger import commit_plan

KIND = get_kind("promo_accrual")
# Tier T1 at 0.125 (version 1) and 0.150 (version 2), 5% tolerance.
CONTRACTS = {
    version: PromoContract.model_validate({"tier_rates": {"T1": rate}, "tolerance": "0.05"})
    for version, rate in ((1, "0.125"), (2, "0.150"))
}


def promo_unit(
    engine: Engine, docs: list[dict[str, Any]], currency: str | None = None
) -> tuple[ChunkRef, ChunkPlan]:
    """Store these promo documents as one chunk; its ref and its plan. Their
    partitions' contracts are published (in ``currency``, else the default)
    as a worker would find them."""
    job_id, [message] = store_job(engine, Settings(), b"k", docs)
    parsed = [PromoDocument.model_validate(d) for d in docs]
    contracts = {(d.partition_key, v): CONTRACTS[v] for d in parsed for v in CONTRACTS}
    for (partition, version), contract in sorted(contracts.items()):
        body = contract.model_dump(mode="json") | ({"currency": currency} if currency else {})
        put_contract(engine, KIND.name, partition, version, body)
    lines = sum(len(d.lines) for d in parsed)
    ref = ChunkRef(message["chunk_id"], job_id, "promo_accrual", lines)
    return ref, plan_chunk(KIND, parsed, contracts)


def settle_promo(engine: Engine, docs: list[dict[str, Any]], currency: str | None = None) -> str:
    """Settle these promo documents in one committed chunk; its job id."""
    ref, plan = promo_unit(engine, docs, currency)
    with engine.begin() as conn:
        commit_plan(conn, ref, plan, 1)
    return ref.job_id


def book_match(
    engine: Engine,
    partition_key: str,
    document_id: str,
    outcome: str,
    amount: str,
    *,
    deduction_id: int = 1,
    step: int = 1,
    claimed: str | None = None,
    remittance: str | None = None,
) -> int:
    """Book a remittance's ``deducted`` or ``written_off`` row as the intake
    does (docs/architecture.md#remittances-and-deductions): against the document's
    newest version (0 for none), ``delta`` minus the money taken, in the open
    period under the booking lock, listed by an outbox unit of its own in the
    same transaction (the feed and the outcome events read rows through it). Its id."""
    ledger = tables.ledger_entries
    rm = (
        remittance
        or "rm_" + hashlib.sha256(f"{partition_key}:{deduction_id}".encode()).hexdigest()[:24]
    )
    key = hashlib.sha256(
        f"settleq:deduction:{deduction_id}:{step}:{document_id}:{outcome}".encode()
    ).hexdigest()
    with engine.begin() as conn:
        period = booking.book(conn)
        version = conn.execute(
            select(ledger.c.contract_version)
            .where(
                ledger.c.document_id == document_id,
                ledger.c.partition_key == partition_key,
                ledger.c.kind == "promo_accrual",
            )
            .order_by(ledger.c.id.desc())
            .limit(1)
        ).scalar()
        taken = Decimal(amount)
        now = dt.datetime.now(dt.UTC)
        row_id = int(
            conn.execute(
                insert(ledger)
                .values(
                    reconciliation_key=key,
                    contract_version=version or 0,
                    kind="promo_accrual",
                    partition_key=partition_key,
                    document_id=document_id,
                    line_ref=f"D{deduction_id}",
                    job_id=rm,
                    outcome=outcome,
                    amount=taken,
                    claimed_amount=Decimal(claimed or amount),
                    delta=-taken,
                    supersedes_id=None,
                    correlation_id=rm,
                    created_at=now,
                    period=period,
                )
                .returning(ledger.c.id)
            ).scalar_one()
        )
        write_outbox(conn, [SimpleNamespace(id=row_id)], now)  # type: ignore[list-item]
        return row_id
