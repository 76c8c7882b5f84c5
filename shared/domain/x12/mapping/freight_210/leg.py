"""The fast 210's leg (``freight_fast``): its L0s and L1s to the leg's JSON bytes.

Each value is read as ``freight_210`` reads it (N2 amounts in cents, R rates and
quantities, miles, the linehaul and its rated quantity) and written as
``numbers.fits`` writes a Money or a Quantity; anything ``map_210`` might
answer otherwise, or find a problem in, raises ``Unsure``, and the set is left
to ``map_210``. ``plain``: the set is all ASCII, so ``str.isdigit`` decides
alone (N2 and R take only 0-9).
"""

from __future__ import annotations

from decimal import Decimal
from sys import intern

import msgspec

from shared.domain.money import MONEY_PLACES, QUANTITY_PLACES
from shared.domain.x12.mapping.freight_210.document import (
    BASIS,
    KILOMETRES,
    LINEHAUL,
    MILES,
    NOT_ACCESSORIAL,
    TAX,
)
from shared.domain.x12.mapping.numbers import N2, R, fits, is_identifier

Elements = list[str]  # elements[n] is element n; elements[0] is the tag
_N2, _R = N2.fullmatch, R.fullmatch
_MAX_CENTS = 10**14  # cents of at most 12 integer digits: fit a Money and a Quantity
_encode = msgspec.json.Encoder().encode


class Unsure(Exception):
    """``map_210`` must read the set: it may find a problem, or answer otherwise."""


def amount(text: str, plain: bool) -> int | None:
    """An N2 element in cents (``numbers.n2``); None when it is blank."""
    if plain and len(text) <= 18 and (text.isdigit() or (text[:1] == "-" and text[1:].isdigit())):
        return int(text)  # the common case, without a strip or a regex
    text = text.strip()
    if not text:
        return None
    if not _N2(text):
        raise Unsure
    return int(text)


def _rate(text: str, plain: bool) -> None:
    """An R element that is not blank must be one (``numbers.r``)."""
    # Digits and at most one point, in at most 18 characters: no part has more digits.
    if not (plain and len(text) <= 18 and text.replace(".", "", 1).isdigit()):
        text = text.strip()
        if text and not _R(text):
            raise Unsure


def _decimal(text: str, plain: bool) -> str:
    """An R element that is not blank, stripped (``numbers.r``)."""
    if plain and len(text) <= 18 and text.isdigit():
        return text
    text = text.strip()
    if not _R(text):
        raise Unsure
    return text


Charges = tuple[int, int, bool, Elements, list[str]]
# The L1-08 codes freight_210 names, as it compares them (stripped, upper-cased).
_KNOWN = {code: code for code in NOT_ACCESSORIAL}


def _charges(l1s: list[Elements], plain: bool) -> Charges:
    """(the L1-04 total, the billed part of it, whether a billed L1-04 was given,
    the one linehaul, the accessorial codes). N2 amounts are summed as integers
    of cents: exact, as ``map_210``'s Decimals of two places are."""
    total = billed = 0
    priced = False  # a non-tax L1-04 was given: the billed amount has two places
    linehaul: Elements | None = None
    accessorials: list[str] = []
    for l1 in l1s:
        if l1[2]:
            _rate(l1[2], plain)
        charge = amount(l1[4], plain) if l1[4] else None
        code = l1[8]
        upper = _KNOWN.get(code)  # a code map_210 knows, written as it compares it
        if upper is None:
            code = code.strip()
            upper = code.upper()
        if charge is not None:
            total += charge
            if upper not in TAX:
                billed += charge
                priced = True
        if upper not in LINEHAUL:
            if upper not in NOT_ACCESSORIAL:
                accessorials.append(intern(code))
        elif linehaul is None:
            linehaul = l1
        else:
            raise Unsure  # two linehauls
    if linehaul is None:
        raise Unsure
    return total, billed, priced, linehaul, accessorials


