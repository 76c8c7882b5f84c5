"""``recipe_cost``: food-cost rollups of a recipe at each of its locations.

theoretical_cost = sum(bom_qty[sku] * price[sku]) over the recipe's bill of
materials, rounded once to 0.0001 half up; one line per location, posted
with ``delta`` against the prior committed cost of (recipe, location)
(docs/architecture.md#recipe-costs, docs/architecture.md#re-pricing-lineage-and-advisory-locks). A
BOM sku with no price in the snapshot is ``missing_price`` for the whole request: never a silent
zero.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from decimal import Decimal
from typing import Annotated, ClassVar, Literal

from pydantic import Field, model_validator

from shared.domain.keys import sha256_hex
from shared.domain.kinds.base import (
    Contract,
    Document,
    Identifier,
    Kind,
    Line,
    LineCell,
    RateTable,
    RepeatedLine,
    Settlement,
    WireModel,
)
from shared.domain.kinds.dates import UtcDateTime
from shared.domain.money import BASIS, Quantity, exact_arithmetic, quantize
from shared.errors import BusinessError

Trigger = Literal["vendor_rate", "yield_edit", "spec_change", "bulk_import"]


class RecipeDocument(Document):
    recipe_id: Identifier
    location_ids: list[Identifier] = Field(min_length=1, max_length=10_000)
    effective_at: UtcDateTime
    pricing_snapshot: dict[Identifier, Quantity] = Field(min_length=1, max_length=100_000)
    trigger: Trigger

    @model_validator(mode="after")
    def _consistent(self) -> RecipeDocument:
        if self.recipe_id != self.partition_key:
            raise ValueError("recipe_id must equal partition_key (the recipe is the partition)")
        return self


class RecipeBatch(WireModel):
    kind: Literal["recipe_cost"]
    documents: list[RecipeDocument] = Field(min_length=1)


class RecipeContract(Contract):
    # Edible-portion quantities, none negative, at least one: an empty bill of
    # materials costs every recipe nothing. At most as many skus as a snapshot may
    # price (a bom sku without a price is missing_price): this also bounds the
    # cost's sum (shared/domain/money.py, PRECISION).
    bom: Annotated[RateTable, Field(max_length=100_000)]


def _canonical_decimal(value: Decimal) -> str:
    """ "2.50", "2.5" (and "-0", "0") are one price: identity must not depend on spelling."""
    return "0" if value == 0 else format(value.normalize(), "f")


def request_fingerprint(document: RecipeDocument) -> str:
    """SHA-256 of the request's canonical bytes: a JSON array of the recipe, the sorted
    locations, effective_at in UTC (``Z``) and the [sku, price] pairs sorted by sku.
    JSON rather than a joined string, so that no id containing a separator can make
    two different requests one."""
    effective = document.effective_at.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")
    canonical = json.dumps(
        [
            document.recipe_id,
            sorted(document.location_ids),
            effective,
            [[sku, _canonical_decimal(p)] for sku, p in sorted(document.pricing_snapshot.items())],
        ],
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


class RecipeCost(Kind[RecipeDocument, RecipeContract]):
    name: ClassVar[str] = "recipe_cost"
    quantum: ClassVar[Decimal] = BASIS
    partition_noun: ClassVar[str] = "recipe"
    line_ref_name: ClassVar[str] = "location_id"
    amounts_are_totals: ClassVar[bool] = False  # a cost per unit of the recipe
    document_model = RecipeDocument
    contract_model = RecipeContract
    batch_model = RecipeBatch
    delta_basis = "line_history"

    def repeated_line(self, document: RecipeDocument) -> RepeatedLine | None:
        return RepeatedLine.find(document.location_ids, "location_ids")

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

    # The location is the line's line_ref; these are what priced it.
    line_columns = ("effective_at", "trigger")

    def line_cells(self, document: RecipeDocument) -> list[tuple[LineCell, ...]]:
        effective = document.effective_at.isoformat().replace("+00:00", "Z")
        return [(effective, document.trigger)] * len(document.location_ids)

    def check_document(self, document: RecipeDocument, contract: RecipeContract) -> None:
        missing = sorted(set(contract.bom) - set(document.pricing_snapshot))
        if missing:
            shown = ", ".join(missing[:5])
            raise BusinessError("missing_price", f"no price for {len(missing)} BOM sku(s): {shown}")

    def settle(self, document: RecipeDocument, line: Line, contract: RecipeContract) -> Settlement:
        with exact_arithmetic():
            cost = sum(
                (qty * document.pricing_snapshot[sku] for sku, qty in contract.bom.items()),
                Decimal(0),
            )
            amount = quantize(cost, self.quantum)
        return Settlement(outcome="posted", amount=amount, claimed_amount=None)
