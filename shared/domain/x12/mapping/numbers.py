"""One transaction set's values, read into our wire values with each problem located.

X12 numbers (docs/architecture.md#edi-intake): amounts (B3-07, L1-04, L3-05,
SAC-05, TDS) are N2, two implied decimals and an optional ``-`` (``65940`` is
659.40, a ``.`` in one is ``edi_bad_number``); rates and quantities are R
(``.07``, ``-.62``, ``11.8``).
A value that is well formed but does not fit our models (an identifier over
128 characters, more decimal places than a Money holds) is ``edi_unmappable``
here, with the same limits as ``shared.domain.kinds``, so a mapped document
always validates.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Literal

from shared.domain.kinds.ids import address_problem, refusal_message
from shared.domain.money import (
    MONEY_PLACES,
    PLAIN_DECIMAL,
    QUANTITY_PLACES,
    exact_arithmetic,
    parse_decimal,
)
from shared.domain.x12.model import Segment, TransactionSet
from shared.domain.x12.problems import Problems

N2 = re.compile(r"-?[0-9]{1,18}")
R = re.compile(r"-?(?:[0-9]{1,18}(?:\.[0-9]{0,18})?|\.[0-9]{1,18})")
# shared.domain.kinds.base.Identifier: 1-128 characters, no control characters, no "|".
_IDENTIFIER = re.compile(r"[^\x00-\x1f\x7f-\x9f|]{1,128}")


def n2(text: str) -> Decimal | None:
    """An N2 element's value (None when it is not one)."""
    text = text.strip()
    return Decimal(text).scaleb(-2) if N2.fullmatch(text) else None


def r(text: str) -> Decimal | None:
    """An R element's value (None when it is not one)."""
    text = text.strip()
    return Decimal(text) if R.fullmatch(text) else None


def is_identifier(value: str) -> bool:
    # A printable string holds no control character (they are all unprintable): the
    # common case, decided without the regex; the regex decides the rest (a no-break
    # space is unprintable but allowed).
    if 0 < len(value) <= 128 and value.isprintable() and "|" not in value:
        return True
    return _IDENTIFIER.fullmatch(value) is not None


def fits(value: Decimal, places: int) -> str | None:
    """``value`` as our JSON writes it when a Money (4 places) or Quantity (6) holds it."""
    text = wire(value)
    if PLAIN_DECIMAL[places].fullmatch(text):  # in range by construction, as the models say
        return text
    try:
        parse_decimal(text, places)
    except ValueError:  # DecimalOutOfRange is one
        return None
    return text


def wire(value: Decimal) -> str:
    """A decimal as our JSON writes it: plain notation, the digits it has."""
    return format(value, "f")


def product(a: Decimal, b: Decimal) -> Decimal:
    with exact_arithmetic():  # at most 36 digits: exact, never rounded
        return a * b


class SetValues:
    """The values of one transaction set; ``ok`` until a problem is found."""

    def __init__(self, problems: Problems, transaction_set: TransactionSet) -> None:
        self.problems = problems
        self.st = transaction_set.st
        self.control = transaction_set.control_number.strip()
        self.ok = True

    def fail(
        self, code: str, message: str, segment: Segment | None = None, element: int | None = None
    ) -> None:
        self.ok = False
        self.problems.at(code, message, segment or self.st, element, self.control)

    def unmappable(
        self, message: str, segment: Segment | None = None, element: int | None = None
    ) -> None:
        self.fail("edi_unmappable", message, segment, element)

    def amount(self, segment: Segment, element: int, what: str, required: bool) -> Decimal | None:
        """An N2 element; None when it is empty (a problem when ``required``) or bad."""
        text = segment.get(element)
        if not text.strip():
            if required:
                self.unmappable(f"{what} is empty", segment, element)
            return None
        value = n2(text)
        if value is None:
            self.fail(
                "edi_bad_number",
                f"{what} {text.strip()[:20]!r} is not an N2 amount (digits, two implied "
                "decimals, no decimal point)",
                segment,
                element,
            )
        return value

    def decimal(self, segment: Segment, element: int, what: str) -> Decimal | None:
        """An R element; None when it is empty or bad (then a problem)."""
        text = segment.get(element)
        if not text.strip():
            return None
        value = r(text)
        if value is None:
            message = f"{what} {text.strip()[:20]!r} is not a decimal number"
            self.fail("edi_bad_number", message, segment, element)
        return value

    def identifier(
        self, value: str, what: str, segment: Segment | None = None, element: int | None = None
    ) -> str:
        if not value:
            self.unmappable(f"{what} is empty", segment, element)
        elif not _IDENTIFIER.fullmatch(value):
            self.unmappable(
                f"{what} {value[:40]!r} is not an identifier (1-128 characters, no control "
                "characters, no '|')",
                segment,
                element,
            )
        return value

    def address(
        self,
        value: str,
        field: Literal["partition_key", "document_id"],
        what: str,
        segment: Segment | None = None,
        element: int | None = None,
    ) -> str:
        """A partition_key or document_id: the rule a JSON document's follow
        (``ids.address_problem``), refused here at its segment and element, its
        message naming the JSON door's code."""
        problem = address_problem(value) if value else None
        if not value:
            self.unmappable(f"{what} is empty", segment, element)
        elif problem is not None:
            why = refusal_message(field, value, problem)
            self.unmappable(f"{what}: {why} ({field}_invalid)", segment, element)
        return value

    def money(self, value: Decimal, what: str, segment: Segment, element: int) -> str:
        return self._fits(value, MONEY_PLACES, what, segment, element)

    def quantity(self, value: Decimal, what: str, segment: Segment, element: int) -> str:
        return self._fits(value, QUANTITY_PLACES, what, segment, element)

    def _fits(self, value: Decimal, places: int, what: str, segment: Segment, element: int) -> str:
        text = wire(value)
        try:
            parse_decimal(text, places)
        except ValueError as exc:  # DecimalOutOfRange is one
            self.unmappable(f"{what} {text[:30]}: {exc}", segment, element)
        return text
