"""A deterministic quarterly-claim workload with its own expected outcome
(used by the benchmark and the chaos suite)."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

RATES = {"T1": Decimal("0.125"), "T2": Decimal("0.45"), "T3": Decimal("1.10")}
TOLERANCE = Decimal("0.05")
CONTRACT = {"tier_rates": {k: str(v) for k, v in RATES.items()}, "tolerance": str(TOLERANCE)}
CENT = Decimal("0.01")


@dataclass
class Expectation:
    posted: int = 0
    disputed: int = 0
    duplicate: int = 0
    amount_posted: Decimal = Decimal(0)
    amount_disputed: Decimal = Decimal(0)


@dataclass
class Generated:
    earlier: list[dict[str, Any]]
    documents: list[dict[str, Any]]
    expect: Expectation = field(default_factory=Expectation)


def generate(lines: int, vendors: int, lines_per_doc: int = 20, seed: int = 500) -> Generated:
    """Deterministic documents; the expectation is computed while generating."""
    rng = random.Random(seed)
    expect = Expectation()

    def document(tag: str, n: int) -> dict[str, Any]:
        doc_lines = []
        for line_no in range(1, lines_per_doc + 1):
            tier = ("T1", "T2", "T3")[rng.randrange(3)]
            units = rng.randrange(1, 500)
            model = (units * RATES[tier]).quantize(CENT, rounding=ROUND_HALF_UP)
            disputed = rng.random() < 0.02
            claimed = model + Decimal("1.00") if disputed else model
            doc_lines.append(
                {
                    "line_no": line_no,
                    "sku": f"SKU-{rng.randrange(10**6):06d}",
                    "promo_tier": tier,
                    "qualifying_units": str(units),
                    "claimed_amount": str(claimed),
                }
            )
        return {
            "document_id": f"{tag}-{n:07d}",
            "partition_key": f"VENDOR-{n % vendors:04d}",
            "contract_version": 1,
            "period": "2026-Q3",
            "lines": doc_lines,
        }

    def account(doc: dict[str, Any]) -> None:
        for line in doc["lines"]:
            model = (Decimal(line["qualifying_units"]) * RATES[line["promo_tier"]]).quantize(
                CENT, rounding=ROUND_HALF_UP
            )
            claimed = Decimal(line["claimed_amount"])
            if abs(claimed - model) <= TOLERANCE:
                expect.posted += 1
                expect.amount_posted += model
            else:
                expect.disputed += 1
                expect.amount_disputed += claimed

    repeated_docs = max(1, lines // lines_per_doc // 100)  # 1% of the lines
    earlier = [document("EARLY", n) for n in range(repeated_docs)]
    fresh = [document("CLAIM", n) for n in range(lines // lines_per_doc - repeated_docs)]
    for doc in fresh:
        account(doc)
    expect.duplicate = repeated_docs * lines_per_doc
    # The repeats are spread through the batch, as a producer's resend would be.
    documents = list(fresh)
    step = max(1, len(fresh) // repeated_docs)
    for i, doc in enumerate(earlier):
        documents.insert(min(len(documents), i * (step + 1)), doc)
    return Generated(earlier, documents, expect)


def ndjson(documents: list[dict[str, Any]]) -> bytes:
    lines = [json.dumps({"kind": "promo_accrual"})] + [
        json.dumps(d, separators=(",", ":")) for d in documents
    ]
    return ("\n".join(lines) + "\n").encode()
