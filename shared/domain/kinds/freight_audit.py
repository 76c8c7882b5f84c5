"""``freight_audit``: a carrier's invoice audited leg by leg against its rate contract.

Per leg, rounded once to 0.01 half up (docs/architecture.md#freight-audits):
    gross = rated_quantity * rates[rate_basis]
    net   = gross * (1 - discount_pct)
    model = net + fuel_surcharge * (net or gross, per fuel_basis) + sum(accessorials)
each accessorial a flat price or ``rate * miles``. Posted when
abs(billed - model) <= tolerance, else disputed. The declared document_type is
checked against the raw payload's content; a mislabel is corrected and noted.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from decimal import Decimal
from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic.config import JsonDict

from shared.domain.keys import sha256_hex
from shared.domain.kinds.base import (
    MAX_RAW_PAYLOAD,
    Contract,
    Direction,
    Document,
    Fraction,
    Identifier,
    Kind,
    Line,
    LineCell,
    Ordinal,
    Price,
    Rate,
    RepeatedLine,
    Settlement,
    WireModel,
    contract_invalid,
    price_or,
)
from shared.domain.kinds.freight_screen import FREIGHT_SCREEN, ScreenFreightDocument
from shared.domain.money import CENT, Money, Quantity, exact_arithmetic, exact_distance, quantize
from shared.errors import BusinessError

DocumentType = Literal["PDF", "EDI", "XML"]
RateBasis = Literal["mile", "cwt", "unit", "flat"]


# _quantity_for_cwt, as the published schema says it.
_CWT_NEEDS_QUANTITY: JsonDict = {
    "anyOf": [
        {
            "properties": {"rate_basis": {"const": "cwt"}, "rated_quantity": {"type": "string"}},
            "required": ["rate_basis", "rated_quantity"],
        },
        {"properties": {"rate_basis": {"enum": ["mile", "unit", "flat", None]}}},
    ]
}
# What base64.b64decode(validate=True) reads (published only: a regex over up to
# 512 MiB is the validator's job, not the schema's).
_BASE64 = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


class Leg(WireModel):
    model_config = ConfigDict(json_schema_extra=_CWT_NEEDS_QUANTITY)  # merged with WireModel's

    leg_no: Ordinal
    miles: Quantity | None = None
    rate_basis: RateBasis | None = None
    rated_quantity: Quantity | None = None
    accessorials: list[Identifier] = Field(default_factory=list, max_length=100)
    billed_amount: Money

    @model_validator(mode="after")
    def _quantity_for_cwt(self) -> Leg:
        if self.rate_basis == "cwt" and self.rated_quantity is None:
            raise ValueError("a cwt-rated leg needs rated_quantity (hundredweight)")
        return self


class FreightDocument(Document):
    document_type: DocumentType
    raw_payload: (
        Annotated[str, Field(max_length=MAX_RAW_PAYLOAD, json_schema_extra={"pattern": _BASE64})]
        | None
    ) = None
    legs: list[Leg] = Field(min_length=1, max_length=100_000)

    @field_validator("raw_payload")
    @classmethod
    def _base64(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                raise ValueError("raw_payload must be base64") from None
        return value


class FreightBatch(WireModel):
    kind: Literal["freight_audit"]
    documents: list[FreightDocument] = Field(min_length=1)


class PerMile(WireModel):
    per: Literal["mile"]
    rate: Rate


Accessorial = Annotated[Price | PerMile, price_or(PerMile)]


# _has_a_rate, as the published schema says it (openapi.yaml): a rate per mile
# (and no other rates.mile), or some rates and no rate per mile.
_A_RATE: JsonDict = {
    "anyOf": [
        {
            "properties": {
                "rate_per_mile": {"type": "string"},
                "rates": {"not": {"required": ["mile"]}},
            },
            "required": ["rate_per_mile"],
        },
        {
            "properties": {"rate_per_mile": {"type": "null"}, "rates": {"minProperties": 1}},
            "required": ["rates"],
        },
    ]
}


class FreightContract(Contract):
    model_config = ConfigDict(json_schema_extra=_A_RATE)  # merged with WireModel's

    rate_per_mile: Rate | None = None
    # Validated when absent too, to refuse a contract with no rate at all.
    rates: dict[RateBasis, Rate] = Field(default_factory=dict, validate_default=True)
    fuel_surcharge: Rate = Decimal(0)
    accessorials: dict[Identifier, Accessorial] = Field(default_factory=dict)
    tolerance: Price
    discount_pct: Fraction = Decimal(0)
    fuel_basis: Literal["net", "gross"] = "net"

    @field_validator("rates")
    @classmethod
    def _has_a_rate(cls, rates: dict[str, Decimal], info: ValidationInfo) -> dict[str, Decimal]:
        # A rate_per_mile that was refused is not in info.data: its own error says it.
        if not rates and "rate_per_mile" in info.data and info.data["rate_per_mile"] is None:
            raise contract_invalid("is empty, and there is no rate_per_mile to price with")
        return rates

    @model_validator(mode="after")
    def _rates_agree(self) -> FreightContract:
        if (
            self.rate_per_mile is not None
            and "mile" in self.rates
            and self.rates["mile"] != self.rate_per_mile
        ):
            raise ValueError("rate_per_mile and rates.mile disagree")
        return self

    def rate_for(self, basis: RateBasis) -> Decimal | None:
        if basis == "mile" and self.rate_per_mile is not None:
            return self.rate_per_mile
        return self.rates.get(basis)


def sniff_document_type(raw: bytes) -> DocumentType | None:
    """What the payload is by content: ``%PDF``, an X12 ``ISA``, or XML."""
    head = raw[:1024].lstrip(b"\xef\xbb\xbf").lstrip()
    if head.startswith(b"%PDF"):
        return "PDF"
    if head.startswith(b"ISA"):
        return "EDI"
    if head.startswith(b"<"):
        return "XML"
    return None


class FreightAudit(Kind[FreightDocument, FreightContract]):
    name: ClassVar[str] = "freight_audit"
    quantum: ClassVar[Decimal] = CENT
    partition_noun: ClassVar[str] = "carrier"
    direction: ClassVar[Direction | None] = "owed_by_us"
    journal_accounts: ClassVar[tuple[str, str] | None] = (
        "6110 Freight expense",
        "2110 Freight payable",
    )
    # A disputed invoice's money is kept off what is payable until it is decided.
    journal_outcome_accounts: ClassVar[Mapping[str, tuple[str, str]]] = {
        "disputed": ("6115 Freight expense in dispute", "2115 Freight payable in dispute"),
    }
    line_ref_name: ClassVar[str] = "leg_no"
    x12_set: ClassVar[str | None] = "210"
    # No ``x12_query``: a 210's partition is its carrier (B3-11), and it has no period.
    x12_fast_path: ClassVar[bool] = True  # most 210s are plain (``freight_fast``)
    document_model = FreightDocument
    contract_model = FreightContract
    batch_model = FreightBatch
    screen = FREIGHT_SCREEN
    keys_name_document = True  # partition|document_id|... (``shared.domain.keys``)

    def repeated_line(
        self, document: FreightDocument | ScreenFreightDocument
    ) -> RepeatedLine | None:
        return RepeatedLine.find([leg.leg_no for leg in document.legs], "leg_no", "legs")

    def lines(self, document: FreightDocument) -> list[Line]:
        return [
            Line(
                document_id=document.document_id,
                line_ref=str(leg.leg_no),
                reconciliation_key=sha256_hex(
                    document.partition_key, document.document_id, leg.leg_no
                ),
                claimed_amount=leg.billed_amount,
                raw=leg,
            )
            for leg in document.legs
        ]

    def line_count(self, document: FreightDocument | ScreenFreightDocument) -> int:
        return len(document.legs)

    # The leg is the line's line_ref; the billed amount its claimed_amount.
    line_columns = ("document_type", "miles", "rate_basis", "rated_quantity", "accessorials")

    def line_cells(self, document: FreightDocument) -> list[tuple[LineCell, ...]]:
        return [
            (
                document.document_type,
                leg.miles,
                leg.rate_basis,
                leg.rated_quantity,
                " ".join(leg.accessorials) or None,
            )
            for leg in document.legs
        ]

    def settle(
        self, document: FreightDocument, line: Line, contract: FreightContract
    ) -> Settlement:
        leg: Leg = line.raw
        with exact_arithmetic():
            model = quantize(leg_charge(leg, contract), self.quantum)
        within = exact_distance(leg.billed_amount, model) <= contract.tolerance
        return Settlement(
            outcome="posted" if within else "disputed",
            amount=model,
            claimed_amount=leg.billed_amount,
            note="document_type_corrected" if corrected_type(document) else None,
        )


def corrected_type(document: FreightDocument) -> DocumentType | None:
    """The sniffed type when it differs from the declared one, else None."""
    if document.raw_payload is None:
        return None
    sniffed = sniff_document_type(base64.b64decode(document.raw_payload[:1400]))
    return sniffed if sniffed is not None and sniffed != document.document_type else None


def leg_charge(leg: Leg, contract: FreightContract) -> Decimal:
    """The unrounded expected charge of one leg (docs/architecture.md#freight-audits)."""
    basis: RateBasis = leg.rate_basis or "mile"
    rate = contract.rate_for(basis)
    if rate is None:
        raise BusinessError("unknown_rate_basis", f"leg {leg.leg_no}: no {basis} rate in contract")
    quantity = _rated_quantity(leg, basis)
    gross = quantity * rate
    net = gross * (1 - contract.discount_pct)
    fuel = contract.fuel_surcharge * (net if contract.fuel_basis == "net" else gross)
    return (
        net
        + fuel
        + sum((_accessorial(leg, code, contract) for code in leg.accessorials), Decimal(0))
    )


def _rated_quantity(leg: Leg, basis: RateBasis) -> Decimal:
    if leg.rated_quantity is not None and basis != "flat":
        quantity = leg.rated_quantity
    elif basis == "mile":
        if leg.miles is None:
            raise BusinessError("missing_quantity", f"leg {leg.leg_no}: no miles to rate")
        quantity = leg.miles
    else:
        quantity = Decimal(1)  # unit is one when not given; flat is always one
    if quantity < 0:
        raise BusinessError("negative_quantity", f"leg {leg.leg_no}: negative quantity")
    return quantity


def _accessorial(leg: Leg, code: str, contract: FreightContract) -> Decimal:
    price = contract.accessorials.get(code)
    if price is None:
        raise BusinessError("unknown_accessorial", f"leg {leg.leg_no}: accessorial {code!r}")
    if isinstance(price, PerMile):
        if leg.miles is None:
            raise BusinessError("missing_quantity", f"leg {leg.leg_no}: {code} is per mile")
        if leg.miles < 0:
            raise BusinessError("negative_quantity", f"leg {leg.leg_no}: negative miles")
        return price.rate * leg.miles
    return price
