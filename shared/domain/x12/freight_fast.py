"""The common 210, mapped straight to its document's JSON bytes, at a third of ``map_210``'s cost.

One ``findall`` over the set's text gives the segments of the tags it maps;
whatever is not plain (a B2A, a value that does not read, a total that does
not add up, a line break ending segments) raises ``_Unsure`` inside, the
answer is None, and ``map_210`` reads the set the slow way, which names the
segment and element at fault. So this only ever answers what ``map_210``'s
rules answer: tests/unit/x12 compare the two, document and bytes, on every
real file, on generated files, on random 210s and on the fuzz test's mutations.

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
  ``BASIS``, at most 100 accessorials, a ``billed_amount`` that fits a Money,
  and a ``rated_quantity`` (always given: a cwt leg has one) and ``miles``
  that fit a Quantity: ``numbers.fits`` says so, or the text is a plain
  decimal of at most 12 integer digits and 2 places, which fits by
  ``PLAIN_DECIMAL``.

tests/unit/x12/build.py::fast_and_slow_agree validates every fast-mapped
document with ``FreightDocument`` and compares it with ``map_210``'s.

Numbers: ``str.isdigit()`` takes any script's digits, N2 and R only 0-9, so
it decides alone only in a set that is all ASCII (``plain``); elsewhere, and
for any value that is not bare digits, the rules' own regexes decide.
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
_N2, _R = N2.fullmatch, R.fullmatch
_MAX_VERSION = 2**31 - 1  # Ordinal's bound
_MAX_CENTS = 10**14  # cents of at most 12 integer digits: fit a Money and a Quantity
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class FastLine(msgspec.Struct, array_like=True, gc=False, frozen=True):
    """A 210's document as the front door takes it: its JSON bytes (``msgspec``'s
    encoding of ``map_210``'s dict), and its ``document_id`` and ``partition_key``.
    It has one leg, so one line and no repeated one."""

    json: bytes
    document_id: str
    partition_key: str


class _Unsure(Exception):
    """``map_210`` must read the set: it may find a problem, or answer otherwise."""


def fast_210(place: Place, query: Query) -> dict[str, Any] | None:
    """The document ``map_210`` would make, or None: let it read the set."""
    line = fast_210_line(place, query)
    return None if line is None else _decode(line.json)


def fast_210_line(place: Place, query: Query) -> FastLine | None:
    """``fast_210``'s document as its JSON bytes, or None: let ``map_210`` read the set."""
    try:
        return _line(place, query)
    except _Unsure:
        return None


