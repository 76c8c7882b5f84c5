"""The common 210, mapped straight to its document's JSON bytes: a fifth of ``map_210``'s cost.

One ``findall`` over the set's text gives the tags it maps and their elements;
whatever is not plain (a B2A, a value that does not read, a total that does
not add up, a line break ending segments) returns None and ``map_210`` reads
the set the slow way, which names the segment and element at fault. So this
only ever answers what ``map_210``'s rules answer: tests/unit/x12 compare the
two on every real file, on generated files and on the fuzz test's mutations,
document and bytes.

What it answers is a ``FastLine``: the JSON bytes that ``msgspec`` writes for
the document ``map_210`` would make (same keys, same order), and the two
fields the front door reads. The document is valid for ``FreightDocument`` by
construction, so the front door stores the bytes without screening them:

- ``document_id``, ``partition_key``, ``correlation_id`` and each accessorial
  code pass ``numbers.is_identifier``, the ``Identifier`` rule;
- ``contract_version`` is an int from 1 to 2**31 - 1 (``Ordinal``), else the
  set is left to ``map_210``;
- ``document_type`` is ``"EDI"``; ``raw_payload`` is ``b2a_base64`` of the
  set's bytes, base64 as the validator reads it, within ``MAX_RAW_PAYLOAD``;
- one leg, ``leg_no`` 1 (so no repeated line), a ``rate_basis`` of
  ``BASIS``, at most 100 accessorials, a ``billed_amount`` that fits a Money
  and a ``rated_quantity`` (always given: a cwt leg has one) and ``miles``
  that fit a Quantity (``numbers.fits``, or a plain decimal of at most 12
  integer digits, which fits by ``PLAIN_DECIMAL``).

tests/unit/x12/test_freight_fast.py validates every fast-mapped document with
``FreightDocument``.
"""

from __future__ import annotations

import re
from binascii import b2a_base64
from decimal import Decimal
from functools import lru_cache
from sys import intern
from typing import Any

import msgspec

from shared.domain.kinds.freight_audit import MAX_RAW_PAYLOAD
from shared.domain.money import MONEY_PLACES, QUANTITY_PLACES
from shared.domain.x12.freight_210 import (
    BASIS,
    KILOMETRES,
    LINEHAUL,
    MILES,
    NOT_ACCESSORIAL,
    TAX,
)
from shared.domain.x12.lazy import lazy_bytes, raw_bytes
from shared.domain.x12.numbers import N2, R, fits, is_identifier
from shared.domain.x12.sets import Place, Query, correlation_prefix

Elements = list[str]  # elements[n] is element n; elements[0] is the tag
_WIDTH = 20  # the padding of a short segment: L1-18 is the last element read
_N2, _R = N2.fullmatch, R.fullmatch
_MAX_VERSION = 2**31 - 1  # Ordinal's bound
_MAX_PLAIN = 10**12  # a plain decimal below this in magnitude fits a Money or a Quantity
_MAX_CENTS = _MAX_PLAIN * 100
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class FastLine(msgspec.Struct, array_like=True, gc=False, frozen=True):
    """A 210's document as the front door takes it: its JSON bytes (``msgspec``'s
    encoding of ``map_210``'s dict), and its ``document_id`` and ``partition_key``.
    It has one leg, so one line and no repeated one."""

    json: bytes
    document_id: str
    partition_key: str


@lru_cache(maxsize=16)
def _shape(terminator: bytes, element: bytes) -> tuple[Any, str] | None:
    """The tags' pattern over a set's text, and the element separator; None when a
    delimiter is not ASCII (then splitting the decoded text could differ from
    splitting the bytes: ``map_210`` reads it)."""
    if not (terminator.isascii() and element.isascii()):
        return None
    t, e = re.escape(terminator.decode()), re.escape(element.decode())
    # The segments of freight_210._TAGS's tags, as ``lazy.tagged`` finds them.
    pattern = re.compile(r"%s[ \t\r\n]*+((?:B3|B2A|L0|L1|L3)(?=%s|%s|[ \t\r]|\Z)[^%s]*+)" % (t, e, t, t))
    return pattern.findall, element.decode()


