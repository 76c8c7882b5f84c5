"""Ledger rows for the periods tests: a promo chunk settled through the real
ledger writer, booked in the open period as a worker's would be."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine

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


def promo_unit(engine: Engine, docs: list[dict[str, Any]]) -> tuple[ChunkRef, ChunkPlan]:
    """Store these promo documents as one chunk; its ref and its plan."""
    job_id, [message] = store_job(engine, Settings(), b"k", docs)
    parsed = [PromoDocument.model_validate(d) for d in docs]
    contracts = {(d.partition_key, v): CONTRACTS[v] for d in parsed for v in CONTRACTS}
    lines = sum(len(d.lines) for d in parsed)
    ref = ChunkRef(message["chunk_id"], job_id, "promo_accrual", lines)
    return ref, plan_chunk(KIND, parsed, contracts)


def settle_promo(engine: Engine, docs: list[dict[str, Any]]) -> str:
    """Settle these promo documents in one committed chunk; its job id."""
    ref, plan = promo_unit(engine, docs)
    with engine.begin() as conn:
        commit_plan(conn, ref, plan, 1)
    return ref.job_id
