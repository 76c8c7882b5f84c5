"""The common 210, mapped straight to its document's JSON bytes, far cheaper than ``map_210``.

One ``findall`` over the set's text gives the segments of the tags it maps;
whatever is not plain (a B2A, a value that does not read, a total that does
not add up, a line break ending segments) raises ``Unsure`` inside, the
answer is None, and ``map_210`` reads the set the slow way, which names the
segment and element at fault. So this only ever answers what ``map_210``'s
rules answer: tests/unit/x12 compare the two, document and bytes, on every
real file, on generated files, on random 210s and on the fuzz test's mutations.

What it answers is a ``FastLine``: the JSON bytes that ``msgspec`` writes for
the document ``map_210`` would make (same keys, same order), and the two
fields the front door reads. The document is valid for ``FreightDocument`` by
construction, so the front door stores the bytes without screening them:

- ``document_id`` and ``partition_key`` pass ``ids.is_address``, their
  rule; ``correlation_id`` and each accessorial code pass
  ``numbers.is_identifier``, the ``Identifier`` rule;
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
from functools import lru_cache
from sys import intern
from typing import Any

import msgspec

from shared.domain.kinds.base import MAX_RAW_PAYLOAD
from shared.domain.kinds.ids import is_address
from shared.domain.x12.mapping.freight_210.leg import Elements, Unsure, amount, leg_json
from shared.domain.x12.mapping.numbers import is_identifier
from shared.domain.x12.mapping.sets import Place, Query, correlation_prefix
from shared.domain.x12.reading.lazy import lazy_bytes, raw_bytes

_MAX_VERSION = 2**31 - 1  # Ordinal's bound
_encode = msgspec.json.Encoder().encode
_decode = msgspec.json.Decoder().decode


class FastLine(msgspec.Struct, array_like=True, gc=False, frozen=True):
    """A 210's document as the front door takes it: its JSON bytes (``msgspec``'s
    encoding of ``map_210``'s dict), and its ``document_id`` and ``partition_key``.
    It has one leg, so one line and no repeated one."""

    json: bytes
    document_id: str
    partition_key: str


def fast_210(place: Place, query: Query) -> dict[str, Any] | None:
    """The document ``map_210`` would make, or None: let it read the set."""
    line = fast_210_line(place, query)
    return None if line is None else _decode(line.json)


def fast_210_line(place: Place, query: Query) -> FastLine | None:
    """``fast_210``'s document as its JSON bytes, or None: let ``map_210`` read the set."""
    try:
        return _line(place, query)
    except Unsure:
        return None


def _line(place: Place, query: Query) -> FastLine:
    transaction_set = place.transaction_set
    lazy = lazy_bytes(transaction_set)
    version = query.contract_version
    if lazy is None or type(version) is not int or not 0 < version <= _MAX_VERSION:
        raise Unsure
    text, start, stop = lazy
    shape = _shape(text.terminator, text.element)
    if text.newline or shape is None:
        raise Unsure
    try:
        # From the ST's terminator: as ``lazy.tagged``'s pattern, it starts each match.
        body = text.buf[start - 1 : stop].decode("utf-8")
    except UnicodeDecodeError:
        raise Unsure from None  # in a segment not mapped, maybe: map_210 decodes its own
    plain = body.isascii()
    b3, l0s, l1s, l3s = _segments(shape, body)
    leg = leg_json(l0s, l1s, l3s, amount(b3[7], plain), plain)
    document_id = _address(b3[2].strip())
    # A file bills few carriers: one string each, not one per document.
    carrier = _address(intern(b3[11].strip().upper()))
    correlation = _correlation(place)
    raw = raw_bytes(transaction_set)  # there, as the set has its lazy bytes
    if raw is None or 4 * ((len(raw) + 2) // 3) > MAX_RAW_PAYLOAD:  # base64's length
        raise Unsure
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
        raise Unsure from None
    b3s, l0s, l1s, l3s = by_tag.values()
    if len(b3s) != 1:
        raise Unsure
    b3 = b3s[0]
    if len(b3) < 12:
        b3 += _PADS[len(b3)]
    if b3[8] and b3[8].strip():  # a correction
        raise Unsure
    _pad(l0s, 12)
    _pad(l1s, 9)
    _pad(l3s, 6)
    return b3, l0s, l1s, l3s


_PADS = [[""] * (12 - width) for width in range(12)]


def _pad(segments: list[Elements], width: int) -> None:
    for segment in segments:
        if len(segment) < width:
            segment += _PADS[len(segment)]


def _address(value: str) -> str:
    if not is_address(value):
        raise Unsure
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
        raise Unsure
    if control.isdigit():  # digits (any script) are neither controls nor "|", nor escaped
        return head + control.encode() + b'"'
    if control and not is_identifier(control):
        raise Unsure
    return head + _encode(control)[1:]