@lru_cache(maxsize=64)
def _correlation_head(prefix: str) -> bytes | None:
    """``,"correlation_id":"<prefix>`` as msgspec writes it (escaping is per character,
    so the id's JSON is this and its control number's), or None when the prefix is
    not the start of an identifier."""
    if not is_identifier(prefix):
        return None
    return b',"correlation_id":' + _encode(prefix)[:-1]


def fast_210(place: Place, query: Query) -> dict[str, Any] | None:
    """The document ``map_210`` would make, or None: let it read the set."""
    line = fast_210_line(place, query)
    return None if line is None else _decode(line.json)


def fast_210_line(place: Place, query: Query) -> FastLine | None:
    """``fast_210``'s document as its JSON bytes, or None: let ``map_210`` read the set."""
    transaction_set = place.transaction_set
    lazy = lazy_bytes(transaction_set)
    if lazy is None:
        return None
    text, start, stop = lazy
    version = query.contract_version
    shape = _shape(text.terminator, text.element)
    if text.newline or shape is None or type(version) is not int or not 0 < version <= _MAX_VERSION:
        return None
    findall, sep = shape
    try:
        # From the ST's terminator: as ``lazy.tagged``'s pattern, it starts each match.
        body = text.buf[start - 1 : stop].decode("utf-8")
    except UnicodeDecodeError:
        return None  # in a segment not mapped, maybe: map_210 decodes only the ones it maps
    # In an ASCII set, str.isdigit() is N2's and R's [0-9]: no other script's digits.
    plain = body.isascii()
    by_tag: dict[str, list[Elements]] = {"B3": [], "L0": [], "L1": [], "L3": []}
    try:
        for segment in findall(body):
            elements = segment.split(sep)
            by_tag[elements[0]].append(elements)
    except KeyError:  # a B2A (a purpose to read), or a tag and then a space
        return None
    b3s, l0s, l1s, l3s = by_tag.values()
    if len(b3s) != 1:
        return None
    b3 = _padded(b3s[0], 12)
    if b3[8] and b3[8].strip():
        return None
    # Every element read exists (""), as Segment.get reads a missing one.
    for l0 in l0s:
        if len(l0) < 12:
            l0 += _PADS[len(l0)]
    leg = _leg(l0s, l1s, l3s, _cents(b3[7], plain), plain)
    document_id = b3[2].strip()
    # A file bills few carriers: one string each, not one per document.
    carrier = intern(b3[11].strip().upper())
    if leg is None or not (is_identifier(document_id) and is_identifier(carrier)):
        return None
    correlation = _correlation(place)
    raw = raw_bytes(transaction_set)
    if correlation is None or raw is None:
        return None
    payload = b2a_base64(raw, newline=False)
    if len(payload) > MAX_RAW_PAYLOAD:
        return None
    # The keys in map_210's order, written as msgspec writes its dict.
    json = _DOCUMENT % (_encode(document_id), _encode(carrier), version, correlation, payload, leg)
    return FastLine(json, document_id, carrier)


_DOCUMENT = (
    b'{"document_id":%b,"partition_key":%b,"contract_version":%d%b,"document_type":"EDI",'
    b'"raw_payload":"%b","legs":[%b]}'
)
# The L1-08 codes freight_210 names, as it compares them (stripped, upper-cased).
_KNOWN = {code: code for code in NOT_ACCESSORIAL}
_PADS = [[""] * (_WIDTH - width) for width in range(_WIDTH)]


def _padded(elements: Elements, width: int) -> Elements:
    if len(elements) < width:
        elements += _PADS[len(elements)]
    return elements


