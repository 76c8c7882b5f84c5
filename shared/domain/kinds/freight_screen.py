"""``freight_audit``'s screen (``shared/domain/kinds/screen.py``): its documents
read at C speed before Pydantic, at the front door.

A strict subset of ``FreightDocument``: what it accepts, the model accepts
with the same meaning (``tests/unit/test_freight_screen.py`` checks it on
generated documents); anything else goes to the model, which answers. It
matters most for an X12 210 file (docs/api.md#edi-intake), whose invoices
validated by the model would be a large part of its time to a 202
(docs/performance.md).
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

import msgspec

from shared.domain.kinds.ids import sound_ids
from shared.domain.kinds.screen import (
    Screen,
    ScreenDocument,
    ScreenId,
    ScreenStruct,
    ScreenVersion,
    all_plain_money,
    all_plain_quantity,
)

MAX_RAW_PAYLOAD = 512 * 1024 * 1024  # base64 characters, as FreightDocument's


class ScreenLeg(ScreenStruct):
    leg_no: ScreenVersion
    billed_amount: str
    miles: str | None = None
    rate_basis: Literal["mile", "cwt", "unit", "flat"] | None = None
    rated_quantity: str | None = None
    accessorials: Annotated[list[ScreenId], msgspec.Meta(max_length=100)] = []


class ScreenFreightDocument(ScreenDocument):
    document_type: Literal["PDF", "EDI", "XML"]
    legs: Annotated[list[ScreenLeg], msgspec.Meta(min_length=1, max_length=100_000)]
    raw_payload: Annotated[str, msgspec.Meta(max_length=MAX_RAW_PAYLOAD)] | None = None
    correlation_id: ScreenId | None = None


def _sound(document: ScreenFreightDocument) -> bool:
    """What msgspec does not check: the ids' rule, plain decimals in range, a cwt
    leg's quantity (Leg._quantity_for_cwt) and the payload's base64."""
    if not sound_ids(document):
        return False
    legs = document.legs
    if not all_plain_money([leg.billed_amount for leg in legs]):
        return False
    quantities = [q for leg in legs for q in (leg.miles, leg.rated_quantity) if q is not None]
    if not all_plain_quantity(quantities):
        return False
    if any(leg.rate_basis == "cwt" and leg.rated_quantity is None for leg in legs):
        return False
    if document.raw_payload is not None:
        try:
            base64.b64decode(document.raw_payload, validate=True)  # as the model's validator
        except (binascii.Error, ValueError):
            return False
    return True


FREIGHT_SCREEN = Screen.of(ScreenFreightDocument, _sound)
