"""The common 210, mapped without making ``Segment``s: a third of ``map_210``'s cost.

One ``findall`` over the set's bytes gives the tags it maps and their elements;
whatever is not plain (a B2A, a value that does not read, a total that does
not add up, a line break ending segments) returns None and ``map_210`` reads
the set the slow way, which names the segment and element at fault. So this
only ever answers what ``map_210``'s rules answer: tests/unit/x12 compare the
two on every real file and on the fuzz test's mutations.
"""

from __future__ import annotations

import re
from decimal import Decimal
from functools import lru_cache
from sys import intern
from typing import Any

from shared.domain.money import MONEY_PLACES, QUANTITY_PLACES
from shared.domain.x12.freight_210 import (
    BASIS,
    KILOMETRES,
    LINEHAUL,
    MILES,
    NOT_ACCESSORIAL,
    TAX,
)
from shared.domain.x12.lazy import lazy_bytes
from shared.domain.x12.numbers import N2, R, fits, is_identifier, r
from shared.domain.x12.sets import Place, Query

Elements = list[str]  # elements[n] is element n; elements[0] is ""; padded to _WIDTH
_WIDTH = 20  # L1-18 is the last element read
_N2, _R = N2.fullmatch, R.fullmatch


@lru_cache(maxsize=16)
def _pattern(terminator: bytes, element: bytes) -> re.Pattern[bytes]:
    t, e = re.escape(terminator), re.escape(element)
    # The tags of freight_210._TAGS, as ``lazy.tagged`` finds them, then the rest.
    return re.compile(rb"%s[ \t\r\n]*+(B3|B2A|L0|L1|L3)(?=%s|%s|[ \t\r]|\Z)([^%s]*)" % (t, e, t, t))


def fast_210(place: Place, query: Query) -> dict[str, Any] | None:
    """The document ``map_210`` would make, or None: let it read the set."""
    lazy = lazy_bytes(place.transaction_set)
    if lazy is None or lazy[0].newline:
        return None
    text, start, stop = lazy
    element = text.element
    sep = element.decode()
    # Splitting with the padding appended makes every element read exist (""),
    # at the cost of one concatenation; elements past _WIDTH stay joined, unread.
    pad = sep * _WIDTH
    b3: Elements | None = None
    l0s: list[Elements] = []
    l1s: list[Elements] = []
    l3s: list[Elements] = []
    for tag, rest in _pattern(text.terminator, element).findall(text.buf, start - 1, stop):
        if not rest.startswith(element) or tag == b"B2A":
            return None
        elements = (rest.decode("utf-8") + pad).split(sep, _WIDTH)
        if tag == b"L1":
            l1s.append(elements)
        elif tag == b"L0":
            l0s.append(elements)
        elif tag == b"L3":
            l3s.append(elements)
        elif b3 is not None:
            return None
        else:
            b3 = elements
    if b3 is None or b3[8].strip():
        return None
    # A file bills few carriers and codes: one string each, not one per document.
    document_id, carrier = b3[2].strip(), intern(b3[11].strip().upper())
    due = b3[7].strip()
    leg = _leg(l0s, l1s, l3s, int(due) if _N2(due) else None)
    correlation_id = place.correlation_id()
    if leg is None or not (
        is_identifier(document_id) and is_identifier(carrier) and is_identifier(correlation_id)
    ):
        return None
    return {
        "document_id": document_id,
        "partition_key": carrier,
        "contract_version": query.contract_version,
        "correlation_id": correlation_id,
        "document_type": "EDI",
        "raw_payload": place.raw_payload(),
        "legs": [leg],
    }


Charges = tuple[int, int, bool, Elements, list[str]]


def _charges(l1s: list[Elements]) -> Charges | None:
    """(the L1-04 total, the billed part of it, whether a billed L1-04 was given,
    the one linehaul, the accessorial codes). N2 amounts are summed as integers
    of cents: exact, as ``map_210``'s Decimals of two places are."""
    total = billed = 0
    priced = False  # a non-tax L1-04 was given: the billed amount has two places
    linehaul: Elements | None = None
    accessorials: list[str] = []
    for l1 in l1s:
        rate, amount, code = l1[2].strip(), l1[4].strip(), l1[8].strip()
        if (amount and not _N2(amount)) or (rate and not _R(rate)):
            return None
        charge = int(amount) if amount else 0
        total += charge
        upper = code.upper()
        if upper not in TAX:
            billed += charge
            priced = priced or bool(amount)
        if upper in LINEHAUL:
            if linehaul is not None:
                return None
            linehaul = l1
        elif upper not in NOT_ACCESSORIAL:
            accessorials.append(intern(code))
    return None if linehaul is None else (total, billed, priced, linehaul, accessorials)


def _leg(
    l0s: list[Elements], l1s: list[Elements], l3s: list[Elements], due: int | None
) -> dict[str, Any] | None:
    charges = _charges(l1s)
    if charges is None:
        return None
    total, billed, priced, linehaul, accessorials = charges
    if total != due or not _l3s_agree(l3s, total):
        return None
    basis = BASIS.get(linehaul[3].strip().upper())
    found, miles = _miles(l0s, l1s)
    if basis is None or not found:
        return None
    quantity = _rated_quantity(l0s, linehaul, basis, miles)
    amount = Decimal(billed).scaleb(-2) if priced else Decimal(0)
    billed_amount = fits(amount, MONEY_PLACES)
    if (
        quantity is None
        or billed_amount is None
        or len(accessorials) > 100
        or not all(is_identifier(code) for code in accessorials)
    ):
        return None
    leg: dict[str, Any] = {
        "leg_no": 1,
        "rate_basis": basis,
        "accessorials": accessorials,
        "billed_amount": billed_amount,
        "rated_quantity": fits(quantity, QUANTITY_PLACES),
    }
    if miles is not None:
        leg["miles"] = fits(miles, QUANTITY_PLACES)
    return None if leg["rated_quantity"] is None or leg.get("miles", "") is None else leg


def _l3s_agree(l3s: list[Elements], total: int) -> bool:
    for l3 in l3s:
        stated = l3[5].strip()
        if stated and not (_N2(stated) and int(stated) == total):
            return False
    return True


def _miles(l0s: list[Elements], l1s: list[Elements]) -> tuple[bool, Decimal | None]:
    """As ``freight_210._miles``: (False, None) where it would report a problem."""
    for segments, at in ((l1s, 17), (l0s, 2)):
        found: list[Decimal] = []
        for segment in segments:
            unit = segment[at + 1]
            if not unit:  # the common case, decided without a strip
                continue
            unit = unit.strip().upper()
            if unit in KILOMETRES:
                return False, None
            if unit in MILES and segment[at].strip():
                value = r(segment[at])
                if value is None:
                    return False, None
                found.append(value)
        if len(set(found)) > 1:
            return False, None
        if found:
            return True, found[0]
    return True, None


def _rated_quantity(
    l0s: list[Elements], linehaul: Elements, basis: str, miles: Decimal | None
) -> Decimal | None:
    """As ``freight_210._rated_quantity``; None where it would report a problem."""
    if basis == "flat":
        return Decimal(1)
    if basis == "mile":
        return miles
    element = 4 if basis == "cwt" else 8
    line = linehaul[1].strip()
    same = [l0 for l0 in l0s if line and l0[1].strip() == line] or l0s
    l0 = next((l0 for l0 in same if l0[element].strip()), None)
    if l0 is None:
        return Decimal(1) if basis == "unit" else None
    value = r(l0[element])
    if value is None or basis == "unit":
        return value
    return None if l0[11].strip().upper() == "K" else value.scaleb(-2)