def leg_json(
    l0s: list[Elements], l1s: list[Elements], l3s: list[Elements], due: int | None, plain: bool
) -> bytes:
    """The leg's JSON, as msgspec writes map_210's leg."""
    total, billed, priced, linehaul, accessorials = _charges(l1s, plain)
    if total != due:
        raise Unsure
    for l3 in l3s:
        if l3[5] and amount(l3[5], plain) not in (None, total):
            raise Unsure
    basis = BASIS.get(linehaul[3]) or BASIS.get(linehaul[3].strip().upper())
    if basis is None:
        raise Unsure
    miles = _miles(l0s, l1s, plain)
    quantity = _rated_quantity(l0s, linehaul, basis, miles, plain)
    billed_amount = _money(billed) if priced else "0"
    listed = "[]"
    if accessorials:
        if len(accessorials) > 100 or not all(map(is_identifier, accessorials)):
            raise Unsure
        listed = _encode(accessorials).decode()
    tail = "" if miles is None else f',"miles":"{_quantity(miles, plain)}"'
    return (
        f'{{"leg_no":1,"rate_basis":"{basis}","accessorials":{listed},'
        f'"billed_amount":"{billed_amount}","rated_quantity":"{quantity}"{tail}}}'
    ).encode()


def _miles(l0s: list[Elements], l1s: list[Elements], plain: bool) -> str | None:
    """As ``freight_210._miles``: L1-17 when L1-18 says miles, else L0-02 when L0-03 does."""
    for l1 in l1s:
        if len(l1) > 18 and l1[18]:
            miles = _miles_of(l1s, 17, plain)
            if miles is not None:
                return miles
            break
    return _miles_of(l0s, 2, plain)


def _miles_of(segments: list[Elements], at: int, plain: bool) -> str | None:
    """The first value of element ``at`` of the segments whose next element says miles,
    stripped, or None; ``freight_210._miles``'s problems (kilometres, not a number,
    values that disagree) are ``Unsure``."""
    found: str | None = None
    for segment in segments:
        unit = segment[at + 1] if len(segment) > at + 1 else ""
        if not unit:  # the common case, decided without a strip
            continue
        unit = unit.strip().upper()
        if unit in KILOMETRES:
            raise Unsure
        if unit in MILES and segment[at].strip():
            value = _decimal(segment[at], plain)
            if found is None:
                found = value
            elif Decimal(value) != Decimal(found):
                raise Unsure
    return found


def _rated_quantity(
    l0s: list[Elements], linehaul: Elements, basis: str, miles: str | None, plain: bool
) -> str:
    """As ``freight_210._rated_quantity``, written as ``fits`` writes a Quantity."""
    if basis == "flat":
        return "1"
    if basis == "mile":
        if miles is None:
            raise Unsure
        return _quantity(miles, plain)
    element = 4 if basis == "cwt" else 8
    l0 = _lading(l0s, linehaul, element)
    if l0 is None:
        if basis == "unit":
            return "1"
        raise Unsure
    value = _decimal(l0[element], plain)
    if basis == "unit":
        return _quantity(value, plain)
    if l0[11].strip().upper() == "K":
        raise Unsure
    # A weight in pounds, in hundredweight: its digits with the point moved two places.
    if plain and len(value) <= 14 and value.isdigit():
        return _money(int(value))
    return _fits(Decimal(value).scaleb(-2), QUANTITY_PLACES)


def _lading(l0s: list[Elements], linehaul: Elements, element: int) -> Elements | None:
    """``freight_210._lading``: the first L0 of the linehaul's lading line (any L0 when
    none is of it) that has ``element``."""
    line = linehaul[1].strip()
    same = [l0 for l0 in l0s if l0[1].strip() == line] if line else l0s
    for l0 in same or l0s:
        if l0[element] and l0[element].strip():
            return l0
    return None


def _money(cents: int) -> str:
    """``fits(Decimal(cents).scaleb(-2), MONEY_PLACES)``: the amount with its two places
    (the cents of a hundredweight fit a Quantity as well)."""
    if 0 <= cents < _MAX_CENTS:  # the common case
        return "%d.%02d" % divmod(cents, 100)  # noqa: UP031 - cheaper than format()
    if -_MAX_CENTS < cents < 0:
        whole, part = divmod(-cents, 100)
        return f"-{whole}.{part:02d}"
    return _fits(Decimal(cents).scaleb(-2), MONEY_PLACES)


def _quantity(text: str, plain: bool) -> str:
    """``fits(Decimal(text), QUANTITY_PLACES)`` of an R value: a whole number without
    leading zeros of at most 12 digits is written as it is."""
    if plain and len(text) <= 12 and text.isdigit() and (text[0] != "0" or len(text) == 1):
        return text
    return _fits(Decimal(text), QUANTITY_PLACES)


def _fits(value: Decimal, places: int) -> str:
    text = fits(value, places)
    if text is None:
        raise Unsure
    return text
