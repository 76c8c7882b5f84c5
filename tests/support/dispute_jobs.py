"""Real disputes for the API and CLI tests: promo lines settled by the worker
against a contract whose tolerance (0.05) they miss (docs/api.md#disputes)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, func, select

from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import tables
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid

# T1 pays 0.125 a unit: (line_no, units, claimed) -> model, variance = claimed - model.
LINES = (
    (1, "8", "1.00"),  # model 1.00: posted
    (2, "40", "6.00"),  # model 5.00: disputed, +1.00
    (3, "16", "2.50"),  # model 2.00: disputed, +0.50
    (4, "80", "8.00"),  # model 10.00: disputed, -2.00
    (5, "8", "1.30"),  # model 1.00: disputed, +0.30
)
# line_ref -> variance of the disputed ones, oldest (first settled) first.
VARIANCES = {
    "2": Decimal("1.00"),
    "3": Decimal("0.50"),
    "4": Decimal("-2.00"),
    "5": Decimal("0.30"),
}


@dataclass(frozen=True)
class Disputed:
    job_id: str
    vendor: str
    document_id: str


def promo_lines() -> list[dict[str, Any]]:
    return [promo_line(n, units, claimed) for n, units, claimed in LINES]


def settle_disputed(
    ctx: WorkerContext,
    vendor: str | None = None,
    *,
    version: int = 1,
    document_id: str | None = None,
) -> Disputed:
    """One settled job of one document: one posted line and four disputed ones
    (``VARIANCES``). Give the vendor and document of an earlier one, with a new
    ``version``, to settle the same identities again (its disputes are superseded)."""
    vendor = vendor or uid("DSP-")
    publish_promo_contracts(ctx.engine, [vendor], version)
    doc = promo_doc(vendor, promo_lines(), version=version, document_id=document_id)
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, [doc])
    for message in messages:
        settle_chunk(ctx, message, 1)
    return Disputed(job_id, vendor, doc["document_id"])


def resolved_rows(engine: Engine, dispute_id: int) -> int:
    """``resolved`` ledger rows that supersede this dispute (at most one, ever)."""
    e = tables.ledger_entries
    with engine.connect() as conn:
        count = conn.execute(
            select(func.count())
            .select_from(e)
            .where(e.c.outcome == "resolved", e.c.supersedes_id == dispute_id)
        ).scalar_one()
    return int(count)


def resolution_audits(engine: Engine, dispute_id: int) -> int:
    a = tables.audit_log
    with engine.connect() as conn:
        targets = conn.execute(select(a.c.target).where(a.c.action == "dispute_resolve")).scalars()
        return sum(1 for t in targets if t.rsplit(":", 1)[-1] == str(dispute_id))
