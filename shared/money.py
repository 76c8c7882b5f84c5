"""Exact decimal parsing and rounding for money and quantities (SPEC §3, §9).

On the wire every money or quantity field is a JSON string. Parsing refuses
floats, NaN, Infinity and values outside the ledger column; rounding is
``ROUND_HALF_UP`` at a settlement kind's quantum, applied once at the end.
"""

from __future__ import annotations

import re
from contextlib import AbstractContextManager
from decimal import (
    ROUND_HALF_UP,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    localcontext,
)
from typing import Annotated, Any

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

MONEY_PLACES = 4
QUANTITY_PLACES = 6
ABS_LIMIT = Decimal(10) ** 12

CENT = Decimal("0.01")
BASIS = Decimal("0.0001")
ZERO = Decimal(0)

# Plain decimal notation (ASCII digits) with an optional exponent; no spaces,
# no "NaN"/"Infinity", no "+5", ".5" or "5.".
_DECIMAL_TEXT = re.compile(r"-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?")
PLAIN_DECIMAL = {
    places: re.compile(rf"-?[0-9]{{1,12}}(\.[0-9]{{1,{places}}})?")
    for places in (MONEY_PLACES, QUANTITY_PLACES)
}


class DecimalOutOfRange(ValueError):
    """The value is a number but does not fit the column (places or magnitude)."""


def parse_decimal(text: str, places: int) -> Decimal:
    """Parse ``text`` into a Decimal holding at most ``places`` decimal places.

    Raises ``ValueError`` for text that is not a plain finite decimal and
    ``DecimalOutOfRange`` when it has more places than allowed or its absolute
    value is not below 10**12.
    """
    # The common case, checked by one regex: at most 12 integer digits and
    # ``places`` decimals is in range by construction.
    if PLAIN_DECIMAL[places].fullmatch(text):
        return Decimal(text)
    if not _DECIMAL_TEXT.fullmatch(text):
        raise ValueError("not a decimal number")
    if len(text) > 64:  # a number, but never one the column can hold
        raise DecimalOutOfRange("too many digits")
    # An exponent like 1e999999 is range-checked before Decimal materialises it.
    mantissa, _, exponent = text.lower().partition("e")
    if exponent and abs(int(exponent)) > 40:
        raise DecimalOutOfRange("exponent out of range")
    try:
        value = Decimal(text)
    except InvalidOperation as exc:  # pragma: no cover - the regex already refused it
        raise ValueError("not a decimal number") from exc
    if abs(value) >= ABS_LIMIT:
        raise DecimalOutOfRange("absolute value must be below 10^12")
    value_exp = value.normalize().as_tuple().exponent
    if isinstance(value_exp, int) and -value_exp > places:
        raise DecimalOutOfRange(f"at most {places} decimal places")
    return value


# Wide enough for any product of wire values (12 integer digits, 6 places, a
# few factors) to be exact, so the only rounding is the final quantize.
_EXACT = Context(prec=80, rounding=ROUND_HALF_UP, traps=[InvalidOperation, DivisionByZero])


def exact_arithmetic() -> AbstractContextManager[Context]:
    """``with exact_arithmetic():`` settlement math, then round once."""
    return localcontext(_EXACT)


# Bound once: these run per line, and each attribute lookup is a dict probe.
_quantize, _multiply, _subtract = _EXACT.quantize, _EXACT.multiply, _EXACT.subtract


def exact_product(a: Decimal, b: Decimal, quantum: Decimal) -> Decimal:
    """``a * b`` rounded once, half up, to ``quantum``: the one-multiplication model
    without entering a context (this is the per-line hot path of promo accruals)."""
    return _quantize(_multiply(a, b), quantum)


def exact_distance(a: Decimal, b: Decimal) -> Decimal:
    """``abs(a - b)``, exact (never rounded to the ambient context's precision)."""
    return _subtract(a, b).copy_abs()


def quantize(value: Decimal, quantum: Decimal) -> Decimal:
    """Round once, half up, to ``quantum`` (e.g. ``CENT``)."""
    return value.quantize(quantum, rounding=ROUND_HALF_UP)


def _validator(places: int, what: str) -> Any:
    plain = PLAIN_DECIMAL[places].fullmatch

    def validate(raw: Any) -> Decimal:
        # Hot path (two calls per line at the front door): a plain string in range.
        if type(raw) is str and plain(raw):
            return Decimal(raw)
        if isinstance(raw, Decimal):  # already parsed (internal round trips)
            return raw
        if not isinstance(raw, str):
            raise PydanticCustomError(
                "decimal_must_be_string",
                f'{what} must be a JSON string such as "16.65", not a JSON number',
            )
        try:
            return parse_decimal(raw, places)
        except DecimalOutOfRange as exc:
            raise PydanticCustomError(
                "decimal_out_of_range", f"{what} out of range: {exc}"
            ) from None
        except ValueError:
            raise PydanticCustomError(
                "decimal_invalid", f"{what} must be a plain finite decimal string"
            ) from None

    return PlainValidator(validate)


_SERIALIZE = PlainSerializer(lambda d: format(d, "f"), return_type=str)

Money = Annotated[
    Decimal,
    _validator(MONEY_PLACES, "money"),
    _SERIALIZE,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^-?[0-9]+(\.[0-9]{1,4})?([eE][+-]?[0-9]+)?$",
            "examples": ["16.65"],
        }
    ),
]
Quantity = Annotated[
    Decimal,
    _validator(QUANTITY_PLACES, "quantity"),
    _SERIALIZE,
    WithJsonSchema(
        {
            "type": "string",
            "pattern": r"^-?[0-9]+(\.[0-9]{1,6})?([eE][+-]?[0-9]+)?$",
            "examples": ["37"],
        }
    ),
]


def to_wire(value: Decimal | None) -> str | None:
    """Money on the wire is a string in plain notation (never an exponent)."""
    return None if value is None else format(value, "f")
