"""210 (motor carrier freight invoice) → one freight document (``FreightDocument``)
(docs/architecture.md#edi-intake).

One leg, ``leg_no`` 1, per ST. Its charges are the L1 lines: the one linehaul
(L1-08 empty or ``400``) gives the rate basis and rated quantity (a weight or a
count from the L0 of its lading line, L0-01 = L1-01); fuel
(``FUE``, ``405``), discount (``DSC``) and tax (``GST``, ``HST``, ``PST``,
``QST``) lines are priced by the contract's fuel and discount terms or are
not freight at all; every other L1-08 is an accessorial. The billed amount
is the L1 charges less tax, and all of them must add up to B3-07 (and L3-05).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from shared.domain.x12.mapping.numbers import SetValues, wire
from shared.domain.x12.mapping.sets import Place, Query
from shared.domain.x12.model import Segment
from shared.domain.x12.problems import Problems
from shared.domain.x12.reading.lazy import tagged

_TAGS = ("B3", "B2A", "L0", "L1", "L3")
LINEHAUL = frozenset({"", "400"})
NOT_ACCESSORIAL = LINEHAUL | {"FUE", "405", "DSC", "GST", "HST", "PST", "QST"}
TAX = frozenset({"GST", "HST", "PST", "QST"})
MILES = frozenset({"DM", "MR", "HG", "QP", "QS", "DD"})
KILOMETRES = frozenset({"DK", "KM"})
BASIS = {
    **dict.fromkeys(("PM", "MB"), "mile"),
    **dict.fromkeys(("PH", "CW"), "cwt"),
    **dict.fromkeys(("FR", "FC", "LS", "PS", "PL"), "flat"),
    **dict.fromkeys(("PU", "PC", "PP", "PA"), "unit"),
}


def map_210(place: Place, query: Query, problems: Problems) -> dict[str, Any] | None:
    """The document, or None when a problem was found (then it is in ``problems``)."""
    values = SetValues(problems, place.transaction_set)
    by_tag: dict[str, list[Segment]] = {tag: [] for tag in _TAGS}
    for segment in tagged(place.transaction_set, _TAGS):
        by_tag[segment.tag].append(segment)
    b3 = _b3(by_tag["B3"], by_tag["B2A"], values)
    if b3 is None or not values.ok:
        return None
    document_id = values.address(
        b3.get(2).strip(), "document_id", "B3-02 (the invoice number)", b3, 2
    )
    carrier = values.address(
        b3.get(11).strip().upper(), "partition_key", "B3-11 (the SCAC)", b3, 11
    )
    due = values.amount(b3, 7, "B3-07 (the net amount due)", required=True)
    charges = []
    for l1 in by_tag["L1"]:
        values.decimal(l1, 2, "L1-02 (the rate)")
        charge = values.amount(l1, 4, "L1-04", required=False)
        charges.append((l1, l1.get(8).strip().upper(), Decimal(0) if charge is None else charge))
    leg = _leg(by_tag, charges, values)
    if due is not None and values.ok:
        _totals(by_tag["L3"], charges, due, b3, values)
    if not values.ok or leg is None:
        return None
    return {
        "document_id": document_id,
        "partition_key": carrier,
        "contract_version": query.contract_version,
        "correlation_id": values.identifier(place.correlation_id(), "the correlation id"),
        "document_type": "EDI",
        "raw_payload": place.raw_payload(),
        "legs": [leg],
    }


Charge = tuple[Segment, str, Decimal]  # an L1, its charge code upper-cased, its L1-04


def _b3(b3s: list[Segment], b2as: list[Segment], values: SetValues) -> Segment | None:
    if len(b3s) != 1:
        values.unmappable(f"a 210 has one B3 (its invoice header), this one {len(b3s)}")
        return None
    for b2a in b2as:
        if b2a.get(1).strip() != "00":
            purpose = b2a.get(1).strip()
            message = f"B2A-01 {purpose!r}: only originals (00) are settled, not cancellations"
            values.fail("edi_unsupported_purpose", message, b2a, 1)
    if b3s[0].get(8).strip():
        message = f"B3-08 {b3s[0].get(8).strip()!r}: a correction is not settled"
        values.fail("edi_unsupported_purpose", message, b3s[0], 8)
    return b3s[0]


def _leg(
    by_tag: dict[str, list[Segment]], charges: list[Charge], values: SetValues
) -> dict[str, Any] | None:
    linehauls = [l1 for l1, code, _ in charges if code in LINEHAUL]
    if len(linehauls) != 1:
        where = linehauls[1] if linehauls else None
        values.unmappable(f"a 210 needs one linehaul L1, this one has {len(linehauls)}", where)
        return None
    linehaul = linehauls[0]
    basis = BASIS.get(linehaul.get(3).strip().upper())
    if basis is None:
        qualifier = linehaul.get(3).strip()
        values.unmappable(f"the linehaul's rate qualifier L1-03 {qualifier!r}", linehaul, 3)
        return None
    miles = _miles(by_tag, values)
    quantity = _rated_quantity(by_tag["L0"], linehaul, basis, miles, values)
    billed = sum((charge for _, code, charge in charges if code not in TAX), Decimal(0))
    accessorials = [
        values.identifier(l1.get(8).strip(), "the accessorial code L1-08", l1, 8)
        for l1, code, _ in charges
        if code not in NOT_ACCESSORIAL
    ]
    if len(accessorials) > 100:
        values.unmappable("more than 100 accessorial L1 lines", linehaul)
    leg: dict[str, Any] = {
        "leg_no": 1,
        "rate_basis": basis,
        "accessorials": accessorials,
        "billed_amount": values.money(billed, "the billed amount", linehaul, 4),
    }
    if quantity is not None:
        leg["rated_quantity"] = values.quantity(quantity, "the rated quantity", linehaul, 3)
    if miles is not None:
        leg["miles"] = values.quantity(miles[0], "the miles", miles[1], miles[2])
    return leg


def _miles(
    by_tag: dict[str, list[Segment]], values: SetValues
) -> tuple[Decimal, Segment, int] | None:
    """L1-17 when L1-18 says miles, else L0-02 when L0-03 does; one value or a problem."""
    for tag, at in (("L1", 17), ("L0", 2)):
        found: list[tuple[Decimal, Segment, int]] = []
        for segment in by_tag[tag]:
            unit = segment.get(at + 1).strip().upper()
            if unit in KILOMETRES:
                values.unmappable(f"{tag}-{at} is in kilometres ({unit})", segment, at + 1)
            elif unit in MILES:
                value = values.decimal(segment, at, f"{tag}-{at} (miles)")
                if value is not None:
                    found.append((value, segment, at))
        if len({value for value, _, _ in found}) > 1:
            told = ", ".join(wire(value) for value, _, _ in found)
            values.unmappable(f"the miles disagree: {told}", found[1][1], found[1][2])
        if found:
            return found[0]
    return None


def _rated_quantity(
    l0s: list[Segment],
    linehaul: Segment,
    basis: str,
    miles: tuple[Decimal, Segment, int] | None,
    values: SetValues,
) -> Decimal | None:
    if basis == "flat":
        return Decimal(1)
    if basis == "mile":
        if miles is None:
            values.unmappable("a per-mile linehaul and no miles (L1-17, L0-02)", linehaul, 3)
        return None if miles is None else miles[0]
    l0 = _lading(l0s, linehaul, 4 if basis == "cwt" else 8)
    if basis == "unit":
        quantity = None if l0 is None else values.decimal(l0, 8, "L0-08 (the lading quantity)")
        return Decimal(1) if quantity is None else quantity
    weight = None if l0 is None else values.decimal(l0, 4, "L0-04 (the weight)")
    if l0 is None or weight is None:
        values.unmappable("a per-hundredweight linehaul and no weight (L0-04)", linehaul, 3)
        return None
    if l0.get(11).strip().upper() == "K":
        values.unmappable("the weight is in kilograms: cwt rates are per 100 lb", l0, 11)
    return weight.scaleb(-2)


def _lading(l0s: list[Segment], linehaul: Segment, element: int) -> Segment | None:
    """The first L0 of the linehaul's lading line (L0-01 = L1-01; any L0 when none says
    so) that has ``element``."""
    line = linehaul.get(1).strip()
    same = [l0 for l0 in l0s if line and l0.get(1).strip() == line] or l0s
    return next((l0 for l0 in same if l0.get(element).strip()), None)


def _totals(
    l3s: list[Segment], charges: list[Charge], due: Decimal, b3: Segment, values: SetValues
) -> None:
    total = sum((charge for _, _, charge in charges), Decimal(0))
    if total != due:
        message = f"B3-07 {wire(due)} is not the sum of the L1 charges, {wire(total)}"
        values.fail("edi_total_mismatch", message, b3, 7)
    for l3 in l3s:
        stated = values.amount(l3, 5, "L3-05", required=False)
        if stated is not None and stated != total:
            message = f"L3-05 {wire(stated)} is not the sum of the L1 charges, {wire(total)}"
            values.fail("edi_total_mismatch", message, l3, 5)
