"""Reconciliation keys: SHA-256 over immutable business fields
(docs/architecture.md#reconciliation-keys).

Fields are joined by ``|``; a missing optional field joins as an empty string.
Keys are lower-case hex.
"""

from __future__ import annotations

import hashlib

_sha256 = hashlib.sha256


def sha256_hex(*fields: object) -> str:
    joined = "|".join("" if f is None else str(f) for f in fields)
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()


# The promo keys are computed twice per line on the hot path: spelled out
# rather than through ``sha256_hex``'s generic join (same bytes, a test checks).
def promo_line_item_hash(
    line_no: int, sku: str, store_id: str | None, transaction_date: str | None
) -> str:
    text = f"{line_no}|{sku}|{store_id or ''}|{transaction_date or ''}"
    return _sha256(text.encode()).hexdigest()


def promo_key(
    partition_key: str, document_id: str, line_item_hash: str, promo_tier: str, period: str
) -> str:
    """docs/architecture.md#reconciliation-keys: the partition (vendor) comes first, so one vendor's
    line can never collide with, supersede or duplicate another vendor's line of the same ids."""
    text = f"{partition_key}|{document_id}|{line_item_hash}|{promo_tier}|{period}"
    return _sha256(text.encode()).hexdigest()


def correlation_id_for(job_id: str, document_id: str) -> str:
    """The correlation id of a document that came without one: stable for the job's
    document, so every retry, requeue and event of it carries the same id."""
    return sha256_hex(job_id, document_id)[:32]