def _line(place: Place, query: Query) -> FastLine:
    transaction_set = place.transaction_set
    lazy = lazy_bytes(transaction_set)
    version = query.contract_version
    if lazy is None or type(version) is not int or not 0 < version <= _MAX_VERSION:
        raise _Unsure
    text, start, stop = lazy
    shape = _shape(text.terminator, text.element)
    if text.newline or shape is None:
        raise _Unsure
    try:
        # From the ST's terminator: as ``lazy.tagged``'s pattern, it starts each match.
        body = text.buf[start - 1 : stop].decode("utf-8")
    except UnicodeDecodeError:
        raise _Unsure from None  # in a segment not mapped, maybe: map_210 decodes its own
    plain = body.isascii()
    b3, l0s, l1s, l3s = _segments(shape, body)
    leg = _leg(l0s, l1s, l3s, _amount(b3[7], plain), plain)
    document_id = _identifier(b3[2].strip())
    # A file bills few carriers: one string each, not one per document.
    carrier = _identifier(intern(b3[11].strip().upper()))
    correlation = _correlation(place)
    raw = raw_bytes(transaction_set)  # there, as the set has its lazy bytes
    if raw is None or 4 * ((len(raw) + 2) // 3) > MAX_RAW_PAYLOAD:  # base64's length
        raise _Unsure
    payload = b2a_base64(raw, newline=False)
    # The keys in map_210's order, written as msgspec writes its dict.
    json = _DOCUMENT % (_encode(document_id), _encode(carrier), version, correlation, payload, leg)
    return FastLine(json, document_id, carrier)


_DOCUMENT = (
    b'{"document_id":%b,"partition_key":%b,"contract_version":%d%b,"document_type":"EDI",'
    b'"raw_payload":"%b","legs":[%b]}'
)


@lru_cache(maxsize=16)
def _shape(terminator: bytes, element: bytes) -> tuple[Any, str] | None:
    """The pattern of the tags' segments in a set's text, and the element separator;
    None when a delimiter is not ASCII (then splitting the decoded text could differ
    from splitting the bytes: ``map_210`` reads it)."""
    if not (terminator.isascii() and element.isascii()):
        return None
    t, e = re.escape(terminator.decode()), re.escape(element.decode())
    # The segments of freight_210._TAGS's tags, as ``lazy.tagged`` finds them.
    tags = r"(?:B3|B2A|L0|L1|L3)"
    pattern = re.compile(rf"{t}[ \t\r\n]*+({tags}(?={e}|{t}|[ \t\r]|\Z)[^{t}]*+)")
    return pattern.findall, element.decode()


def _segments(
    shape: tuple[Any, str], body: str
) -> tuple[Elements, list[Elements], list[Elements], list[Elements]]:
    """The B3, the L0s, the L1s and the L3s, split into elements; each element read
    exists ("", as ``Segment.get`` reads a missing one) but L1-17 and L1-18."""
    findall, sep = shape
    by_tag: dict[str, list[Elements]] = {"B3": [], "L0": [], "L1": [], "L3": []}
    try:
        for segment in findall(body):
            elements = segment.split(sep)
            by_tag[elements[0]].append(elements)
    except KeyError:  # a B2A (a purpose to read), or a tag and then a space
        raise _Unsure from None
    b3s, l0s, l1s, l3s = by_tag.values()
    if len(b3s) != 1:
        raise _Unsure
    b3 = b3s[0]
    if len(b3) < 12:
        b3 += _PADS[len(b3)]
    if b3[8] and b3[8].strip():  # a correction
        raise _Unsure
    _pad(l0s, 12)
    _pad(l1s, 9)
    _pad(l3s, 6)
    return b3, l0s, l1s, l3s


_PADS = [[""] * (12 - width) for width in range(12)]


def _pad(segments: list[Elements], width: int) -> None:
    for segment in segments:
        if len(segment) < width:
            segment += _PADS[len(segment)]


def _identifier(value: str) -> str:
    if not is_identifier(value):
        raise _Unsure
    return value


@lru_cache(maxsize=64)
def _correlation_head(prefix: str) -> bytes | None:
    """``,"correlation_id":"<prefix>`` as msgspec writes it (escaping is per character,
    so the id's JSON is this and its control number's), or None when the prefix is
    not the start of an identifier."""
    if not is_identifier(prefix):
        return None
    return b',"correlation_id":' + _encode(prefix)[:-1]


def _correlation(place: Place) -> bytes:
    """``,"correlation_id":"x12:<ISA06>:<ISA13>:<GS06>:<ST02>"`` (``Place.correlation_id``)
    as JSON. The prefix is checked once per group; an identifier refuses characters
    one by one, so the id is one when both parts are free of them and it has at most
    128 characters."""
    prefix = place.prefix
    if prefix is None:
        prefix = correlation_prefix(place.interchange, place.group)
    head = _correlation_head(prefix)
    control = place.transaction_set.control_number.strip()
    if head is None or len(prefix) + len(control) > 128:
        raise _Unsure
    if control.isdigit():  # digits (any script) are neither controls nor "|", nor escaped
        return head + control.encode() + b'"'
    if control and not is_identifier(control):
        raise _Unsure
    return head + _encode(control)[1:]


def _amount(text: str, plain: bool) -> int | None:
    """An N2 element in cents (``numbers.n2``); None when it is blank."""
    if plain and len(text) <= 18 and (text.isdigit() or (text[:1] == "-" and text[1:].isdigit())):
        return int(text)  # the common case, without a strip or a regex
    text = text.strip()
    if not text:
        return None
    if not _N2(text):
        raise _Unsure
    return int(text)


def _rate(text: str, plain: bool) -> None:
    """An R element that is not blank must be one (``numbers.r``)."""
    # Digits and at most one point, in at most 18 characters: no part has more digits.
    if not (plain and len(text) <= 18 and text.replace(".", "", 1).isdigit()):
        text = text.strip()
        if text and not _R(text):
            raise _Unsure


def _decimal(text: str, plain: bool) -> str:
    """An R element that is not blank, stripped (``numbers.r``)."""
    if plain and len(text) <= 18 and text.isdigit():
        return text
    text = text.strip()
    if not _R(text):
        raise _Unsure
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
        charge = _amount(l1[4], plain) if l1[4] else None
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
            raise _Unsure  # two linehauls
    if linehaul is None:
        raise _Unsure
    return total, billed, priced, linehaul, accessorials


def _leg(
    l0s: list[Elements], l1s: list[Elements], l3s: list[Elements], due: int | None, plain: bool
) -> bytes:
    """The leg's JSON, as msgspec writes map_210's leg."""
    total, billed, priced, linehaul, accessorials = _charges(l1s, plain)
    if total != due:
        raise _Unsure
    for l3 in l3s:
        if l3[5] and _amount(l3[5], plain) not in (None, total):
            raise _Unsure
    basis = BASIS.get(linehaul[3]) or BASIS.get(linehaul[3].strip().upper())
    if basis is None:
        raise _Unsure
    miles = _miles(l0s, l1s, plain)
    quantity = _rated_quantity(l0s, linehaul, basis, miles, plain)
    billed_amount = _money(billed) if priced else "0"
    listed = "[]"
    if accessorials:
        if len(accessorials) > 100 or not all(map(is_identifier, accessorials)):
            raise _Unsure
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
    values that disagree) are ``_Unsure``."""
    found: str | None = None
    for segment in segments:
        unit = segment[at + 1] if len(segment) > at + 1 else ""
        if not unit:  # the common case, decided without a strip
            continue
        unit = unit.strip().upper()
        if unit in KILOMETRES:
            raise _Unsure
        if unit in MILES and segment[at].strip():
            value = _decimal(segment[at], plain)
            if found is None:
                found = value
            elif Decimal(value) != Decimal(found):
                raise _Unsure
    return found


def _rated_quantity(
    l0s: list[Elements], linehaul: Elements, basis: str, miles: str | None, plain: bool
) -> str:
    """As ``freight_210._rated_quantity``, written as ``fits`` writes a Quantity."""
    if basis == "flat":
        return "1"
    if basis == "mile":
        if miles is None:
            raise _Unsure
        return _quantity(miles, plain)
    element = 4 if basis == "cwt" else 8
    l0 = _lading(l0s, linehaul, element)
    if l0 is None:
        if basis == "unit":
            return "1"
        raise _Unsure
    value = _decimal(l0[element], plain)
    if basis == "unit":
        return _quantity(value, plain)
    if l0[11].strip().upper() == "K":
        raise _Unsure
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
        return "%d.%02d" % divmod(cents, 100)  # noqa: UP031 - a third cheaper than format()
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
        raise _Unsure
    return text
