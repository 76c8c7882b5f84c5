"""``promo_accrual``: retailer promotion claims against a vendor's tier rates.

model = qualifying_units * tier_rate, rounded once to 0.01 half up;
posted when abs(claimed - model) <= tolerance, else disputed
(docs/architecture.md#promotional-accruals).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, ClassVar, Literal

import msgspec
from pydantic import Field

from shared.domain.keys import promo_key, promo_line_item_hash
from shared.domain.kinds.base import (
    Contract,
    Direction,
    Document,
    Identifier,
    Kind,
    Line,
    LineCell,
    Ordinal,
    Price,
    RateTable,
    RepeatedLine,
    Settlement,
    WireModel,
)
from shared.domain.kinds.dates import IsoDate
from shared.domain.kinds.ids import sound_ids
from shared.domain.kinds.screen import (
    Screen,
    ScreenDocument,
    ScreenId,
    ScreenStruct,
    ScreenVersion,
    all_plain_money,
    all_plain_quantity,
    screen,
)
from shared.domain.money import CENT, Money, Quantity, exact_distance, exact_product
from shared.errors import BusinessError


class PromoLine(WireModel):
    line_no: Ordinal
    sku: Identifier
    promo_tier: Identifier
    qualifying_units: Quantity
    claimed_amount: Money
    store_id: Identifier | None = None
    transaction_date: IsoDate | None = None


class PromoDocument(Document):
    period: Identifier
    lines: list[PromoLine] = Field(min_length=1, max_length=1_000_000)


class PromoBatch(WireModel):
    kind: Literal["promo_accrual"]
    documents: list[PromoDocument] = Field(min_length=1)


class PromoContract(Contract):
    tier_rates: RateTable
    tolerance: Price


class _ScreenLine(ScreenStruct):
    line_no: ScreenVersion
    sku: ScreenId
    promo_tier: ScreenId
    qualifying_units: str
    claimed_amount: str
    store_id: ScreenId | None = None
    # msgspec reads a date from "YYYY-MM-DD" only (RFC 3339 full-date), as IsoDate.
    transaction_date: dt.date | None = None


class _ScreenDocument(ScreenDocument):
    period: ScreenId
    lines: Annotated[list[_ScreenLine], msgspec.Meta(min_length=1, max_length=1_000_000)]
    correlation_id: ScreenId | None = None


def _sound(document: _ScreenDocument) -> bool:
    """What msgspec does not check: the ids' rule, and plain decimals in range."""
    if not sound_ids(document):
        return False
    lines = document.lines
    return all_plain_quantity([line.qualifying_units for line in lines]) and all_plain_money(
        [line.claimed_amount for line in lines]
    )


_SCREEN_CHUNK = Screen.of(
    list[_ScreenDocument], lambda documents: all(_sound(d) for d in documents)
)


class _SettleLine(msgspec.Struct):
    """PromoLine's fields and values, built from a screened chunk."""

    line_no: int
    sku: str
    promo_tier: str
    qualifying_units: Decimal
    claimed_amount: Decimal
    store_id: str | None = None
    transaction_date: dt.date | None = None


class _SettleDocument(msgspec.Struct):
    document_id: str
    partition_key: str
    contract_version: int
    period: str
    lines: list[_SettleLine]
    correlation_id: str | None = None


def _settle_documents(payload: bytes) -> list[_SettleDocument] | None:
    """A stored chunk read through the same screen as the front door (so never
    more leniently than the model), with its amounts as Decimals; None: the
    model reads it."""
    screened = screen(_SCREEN_CHUNK, payload)
    if screened is None:
        return None
    return [
        _SettleDocument(
            d.document_id,
            d.partition_key,
            d.contract_version,
            d.period,
            [
                _SettleLine(
                    line.line_no,
                    line.sku,
                    line.promo_tier,
                    Decimal(line.qualifying_units),
                    Decimal(line.claimed_amount),
                    line.store_id,
                    line.transaction_date,
                )
                for line in d.lines
            ],
            d.correlation_id,
        )
        for d in screened
    ]


