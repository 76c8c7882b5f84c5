"""Screening documents at C speed before Pydantic (the front door's hot path).

A kind may declare ``screen``: a msgspec decoder of a *strict subset* of its
Pydantic document model. A document the screen accepts is one the model
accepts with the same meaning (money still a plain decimal string, ids within
length and character rules, no unknown fields); anything else, including
valid documents the screen is too strict for (an exponent in an amount, a
date with a time), goes to the model, which gives the answer and the error.
``tests/unit/test_screen.py`` checks the subset property on generated
documents, and the bad-input battery checks the answers over HTTP.
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from shared.money import MONEY_PLACES, QUANTITY_PLACES

# shared.kinds.base.Identifier, with Python's ``\Z`` for the Rust regex's ``$``
# (Python's ``$`` would also match before a final newline).
ScreenId = Annotated[
    str, msgspec.Meta(min_length=1, max_length=128, pattern=r"^[^\x00-\x1f\x7f-\x9f|]+\Z")
]
# shared.money's plain case: at most 12 integer digits, no exponent.
ScreenMoney = Annotated[
    str, msgspec.Meta(pattern=rf"^-?[0-9]{{1,12}}(\.[0-9]{{1,{MONEY_PLACES}}})?\Z")
]
ScreenQuantity = Annotated[
    str, msgspec.Meta(pattern=rf"^-?[0-9]{{1,12}}(\.[0-9]{{1,{QUANTITY_PLACES}}})?\Z")
]
ScreenVersion = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]


class ScreenStruct(msgspec.Struct, forbid_unknown_fields=True):
    """Unknown fields are refused, as ``WireModel`` refuses them."""


class ScreenDocument(ScreenStruct):
    """``shared.kinds.base.Document``'s required fields (a kind's screen adds its
    own, and the optional ``correlation_id: ScreenId | None = None`` last)."""

    document_id: ScreenId
    partition_key: ScreenId
    contract_version: ScreenVersion


def screened(struct: type[ScreenDocument]) -> msgspec.json.Decoder[ScreenDocument]:
    return msgspec.json.Decoder(struct)


def screen(decoder: msgspec.json.Decoder[ScreenDocument], raw: bytes) -> ScreenDocument | None:
    """The screened document, or None: then the Pydantic model decides."""
    try:
        return decoder.decode(raw)
    except msgspec.MsgspecError:
        return None
