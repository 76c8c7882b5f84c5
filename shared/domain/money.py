"""Exact decimal parsing and rounding for money and quantities (docs/api.md#errors,
docs/architecture.md#decimal-limits).

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
    Inexact,
    InvalidOperation,
    Overflow,
    Rounded,
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
# Money is in one currency, ISO 4217's three capital letters: a contract's, or
# SETTLEQ_CURRENCY's where the contract names none. Amounts in two are never added.
CURRENCY = r"^[A-Z]{3}$"
DEFAULT_CURRENCY = "USD"

# Plain decimal notation (ASCII digits) with an optional exponent; no spaces,
# no "NaN"/"Infinity", no "+5", ".5" or "5.". Groups: sign, integer digits,
# fraction digits, exponent.
_DECIMAL_TEXT = re.compile(r"(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")
PLAIN_DECIMAL = {
    places: re.compile(rf"-?[0-9]{{1,12}}(\.[0-9]{{1,{places}}})?")
    for places in (MONEY_PLACES, QUANTITY_PLACES)
}
# An exponent of more digits than this moves the point further than any body
# can hold digits to move it back (a body is at most a few GiB): the value is
# zero or out of range whatever its digits, and ``int()`` never sees it.
_EXPONENT_DIGITS = 12


class DecimalOutOfRange(ValueError):
    """The value is a number but does not fit the column (places or magnitude)."""


def parse_decimal(text: str, places: int) -> Decimal:
    """Parse ``text`` into a Decimal equal to the value it writes, with at most
    ``places`` decimal places.

    Places and magnitude are judged on the exact digits sent; nothing is
    rounded, ever (docs/architecture.md#decimal-limits). Trailing zeros after the point are not
    places: "12.3400000" is 12.34 (at most ``places`` of them are kept, so the result's
    exponent stays small), "1.30000000000000000000000000001" has 29 places.

    Raises ``ValueError`` for text that is not a plain finite decimal and
    ``DecimalOutOfRange`` when it has more places than allowed or its absolute
    value is not below 10**12.
    """
    # The common case, checked by one regex: at most 12 integer digits and
    # ``places`` decimals is in range by construction.
    if PLAIN_DECIMAL[places].fullmatch(text):
        return Decimal(text)
    match = _DECIMAL_TEXT.fullmatch(text)
    if match is None:
        raise ValueError("not a decimal number")
    sign, whole, fraction, exponent_text = match.groups("")
    # value = sign * int(whole + fraction) * 10**sent_exponent, in Python ints and
    # strings: exact at any length, and no Decimal context is involved.
    exponent_text = exponent_text.lstrip("+")
    exponent_sign = "-" if exponent_text.startswith("-") else ""
    exponent_digits = exponent_text.lstrip("-").lstrip("0") or "0"
    digits = (whole + fraction).lstrip("0")
    if len(exponent_digits) > _EXPONENT_DIGITS:
        if digits:
            raise DecimalOutOfRange("exponent out of range")
        return Decimal(f"{sign}0E-{places}" if exponent_sign else f"{sign}0")
    return _judged(sign, digits, int(exponent_sign + exponent_digits) - len(fraction), places)


def _judged(sign: str, digits: str, sent_exponent: int, places: int) -> Decimal:
    """The value ``sign digits * 10**sent_exponent`` (``digits`` without leading
    zeros) as a Decimal, or ``DecimalOutOfRange``."""
    significant = digits.rstrip("0")
    lowest = sent_exponent + len(digits) - len(significant)  # of the last nonzero digit
    if significant:
        if -lowest > places:
            raise DecimalOutOfRange(f"at most {places} decimal places")
        if len(significant) + lowest > 12:  # the first digit is at 10**12 or above
            raise DecimalOutOfRange("absolute value must be below 10^12")
    # The sender's exponent, kept within [-places, 0] (a zero's too): exact,
    # since the value has no nonzero digit below 10**-places.
    target = min(max(sent_exponent, -places), 0)
    if not significant:
        return Decimal(f"{sign}0E{target}")
    return Decimal(f"{sign}{significant}{'0' * (lowest - target)}E{target}")


def check_decimal(value: Decimal, places: int) -> Decimal:
    """A Decimal handed in already parsed, judged as ``parse_decimal`` judges text."""
    negative, digit_tuple, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError("not a finite decimal")
    digits = "".join(map(str, digit_tuple)).lstrip("0")
    return _judged("-" if negative else "", digits, exponent, places)


# Settlement arithmetic is exact by construction, and loudly so. A wire value
# has at most 18 significant digits (12 integer digits, 6 places:
# docs/architecture.md#decimal-limits), so the longest intermediate of any kind's model, as
# coefficient digits, is:
#   promo   units * rate                                    18 + 18 = 36
#   recipe  sum of <= 100,000 (bom) qty * price             36 + 5 = 41
#   freight fuel * (quantity * rate * (1 - discount))  18 + 36 + 19 = 73
#           + net + sum of <= 100 accessorials (<= 36 digits each):
#           < 2 * 10**48 at 24 places                       = 73
# so a precision of 80 holds every product and sum exactly (and the quantized
# result, at most 49 + 2 digits), and _EXACT traps Inexact and Rounded: a
# rounding before the final quantize would raise, never pass silently. Inputs
# are bounded where they enter (the Money and Quantity validators at the front
# door, at contract publication and again when a worker reads a chunk or a
# contract), so the traps are unreachable for anything a producer can send;
# ``tests/unit/test_exact_settlement.py`` settles every kind's extreme inputs.
# (An amount that large is then ``amount_out_of_range``, shared/domain/pipeline/settlement.py.)
PRECISION = 80
_EXACT = Context(
    prec=PRECISION,
    rounding=ROUND_HALF_UP,
    traps=[InvalidOperation, DivisionByZero, Overflow, Inexact, Rounded],
)
# The one rounding: half up, at a kind's quantum (Inexact and Rounded are what
# it is for, so they are not traps here).
_ROUND = Context(prec=PRECISION, rounding=ROUND_HALF_UP, traps=[InvalidOperation, Overflow])


def exact_arithmetic() -> AbstractContextManager[Context]:
    """``with exact_arithmetic():`` settlement math (any rounding raises), then
    ``quantize`` once."""
    return localcontext(_EXACT)


# Bound once: these run per line, and each attribute lookup is a dict probe.
_multiply, _subtract, _quantize = _EXACT.multiply, _EXACT.subtract, _ROUND.quantize


def exact_product(a: Decimal, b: Decimal, quantum: Decimal) -> Decimal:
    """``a * b`` rounded once, half up, to ``quantum``: the one-multiplication model
    without entering a context (this is the per-line hot path of promo accruals)."""
    return _quantize(_multiply(a, b), quantum)


def exact_distance(a: Decimal, b: Decimal) -> Decimal:
    """``abs(a - b)``, exact (never rounded to the ambient context's precision)."""
    return _subtract(a, b).copy_abs()


def quantize(value: Decimal, quantum: Decimal) -> Decimal:
    """Round once, half up, to ``quantum`` (e.g. ``CENT``), whatever the ambient context."""
    return _quantize(value, quantum)


def at_quantum(value: Decimal, quantum: Decimal) -> Decimal:
    """``value`` with its kind's places for a person to read (``-2.5000`` is
    ``-2.50`` at a cent), never rounded: one with more places than the quantum
    keeps them (``1.2345`` stays); never a negative zero."""
    shown = _ROUND.quantize(value, quantum)
    if shown != value:
        return value.normalize(_ROUND)
    return shown.copy_abs() if shown.is_zero() else shown


def _validator(places: int, what: str) -> Any:
    plain = PLAIN_DECIMAL[places].fullmatch

    def validate(raw: Any) -> Decimal:
        # Hot path (two calls per line at the front door): a plain string in range.
        if type(raw) is str and plain(raw):
            return Decimal(raw)
        if not isinstance(raw, str | Decimal):
            raise PydanticCustomError(
                "decimal_must_be_string",
                f'{what} must be a JSON string such as "16.65", not a JSON number',
            )
        try:
            if isinstance(raw, Decimal):  # already parsed (internal round trips)
                return check_decimal(raw, places)
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
            # What a client sends: plain notation, in range (PLAIN_DECIMAL). The
            # reader also takes an exponent or trailing zeros whose value is in
            # range ("1E+3", "12.3400000"), never one that is not ("-6e384").
            "pattern": r"^-?[0-9]{1,12}(\.[0-9]{1,4})?$",
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
            "pattern": r"^-?[0-9]{1,12}(\.[0-9]{1,6})?$",
            "examples": ["37"],
        }
    ),
]


def plain(value: Decimal) -> str:
    """A decimal as a reader (or a spreadsheet) reads it: never an exponent
    ("1E+3" is "1000"), never a negative zero."""
    return format(value.copy_abs() if value.is_zero() else value, "f")
