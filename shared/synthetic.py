"""Deterministic synthetic batches for demos, tests and benchmarks (pure)."""

from __future__ import annotations

import random
from decimal import Decimal
from typing import Any

from shared.money import CENT, quantize

PROMO_TIERS = {"T1": Decimal("0.125"), "T2": Decimal("0.45"), "T3": Decimal("1.10")}
PROMO_TOLERANCE = Decimal("0.05")


def promo_contract() -> dict[str, Any]:
    return {
        "tier_rates": {tier: str(rate) for tier, rate in PROMO_TIERS.items()},
        "tolerance": str(PROMO_TOLERANCE),
    }


def promo_batch(
    lines: int,
    *,
    vendors: int = 5,
    lines_per_document: int = 10,
    disputed_every: int = 50,
    contract_version: int = 1,
    seed: int = 7,
    document_prefix: str = "INV",
) -> dict[str, Any]:
    """A promo_accrual batch; every ``disputed_every``-th line overclaims by 1.00."""
    rng = random.Random(seed)
    documents = []
    made = 0
    doc_no = 0
    while made < lines:
        doc_no += 1
        count = min(lines_per_document, lines - made)
        doc_lines = []
        for line_no in range(1, count + 1):
            made += 1
            tier = rng.choice(sorted(PROMO_TIERS))
            units = rng.randint(1, 500)
            amount = quantize(units * PROMO_TIERS[tier], CENT)
            if disputed_every and made % disputed_every == 0:
                amount += Decimal("1.00")
            doc_lines.append(
                {
                    "line_no": line_no,
                    "sku": f"SKU-{rng.randint(10000, 99999)}",
                    "promo_tier": tier,
                    "qualifying_units": str(units),
                    "claimed_amount": str(amount),
                }
            )
        documents.append(
            {
                "document_id": f"{document_prefix}-{seed}-{doc_no:07d}",
                "partition_key": f"VENDOR-{doc_no % vendors:04d}",
                "contract_version": contract_version,
                "period": "2026-Q3",
                "lines": doc_lines,
            }
        )
    return {"kind": "promo_accrual", "documents": documents}
