"""Screening documents at C speed before Pydantic (the front door's hot path).

A kind may declare ``screen``: a :class:`Screen` that accepts a *strict
subset* of its Pydantic document model. A document the screen accepts is one
the model accepts with the same meaning (money a plain decimal string, ids
within length and character rules, no unknown fields); anything else,
including valid documents the screen is too strict for (an exponent or
trailing zeros past the places in an amount, a backslash in an id), goes to
the model, which gives the answer and the error. Dates agree by construction:
msgspec reads a ``date`` from ``YYYY-MM-DD`` only, as ``kinds/dates.IsoDate``
does. ``tests/unit/test_screen.py`` checks the subset property on generated
documents, decimals of any length and date-like values; the bad-input
battery checks the answers over HTTP.

Why not msgspec's own ``pattern`` constraints: they cost several times the
whole decode (docs/performance.md). Instead the raw bytes are checked once
for what no identifier may hold, and the decimals with one compiled regex.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Generic, TypeVar

import msgspec

from shared.domain.money import MONEY_PLACES, PLAIN_DECIMAL, QUANTITY_PLACES

# shared.domain.kinds.base.Identifier's length rule; its character rule (no C0/C1
# control, DEL or "|") is checked on the raw bytes by ``_clean`` (a document's ids,
# by a kind's check: ``ids.sound_ids``).
ScreenId = Annotated[str, msgspec.Meta(min_length=1, max_length=128)]
ScreenVersion = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]

# The money parser's own fast case (at most 12 integer digits, no exponent).
plain_money = PLAIN_DECIMAL[MONEY_PLACES].fullmatch
plain_quantity = PLAIN_DECIMAL[QUANTITY_PLACES].fullmatch


def _all_plain(places: int) -> Callable[[list[str]], bool]:
    """``all(PLAIN_DECIMAL[places].fullmatch(v) for v in values)``, for less: one
    regex call per list instead of one per value (a call costs
    more than matching a short number). The values are joined with commas, so a
    value holding a comma (never plain) must be refused by counting them. The
    quantifiers are possessive: no input needs backtracking here, and without it
    the engine runs twice as fast."""
    item = rf"-?+[0-9]{{1,12}}+(?:\.[0-9]{{1,{places}}}+)?+"
    whole = re.compile(rf"{item}(?:,{item})*+").fullmatch

    def check(values: list[str]) -> bool:
        if not values:
            return True
        joined = ",".join(values)
        return joined.count(",") == len(values) - 1 and whole(joined) is not None

    return check


all_plain_money = _all_plain(MONEY_PLACES)
all_plain_quantity = _all_plain(QUANTITY_PLACES)

_C1 = re.compile(rb"\xc2[\x80-\x9f]")  # U+0080-U+009F in UTF-8


def clean(raw: bytes) -> bool:
    """No byte that could put a forbidden character in a string. A backslash
    (any JSON escape: ``\\u0000``, ``\\u007c``...) sends the document to the model;
    raw C0 controls inside strings are invalid JSON, which the decoder refuses.
    What holds for some bytes holds for every slice of them: the front door
    checks a whole received part once, not each of its documents."""
    if b"\\" in raw or b"|" in raw or b"\x7f" in raw:
        return False
    return b"\xc2" not in raw or _C1.search(raw) is None


class ScreenStruct(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """Unknown fields are refused, as ``WireModel`` refuses them. Decoded
    structs never form reference cycles, so the garbage collector need not
    track them (10% off the decode of a line)."""


class ScreenDocument(ScreenStruct):
    """``shared.domain.kinds.base.Document``'s required fields (a kind's screen adds its
    own, and the optional ``correlation_id: ScreenId | None = None`` last)."""

    document_id: ScreenId
    partition_key: ScreenId
    contract_version: ScreenVersion


D = TypeVar("D")  # a screen struct, or a list of them (a chunk)


@dataclass(frozen=True)
class Screen(Generic[D]):
    """A decoder of a kind's screen struct, and the checks msgspec does not make
    (its decimal strings): both must pass."""

    decoder: msgspec.json.Decoder[D]
    check: Callable[[D], bool]

    @classmethod
    def of(cls, struct: type[D], check: Callable[[D], bool]) -> Screen[D]:
        return cls(msgspec.json.Decoder(struct), check)


def screen(kind_screen: Screen[D], raw: bytes) -> D | None:
    """The screened document, or None: then the Pydantic model decides."""
    return screen_clean(kind_screen, raw) if clean(raw) else None


def screen_clean(kind_screen: Screen[D], raw: bytes) -> D | None:
    """``screen`` of bytes already found ``clean`` (or a slice of such bytes)."""
    try:
        document = kind_screen.decoder.decode(raw)
    except msgspec.MsgspecError:
        return None
    return document if kind_screen.check(document) else None
