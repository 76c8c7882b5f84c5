"""A remittance's body into what the store records
(docs/api.md#remittances-and-deductions): an X12 820 read by the §10 reader
(``shared.domain.remittances.x12_820``), or the JSON shape; its payer's
profile found; its partition checked against the key's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Annotated

from pydantic import Field, ValidationError

from services.api.errors import ApiError
from shared.adapters.db.edi.partners import Partner
from shared.config.settings import ProducerKey
from shared.domain.kinds.base import Identifier, WireModel
from shared.domain.kinds.dates import IsoDate
from shared.domain.money import Money
from shared.domain.remittances.matching import MatchingRefused
from shared.domain.remittances.model import Adjustment, Code, Currency, Line, Payer, Remittance
from shared.domain.remittances.profile import Profile, tolerance_of

_MANY = 1_000_000


class JsonLine(WireModel):
    reference: Identifier
    qualifier: Code | None = None
    paid: Money
    invoiced: Money | None = None
    discount: Money | None = None
    adjustments: tuple[Adjustment, ...] = Field(default=(), max_length=_MANY)


class JsonRemittance(WireModel):
    """``POST /v1/remittances`` as JSON: money as strings."""

    partition_key: Identifier
    payer: Identifier | None = None
    trace: Identifier
    paid_total: Money
    currency: Currency
    paid_at: IsoDate
    lines: tuple[JsonLine, ...] = Field(default=(), max_length=_MANY)
    adjustments: tuple[Adjustment, ...] = Field(default=(), max_length=_MANY)

    def remittance(self) -> Remittance:
        return Remittance(
            payer=Payer(id=self.payer or self.partition_key),
            trace=self.trace,
            paid_total=self.paid_total,
            currency=self.currency,
            paid_at=self.paid_at,
            lines=tuple(
                Line(
                    reference=line.reference,
                    qualifier=line.qualifier,
                    paid=line.paid,
                    invoiced=line.invoiced,
                    discount=line.discount,
                    adjustments=line.adjustments,
                )
                for line in self.lines
            ),
            adjustments=self.adjustments,
        )


def parse_json(body: bytes) -> JsonRemittance:
    try:
        return JsonRemittance.model_validate_json(body)
    except ValidationError as exc:
        errors = exc.errors(include_url=False, include_input=False)
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ApiError(
            422,
            "remittance_invalid",
            f"{where}: {first['msg']}" if where else first["msg"],
            [
                {"loc": [str(p) for p in e["loc"]], "message": e["msg"], "type": e["type"]}
                for e in errors[:100]
            ],
        ) from None


def profile_of(partner: Partner | None, partition_key: str) -> Profile:
    """The profile a remittance is matched under (the defaults without a partner)."""
    if partner is None:
        return Profile(partition_key)
    try:
        return Profile(
            partition_key=partition_key,
            tolerance=tolerance_of(partner.tolerance),
            reasons=dict(partner.deduction_reasons or {}),
            window_days=partner.dispute_window_days or 30,
            partner=(partner.sender_qualifier, partner.sender_id),
        )
    except MatchingRefused as exc:  # checked when the profile was put: stored before 0031?
        raise ApiError(
            409, "partner_profile_invalid", f"the payer's profile cannot match: {exc}"
        ) from None


def check_partition(key: ProducerKey, partition_key: str) -> None:
    if not key.may_submit_for(partition_key):
        raise ApiError(
            403,
            "partition_not_allowed",
            f"key {key.key_id} may not submit for 1 partition(s)",
            [{"partition_key": partition_key}],
        )


Today = Callable[[], dt.datetime]
ContentType = Annotated[str, "the body's media type"]
