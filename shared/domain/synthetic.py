"""Deterministic synthetic batches for demos, tests and benchmarks (pure)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from shared.domain.money import CENT, quantize

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


RECIPE_BOM = {"FLOUR": "0.25", "TOMATO": "0.180", "MOZZ": "0.125", "BASIL": "0.004"}


def recipe_contract() -> dict[str, Any]:
    return {"bom": dict(RECIPE_BOM)}


def recipe_batch(
    lines: int,
    *,
    recipes: int = 5,
    locations_per_request: int = 4,
    seed: int = 7,
    contract_version: int = 1,
) -> dict[str, Any]:
    """recipe_cost requests; a line is one location of a request."""
    rng = random.Random(seed)
    documents = []
    made = 0
    n = 0
    while made < lines:
        count = min(locations_per_request, lines - made)
        recipe = f"RECIPE-{n % recipes:04d}"
        prices = {sku: str(Decimal(rng.randint(50, 4000)) / 100) for sku in RECIPE_BOM}
        documents.append(
            {
                "document_id": f"RCP-{seed}-{n:07d}",
                "partition_key": recipe,
                "recipe_id": recipe,
                "contract_version": contract_version,
                "location_ids": [f"STORE-{made + i:05d}" for i in range(count)],
                "effective_at": "2026-07-01T00:00:00Z",
                "pricing_snapshot": prices,
                "trigger": rng.choice(["vendor_rate", "yield_edit", "spec_change", "bulk_import"]),
            }
        )
        made += count
        n += 1
    return {"kind": "recipe_cost", "documents": documents}


FREIGHT_CONTRACT = {
    "rates": {"mile": "2.150", "cwt": "41.93", "unit": "2510.00", "flat": "45.00"},
    "discount_pct": "0.80",
    "fuel_surcharge": "0.25",
    "accessorials": {"LIFTGATE": "75.00", "ENS": {"per": "mile", "rate": "0.1980"}},
    "tolerance": "1.00",
}


def freight_contract() -> dict[str, Any]:
    fresh: dict[str, Any] = json.loads(json.dumps(FREIGHT_CONTRACT))  # a deep copy
    return fresh


def freight_batch(
    lines: int,
    *,
    carriers: int = 5,
    legs_per_invoice: int = 3,
    seed: int = 7,
    contract_version: int = 1,
) -> dict[str, Any]:
    """freight_audit invoices billed at the contract's price (some overbilled)."""
    rng = random.Random(seed)
    documents = []
    made = 0
    n = 0
    while made < lines:
        legs = []
        for leg_no in range(1, min(legs_per_invoice, lines - made) + 1):
            made += 1
            miles = Decimal(rng.randint(20, 900))
            net = miles * Decimal("2.150") * Decimal("0.20")
            billed = quantize(net * Decimal("1.25"), CENT)
            if made % 40 == 0:
                billed += Decimal("12.00")  # overbilled: disputed
            legs.append(
                {
                    "leg_no": leg_no,
                    "miles": str(miles),
                    "accessorials": [],
                    "billed_amount": str(billed),
                }
            )
        documents.append(
            {
                "document_id": f"PRO-{seed}-{n:07d}",
                "partition_key": f"CARRIER-{n % carriers:03d}",
                "contract_version": contract_version,
                "document_type": "EDI",
                "legs": legs,
            }
        )
        n += 1
    return {"kind": "freight_audit", "documents": documents}


Generator = tuple[Callable[..., dict[str, Any]], Callable[[], dict[str, Any]]]
GENERATORS: dict[str, Generator] = {
    "promo_accrual": (promo_batch, promo_contract),
    "recipe_cost": (recipe_batch, recipe_contract),
    "freight_audit": (freight_batch, freight_contract),
}
