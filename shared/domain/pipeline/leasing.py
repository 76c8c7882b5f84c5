"""What a settle attempt leases in Redis (docs/architecture.md#dedup-leases).

A lease keeps two live attempts from settling the same line at once: each must
hold, for every line it may post, a lease that any other attempt at that line
also needs. The line's reconciliation key is one. For a kind whose every key
starts with its document's partition and id (``Kind.keys_name_document``: promo
``partition|document_id|...``, freight ``carrier|document_id|leg_no``) the
document is another: any attempt at one of its lines holds a line of that same
document, so one lease per document covers them all. Ten-line invoices then
cost Redis a tenth of the leases, and no line is less covered. A recipe's key is
its request's content, which two requests can share: it leases each key.
"""

from __future__ import annotations

import hashlib

from shared.domain.pipeline.settlement import ChunkPlan


def document_lease(partition_key: str, document_id: str) -> str:
    """A document's lease name; ``d:`` keeps it apart from any line's key (hex)."""
    return "d:" + hashlib.sha256(f"{partition_key}|{document_id}".encode()).hexdigest()


def leases_by_version(plan: ChunkPlan, per_document: bool) -> dict[int, set[str]]:
    """The leases of the plan's lines that may post, per contract version: their
    keys (``ChunkPlan.claim_keys_by_version``) or, ``per_document``, one
    ``document_lease`` per document holding any."""
    if not per_document:
        return plan.claim_keys_by_version()
    by_version: dict[int, set[str]] = {}
    doc = None
    for p in plan.lines:
        if p.settlement is None or p.document is doc:
            continue
        doc = p.document  # a document's lines are consecutive
        lease = document_lease(doc.partition_key, doc.document_id)
        by_version.setdefault(doc.contract_version, set()).add(lease)
    return by_version