class PromoAccrual(Kind[PromoDocument, PromoContract]):
    name: ClassVar[str] = "promo_accrual"
    quantum: ClassVar[Decimal] = CENT
    partition_noun: ClassVar[str] = "vendor"
    direction: ClassVar[Direction | None] = "owed_to_us"
    journal_accounts: ClassVar[tuple[str, str] | None] = (
        "1310 Vendor promotional receivable",
        "4560 Promotional allowances earned",
    )
    # Disputed money is kept off what is owed until it is decided. A matched
    # deduction clears the accrual against the payer's deductions clearing
    # account; a write-off is an expense. Both take the money off the
    # receivable the accrual was booked on.
    journal_outcome_accounts: ClassVar[Mapping[str, tuple[str, str]]] = {
        "disputed": (
            "1315 Vendor promotional receivable in dispute",
            "4565 Promotional allowances in dispute",
        ),
        "deducted": ("1250 Customer deductions clearing", "1310 Vendor promotional receivable"),
        "written_off": ("6450 Deduction write-offs", "1310 Vendor promotional receivable"),
    }
    line_ref_name: ClassVar[str] = "line_no"
    x12_set: ClassVar[str | None] = "810"
    # The file may not name the vendor or the period (else REF*IA, REF*VN or the
    # N1's; BIG-01's quarter): the query may.
    x12_query: ClassVar[tuple[str, ...]] = ("partition_key", "period")
    document_model = PromoDocument
    contract_model = PromoContract
    batch_model = PromoBatch
    screen = Screen.of(_ScreenDocument, _sound)
    settle_decoder = staticmethod(_settle_documents)
    keys_name_document = True  # partition|document_id|... (``shared.domain.keys``)

    def repeated_line(self, document: PromoDocument | _ScreenDocument) -> RepeatedLine | None:
        lines = document.lines
        if len({line.line_no for line in lines}) == len(lines):  # per document at the door
            return None
        return RepeatedLine.find([line.line_no for line in lines], "line_no", "lines")

    def lines(self, document: PromoDocument) -> list[Line]:
        document_id = document.document_id
        partition_key = document.partition_key
        period = document.period
        out: list[Line] = []
        append = out.append
        for line in document.lines:
            tx_date = line.transaction_date.isoformat() if line.transaction_date else None
            item_hash = promo_line_item_hash(line.line_no, line.sku, line.store_id, tx_date)
            key = promo_key(partition_key, document_id, item_hash, line.promo_tier, period)
            # Positional: keyword arguments cost more, and this runs once per line.
            append(Line(document_id, str(line.line_no), key, line.claimed_amount, line))
        return out

    def line_count(self, document: PromoDocument) -> int:
        return len(document.lines)

    line_columns = (
        "period",
        "sku",
        "promo_tier",
        "qualifying_units",
        "store_id",
        "transaction_date",
    )

    def line_cells(self, document: PromoDocument) -> list[tuple[LineCell, ...]]:
        period = document.period
        return [
            (
                period,
                line.sku,
                line.promo_tier,
                line.qualifying_units,
                line.store_id,
                line.transaction_date.isoformat() if line.transaction_date else None,
            )
            for line in document.lines
        ]

    def settle(self, document: PromoDocument, line: Line, contract: PromoContract) -> Settlement:
        promo: PromoLine = line.raw
        units = promo.qualifying_units
        if units < 0:
            raise BusinessError("negative_quantity", f"line {promo.line_no}: negative units")
        rate = contract.tier_rates.get(promo.promo_tier)
        if rate is None:
            raise BusinessError(
                "unknown_promo_tier", f"line {promo.line_no}: tier {promo.promo_tier!r}"
            )
        model = exact_product(units, rate, self.quantum)
        claimed = promo.claimed_amount
        within = exact_distance(claimed, model) <= contract.tolerance
        return Settlement("posted" if within else "disputed", model, claimed)
