"""``recipe_cost``: food-cost rollups of a recipe at each of its locations.

theoretical_cost = sum(bom_qty[sku] * price[sku]) over the recipe's bill of
materials, rounded once to 0.0001 half up; one line per location, posted
with ``delta`` against the prior committed cost of (recipe, location)
(SPEC §5, §8). A BOM sku with no price in the snapshot is ``missing_price``
for the whole request: never a silent zero.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from shared.errors import BusinessError
from shared.keys import sha256_hex
from shared.kinds.base import Document, Identifier, Kind, Line, Settlement, WireModel
from shared.money import Quantity, quantize

QUANTUM = Decimal("0.0001")
Trigger = Literal["vendor_rate", "yield_edit", "spec_change", "bulk_import"]


class RecipeDocument(Document):
    recipe_id: Identifier
    location_ids: list[Identifier] = Field(min_length=1, max_length=10_000)
    effective_at: dt.datetime = Field(strict=False)
    pricing_snapshot: dict[Identifier, Quantity] = Field(min_length=1, max_length=100_000)
    trigger: Trigger

    @model_validator(mode="after")
    def _consistent(self) -> RecipeDocument:
        if self.recipe_id != self.partition_key:
            raise ValueError("recipe_id must equal partition_key (the recipe is the partition)")
        offset = self.effective_at.utcoffset()
        if offset is None or offset != dt.timedelta(0):
            raise ValueError("effective_at must be ISO-8601 in UTC (Z or +00:00)")
        if len(set(self.location_ids)) != len(self.location_ids):
            raise ValueError("location_ids must not repeat")
        return self


class RecipeBatch(WireModel):
    kind: Literal["recipe_cost"]
    documents: list[RecipeDocument] = Field(min_length=1)


class RecipeContract(WireModel):
    bom: dict[Identifier, Quantity] = Field(min_length=1)


def _canonical_decimal(value: Decimal) -> str:
    """ "2.50" and "2.5" are one price: the request's identity must not depend on zeros."""
    return format(value.normalize(), "f")


def request_fingerprint(document: RecipeDocument) -> str:
    """The request's canonical bytes: recipe, sorted locations, effective_at, sorted prices."""
    prices = ",".join(
        f"{sku}={_canonical_decimal(price)}"
        for sku, price in sorted(document.pricing_snapshot.items())
    )
    effective = document.effective_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    return sha256_hex(
        document.recipe_id, ",".join(sorted(document.location_ids)), effective, prices
    )


class RecipeCost(Kind[RecipeDocument, RecipeContract]):
    name: ClassVar[str] = "recipe_cost"
    document_model = RecipeDocument
    contract_model = RecipeContract
    batch_model = RecipeBatch
    delta_basis = "line_history"

    def lines(self, document: RecipeDocument) -> list[Line]:
        fingerprint = request_fingerprint(document)
        return [
            Line(
                document_id=document.document_id,
                line_ref=location,
                reconciliation_key=sha256_hex(fingerprint, location),
                claimed_amount=None,
                raw=location,
            )
            for location in document.location_ids
        ]

    def line_count(self, document: RecipeDocument) -> int:
        return len(document.location_ids)

    def check_document(self, document: RecipeDocument, contract: RecipeContract) -> None:
        missing = sorted(set(contract.bom) - set(document.pricing_snapshot))
        if missing:
            shown = ", ".join(missing[:5])
            raise BusinessError("missing_price", f"no price for {len(missing)} BOM sku(s): {shown}")

    def settle(self, document: RecipeDocument, line: Line, contract: RecipeContract) -> Settlement:
        cost = sum(
            (qty * document.pricing_snapshot[sku] for sku, qty in contract.bom.items()),
            Decimal(0),
        )
        return Settlement(outcome="posted", amount=quantize(cost, QUANTUM), claimed_amount=None)