def _correlation(place: Place) -> bytes | None:
    """``,"correlation_id":"x12:<ISA06>:<ISA13>:<GS06>:<ST02>"`` (``Place.correlation_id``)
    as JSON, or None when that id is not an identifier. The prefix is checked once per
    group; the characters an identifier refuses are refused one by one, so the id is
    one when both parts are free of them and it has at most 128 characters."""
    prefix = place.prefix
    if prefix is None:
        prefix = correlation_prefix(place.interchange, place.group)
    head = _correlation_head(prefix)
    control = place.transaction_set.control_number.strip()
    if head is None or len(prefix) + len(control) > 128:
        return None
    if control.isdigit():  # digits (any script) are neither controls nor "|", nor escaped
        return head + control.encode() + b'"'
    if control and not is_identifier(control):
        return None
    return head + _encode(control)[1:]


def _cents(text: str, plain: bool) -> int | None:
    """An N2 element's value in cents; None when it is empty or not N2 (``numbers.n2``)."""
    if plain and text.isdigit():  # the common case, without a strip or a regex
        return int(text) if len(text) <= 18 else None
    text = text.strip()
    return int(text) if _N2(text) else None


def _decimal(text: str, plain: bool) -> str | None:
    """An R element, stripped, when it is one (``numbers.r``), else None."""
    if plain and text.isdigit() and len(text) <= 18:
        return text
    text = text.strip()
    return text if _R(text) else None


def _leg(
    l0s: list[Elements], l1s: list[Elements], l3s: list[Elements], due: int | None, plain: bool
) -> bytes | None:
    """The leg's JSON, as msgspec writes map_210's leg, or None where map_210 would report
    a problem. N2 amounts are summed as integers of cents: exact, as ``map_210``'s
    Decimals of two places are."""
    total = billed = 0
    priced = False  # a non-tax L1-04 was given: the billed amount has two places
    linehaul: Elements | None = None
    accessorials: list[str] = []
    for l1 in l1s:
        if len(l1) < 9:
            l1 += _PADS[len(l1)]  # L1-17 and L1-18 are read only where there are 19 elements
        rate, amount, code = l1[2], l1[4], l1[8]
        # R: digits, and at most one point (at most 18 characters: no part has more digits).
        if rate and not (plain and len(rate) <= 18 and rate.replace(".", "", 1).isdigit()):
            rate = rate.strip()
            if rate and not _R(rate):
                return None
        charge = 0
        if amount:
            if plain and len(amount) <= 18 and (
                amount.isdigit() or (amount[0] == "-" and amount[1:].isdigit())
            ):  # N2 as written, the common case
                charge = int(amount)
            else:
                amount = amount.strip()
                if amount:
                    if not _N2(amount):
                        return None
                    charge = int(amount)
        total += charge
        upper = _KNOWN.get(code)  # a code map_210 knows, written as it compares it
        if upper is None:
            code = code.strip()
            upper = code.upper()
        if upper not in TAX:
            billed += charge
            priced = priced or bool(amount)
        if upper in LINEHAUL:
            if linehaul is not None:
                return None  # two linehauls
            linehaul = l1
        elif upper not in NOT_ACCESSORIAL:
            accessorials.append(intern(code))
    if linehaul is None or total != due:
        return None
    for l3 in l3s:
        stated = l3[5] if len(l3) > 5 else ""
        if stated and not (plain and stated.isdigit() and len(stated) <= 18):
            if stated.strip() and _cents(stated, plain) != total:
                return None
        elif stated and int(stated) != total:
            return None
    qualifier = linehaul[3]
    basis = BASIS.get(qualifier) or BASIS.get(qualifier.strip().upper())
    if basis is None:
        return None
    # As freight_210._miles: L1-17 when L1-18 says miles, else L0-02 when L0-03 does.
    miles = None
    for l1 in l1s:
        if len(l1) > 18 and l1[18]:
            miles = _miles(l1s, 17, plain)
            break
    if miles is None:
        miles = _miles(l0s, 2, plain)
    if miles is _BAD:
        return None
    quantity = _rated_quantity(l0s, linehaul, basis, miles, plain)
    billed_amount = _money(billed) if priced else "0"
    if quantity is None or billed_amount is None:
        return None
    if accessorials:
        if len(accessorials) > 100 or not all(is_identifier(code) for code in accessorials):
            return None
        listed = _encode(accessorials).decode()
    else:
        listed = "[]"
    if miles is None:
        tail = ""
    else:
        miles = _quantity(miles, plain)
        if miles is None:
            return None
        tail = f',"miles":"{miles}"'
    return (
        f'{{"leg_no":1,"rate_basis":"{basis}","accessorials":{listed},'
        f'"billed_amount":"{billed_amount}","rated_quantity":"{quantity}"{tail}}}'
    ).encode()


