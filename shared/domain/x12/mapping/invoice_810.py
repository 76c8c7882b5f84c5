"""810 (invoice) → one promotional claim (``PromoDocument``), a line per allowance
(docs/architecture.md#edi-intake).

A line is a SAC with SAC01 ``A`` inside an IT1 loop (after its IT1, before
TDS), unless it is a percentage (SAC06/07 set). Header and summary SACs, and
charges (``C``) and no-charge (``N``) SACs, are not lines. An 810 with no such
allowance has nothing to settle and is skipped; a credit memo is refused.

A line is keyed by its ``line_no`` (IT1-01, else the IT1's place among the set's
IT1s), so a second allowance in one IT1 loop, or a line number twice, is
``edi_unmappable`` rather than two lines of one key. The store is the line's own
N1*ST when it has an N1-04, else the header's.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from shared.domain.x12.mapping.numbers import SetValues, product
from shared.domain.x12.mapping.sets import Place, Query
from shared.domain.x12.model import Segment, Skipped
from shared.domain.x12.problems import Problems
from shared.domain.x12.reading.lazy import tagged

_TAGS = ("BIG", "REF", "N1", "IT1", "SAC", "TDS")
SKU_QUALIFIERS = ("UP", "UK", "EN", "VN", "VP", "IN", "BP", "SK")
VENDOR_PARTIES = ("VN", "SU", "SE")
_MAX_LINE_NO = 2**31 - 1


@dataclass
class _Loop:
    it1: Segment
    ordinal: int  # 1 for the set's first IT1
    allowances: list[Segment] = field(default_factory=list)
    ship_to: Segment | None = None  # an N1*ST of the line


def map_810(place: Place, query: Query, problems: Problems) -> dict[str, Any] | Skipped | None:
    """The document, Skipped when no allowance is to settle, or None after a problem."""
    values = SetValues(problems, place.transaction_set)
    segments = tagged(place.transaction_set, _TAGS)
    bigs = [segment for segment in segments if segment.tag == "BIG"]
    if len(bigs) != 1:
        values.unmappable(f"an 810 has one BIG (its header), this one {len(bigs)}")
        return None
    big = bigs[0]
    if big.get(7).strip().upper() == "CR" or big.get(8).strip() == "01":
        message = "a credit memo (BIG-07 CR) or cancellation (BIG-08 01) is not settled"
        values.fail("edi_unsupported_purpose", message, big, 7 if big.get(7).strip() else 8)
        return None
    header, loops = _loops(segments, values)
    if not any(loop.allowances for loop in loops):
        return None if not values.ok else Skipped(place.control_number, "no_allowance")
    date = _date(big, values)
    lines = _lines(loops, header, date, values)
    document = {
        "document_id": values.address(
            big.get(2).strip(), "document_id", "BIG-02 (the invoice number)", big, 2
        ),
        "partition_key": _vendor(query, header, values),
        "contract_version": query.contract_version,
        "correlation_id": values.identifier(place.correlation_id(), "the correlation id"),
        "period": _period(query, date, values, big),
        "lines": lines,
    }
    return document if values.ok else None


def _loops(segments: list[Segment], values: SetValues) -> tuple[list[Segment], list[_Loop]]:
    """The header segments (before the first IT1) and the IT1 loops, up to TDS."""
    header: list[Segment] = []
    loops: list[_Loop] = []
    summary = False
    for segment in segments:
        tag = segment.tag
        if tag == "TDS":
            summary = True
            for n in range(1, 5):
                values.amount(segment, n, f"TDS-{n:02d}", required=False)
        elif tag == "IT1":
            loops.append(_Loop(segment, len(loops) + 1))
            summary = False
        elif not loops:
            header.append(segment)
        elif summary:
            continue
        elif tag == "SAC" and _allowance(segment):
            if loops[-1].allowances:
                values.unmappable("a second allowance on one IT1 line: one line per IT1", segment)
            loops[-1].allowances.append(segment)
        elif tag == "N1" and segment.get(1).strip() == "ST" and loops[-1].ship_to is None:
            loops[-1].ship_to = segment
    return header, loops


def _allowance(sac: Segment) -> bool:
    return sac.get(1).strip() == "A" and not (sac.get(6).strip() or sac.get(7).strip())


def _lines(
    loops: list[_Loop], header: list[Segment], date: dt.date | None, values: SetValues
) -> list[dict[str, Any]]:
    ship_to = _with_store(s for s in header if s.tag == "N1" and s.get(1).strip() == "ST")
    lines: list[dict[str, Any]] = []
    numbers: set[int] = set()
    for loop in loops:
        if not loop.allowances:
            continue
        line = _line(loop, loop.allowances[0], values)
        if line["line_no"] in numbers:
            values.unmappable(f"line number {line['line_no']} twice", loop.it1, 1)
        numbers.add(line["line_no"])
        store = _with_store([loop.ship_to] if loop.ship_to else []) or ship_to
        if store is not None:
            line["store_id"] = values.identifier(
                store.get(4).strip(), "the store (N1*ST N1-04)", store, 4
            )
        if date is not None:
            line["transaction_date"] = date.isoformat()
        lines.append(line)
    return lines


def _with_store(n1s: Iterable[Segment]) -> Segment | None:
    return next((n1 for n1 in n1s if n1.get(4).strip()), None)


def _line(loop: _Loop, sac: Segment, values: SetValues) -> dict[str, Any]:
    it1 = loop.it1
    tier = sac.get(13).strip() or sac.get(2).strip()
    at, element = (sac, 10) if sac.get(10).strip() else (it1, 2)
    units = values.decimal(at, element, "the units")
    if not at.get(element).strip():
        values.unmappable("no units (SAC-10 or IT1-02)", it1, 2)
    claimed = _claimed(sac, units, values)
    return {
        "line_no": _line_no(loop, values),
        "sku": _sku(it1, values),
        "promo_tier": values.identifier(tier, "the tier (SAC-13, else SAC-02)", sac, 2),
        "qualifying_units": "" if units is None else values.quantity(units, "units", at, element),
        "claimed_amount": "" if claimed is None else values.money(claimed, "allowance", sac, 5),
    }


def _line_no(loop: _Loop, values: SetValues) -> int:
    """IT1-01 when it is digits, else the IT1's place among the set's IT1s."""
    number = loop.it1.get(1).strip()
    if not (number.isdigit() and number.isascii()):
        return loop.ordinal
    if len(number) > 10 or not 1 <= int(number) <= _MAX_LINE_NO:
        values.unmappable(f"IT1-01 {number[:20]!r} is not a line number", loop.it1, 1)
        return loop.ordinal
    return int(number)


def _claimed(sac: Segment, units: Decimal | None, values: SetValues) -> Decimal | None:
    """SAC-05, else SAC-08 (a rate) times the units."""
    if sac.get(5).strip():
        return values.amount(sac, 5, "SAC-05 (the allowance)", required=False)
    rate = values.decimal(sac, 8, "SAC-08 (the rate)")
    if rate is None or units is None:
        if not sac.get(8).strip():
            values.unmappable("no allowance amount: SAC-05, or SAC-08 and units", sac, 5)
        return None
    return product(rate, units)


def _sku(it1: Segment, values: SetValues) -> str:
    pairs = [
        (it1.get(n).strip().upper(), it1.get(n + 1).strip(), n + 1)
        for n in range(6, 25, 2)
        if it1.get(n + 1).strip()
    ]
    for qualifier in SKU_QUALIFIERS:
        for found, value, at in pairs:
            if found == qualifier:
                return values.identifier(value, f"the item id ({qualifier})", it1, at)
    if not pairs:
        values.unmappable("no item id among IT1-06..25", it1, 6)
        return ""
    return values.identifier(pairs[0][1], "the item id", it1, pairs[0][2])


def _date(big: Segment, values: SetValues) -> dt.date | None:
    text = big.get(1).strip()
    try:
        if len(text) == 8 and text.isdigit() and text.isascii():
            return dt.date(int(text[:4]), int(text[4:6]), int(text[6:]))
    except ValueError:
        pass
    values.unmappable(f"BIG-01 {text[:20]!r} is not a date (CCYYMMDD)", big, 1)
    return None


def _vendor(query: Query, header: list[Segment], values: SetValues) -> str:
    """The query's partition_key, else REF*IA, REF*VN, or N1-04 of an N1 VN/SU/SE."""
    if query.partition_key is not None:
        return values.address(query.partition_key, "partition_key", "the query's partition_key")
    refs = {s.get(1).strip(): s for s in reversed(header) if s.tag == "REF" and s.get(2).strip()}
    for qualifier in ("IA", "VN"):
        if qualifier in refs:
            ref = refs[qualifier]
            return values.address(ref.get(2).strip(), "partition_key", f"REF*{qualifier}", ref, 2)
    for n1 in header:
        if n1.tag == "N1" and n1.get(1).strip() in VENDOR_PARTIES and n1.get(4).strip():
            return values.address(n1.get(4).strip(), "partition_key", "the vendor's N1-04", n1, 4)
    values.unmappable("no vendor: send partition_key, or REF*IA, REF*VN or N1*VN/SU/SE")
    return ""


def _period(query: Query, date: dt.date | None, values: SetValues, big: Segment) -> str:
    if query.period is not None:
        return values.identifier(query.period, "the query's period")
    if date is None:
        return ""
    return f"{date.year}-Q{(date.month - 1) // 3 + 1}"
