"""Builders for test data: promo documents, stored jobs, chunk messages."""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any

from sqlalchemy import Engine

from shared.adapters.db.contracts import put_contract
from shared.adapters.db.jobs import intake as jobs_db
from shared.config.settings import Settings
from shared.domain.kinds import BATCH, KINDS
from shared.domain.pipeline.chunking import build_chunks
from shared.domain.pipeline.messages import ChunkMessage
from shared.domain.synthetic import promo_contract


def uid(prefix: str = "") -> str:
    return f"{prefix}{uuid.uuid4().hex[:12]}"


def promo_line(
    line_no: int, units: str, claimed: str, tier: str = "T1", sku: str = "SKU-1", **extra: Any
) -> dict[str, Any]:
    return {
        "line_no": line_no,
        "sku": sku,
        "promo_tier": tier,
        "qualifying_units": units,
        "claimed_amount": claimed,
        **extra,
    }


def promo_doc(
    vendor: str, lines: list[dict[str, Any]], version: int = 1, document_id: str | None = None
) -> dict[str, Any]:
    return {
        "document_id": document_id or uid("INV-"),
        "partition_key": vendor,
        "contract_version": version,
        "period": "2026-Q3",
        "lines": lines,
    }


def publish_promo_contracts(engine: Engine, vendors: list[str], version: int = 1) -> None:
    for vendor in vendors:
        put_contract(engine, "promo_accrual", vendor, version, promo_contract())


def store_job(
    engine: Engine,
    settings: Settings,
    key: bytes,
    documents: list[dict[str, Any]],
    kind: str = "promo_accrual",
    *,
    accept: bool = True,
    body: bytes | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Store a job the way the front door does; return its signed messages.

    ``accept=False`` leaves it ``receiving``, as if the API died while enqueueing;
    ``body`` makes it the stored form of exactly that submission.
    """
    batch = BATCH.validate_python({"kind": kind, "documents": documents})
    given = body is not None
    body = body or json.dumps({"kind": kind, "documents": documents}).encode()
    docs = list(batch.documents)
    serialized = [d.model_dump_json().encode() for d in docs]
    chunks = build_chunks(
        serialized,
        [KINDS[kind].line_count(d) for d in docs],
        settings.max_chunk_documents,
        settings.max_chunk_bytes,
    )
    job = jobs_db.NewJob(
        id=uuid.uuid4().hex,
        key_id="acme",
        # Each call is a new submission unless it stands for a given body.
        idempotency_key=hashlib.sha256(body).hexdigest() if given else uuid.uuid4().hex,
        body_sha256=hashlib.sha256(body).hexdigest(),
        kind=kind,
        documents=len(docs),
        lines=sum(c.lines for c in chunks),
        partition_keys=[d.partition_key for d in docs],
        chunks=chunks,
    )
    assert jobs_db.create_job(engine, job)
    if accept:
        jobs_db.mark_accepted(engine, job.id)
    messages = [ChunkMessage(c.id, job.id, kind, c.payload_sha256).signed(key) for c in chunks]
    return job.id, messages