_BAD = "bad"  # a problem map_210 would report (compared by identity)


def _miles(segments: list[Elements], at: int, plain: bool) -> str | None:
    """The first value of element ``at`` of the segments whose next element says miles,
    stripped; None when there is none, ``_BAD`` where ``freight_210._miles`` would report
    a problem (kilometres, not a number, two values that disagree)."""
    found: str | None = None
    for segment in segments:
        unit = segment[at + 1] if len(segment) > at + 1 else ""
        if not unit:  # the common case, decided without a strip
            continue
        unit = unit.strip().upper()
        if unit in KILOMETRES:
            return _BAD
        if unit in MILES and segment[at].strip():
            value = _decimal(segment[at], plain)
            if value is None:
                return _BAD
            if found is None:
                found = value
            elif Decimal(value) != Decimal(found):
                return _BAD
    return found


def _rated_quantity(
    l0s: list[Elements], linehaul: Elements, basis: str, miles: str | None, plain: bool
) -> str | None:
    """As ``freight_210._rated_quantity``, written as ``fits`` writes a Quantity; None
    where it would report a problem."""
    if basis == "flat":
        return "1"
    if basis == "mile":
        return None if miles is None else _quantity(miles, plain)
    element = 4 if basis == "cwt" else 8
    # freight_210._lading: the first L0 of the linehaul's lading line (any L0 when none
    # is of it) that has ``element``.
    line = linehaul[1].strip()
    same = [l0 for l0 in l0s if l0[1].strip() == line] if line else l0s
    for l0 in same or l0s:
        if l0[element] and l0[element].strip():
            break
    else:
        return "1" if basis == "unit" else None
    value = _decimal(l0[element], plain)
    if value is None:
        return None
    if basis == "unit":
        return _quantity(value, plain)
    if l0[11].strip().upper() == "K":
        return None
    # A weight in pounds, in hundredweight: its digits with the point moved two places.
    if plain and value.isdigit() and len(value) <= 14:
        return _money(int(value))
    return fits(Decimal(value).scaleb(-2), QUANTITY_PLACES)


def _money(cents: int) -> str | None:
    """``fits(Decimal(cents).scaleb(-2), MONEY_PLACES)``: the amount with its two places
    (the cents of a hundredweight fit a Quantity as well)."""
    if 0 <= cents < _MAX_CENTS:  # the common case
        return "%d.%02d" % divmod(cents, 100)
    whole, part = divmod(-cents if cents < 0 else cents, 100)
    if whole >= _MAX_PLAIN:
        return fits(Decimal(cents).scaleb(-2), MONEY_PLACES)
    return f"{'-' if cents < 0 else ''}{whole}.{part:02d}"


def _quantity(text: str, plain: bool) -> str | None:
    """``fits(Decimal(text), QUANTITY_PLACES)`` of an R value: a whole number without
    leading zeros of at most 12 digits is written as it is."""
    if plain and text.isdigit() and len(text) <= 12 and (text[0] != "0" or len(text) == 1):
        return text
    return fits(Decimal(text), QUANTITY_PLACES)
