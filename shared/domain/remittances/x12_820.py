"""An X12 820 (payment order / remittance advice) into remittances
(docs/architecture.md#remittances-and-deductions), 004010 and 005010 alike:
the segments read here are laid out the same in both.

The file is read by the §10 reader (``read_file``) and each set's segments are
taken as the 810 and 210 mappings take theirs (``tagged``): one tokenizer.
Each ST..SE is one remittance:

| field | from |
|---|---|
| ``payer`` | N1*PR (N102 name, N103/N104 id), else the interchange's sender (ISA05/ISA06) |
| ``trace`` | TRN02 |
| ``paid_total`` | BPR02 |
| ``currency`` | the header's CUR02, else USD (an 820 states its currency only when not USD) |
| ``paid_at`` | BPR16, else the header's first DTM |
| a line | each RMR, with the REF and DTM after it; an ADX after an RMR of its ENT is that line's |
| a standalone adjustment | an ADX under ENT before its first RMR, or in the header |

Amounts are X12's R type (``21298.97``, ``-18200``; a decimal point where
needed), unlike the N2 of the 810 and 210.

What cannot be a remittance refuses the file with a located problem (the
codes of ``docs/architecture.md#edi-intake``): no BPR or no TRN
(``edi_unmappable``), an amount that is not a number (``edi_bad_number``), a
template's placeholder text where a reference or a date belongs
(``edi_unmappable``, saying so), a set other than an 820
(``edi_unsupported_transaction_set``). ``read_820`` raises nothing: a
refusal is its answer's ``problems``.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal

from pydantic import ValidationError

from shared.domain.money import MONEY_PLACES
from shared.domain.remittances.model import Adjustment, Dated, Line, Payer, Reference, Remittance
from shared.domain.x12.mapping.numbers import SetValues, fits, r
from shared.domain.x12.mapping.sets import Place
from shared.domain.x12.model import EdiRefused, Interchange, Problem, Segment
from shared.domain.x12.problems import Problems
from shared.domain.x12.reading.lazy import tagged
from shared.domain.x12.reading.reader import read_file

_TAGS = ("BPR", "TRN", "CUR", "DTM", "N1", "ENT", "RMR", "REF", "ADX")
_CURRENCY = re.compile(r"[A-Z]{3}")
_CODE = re.compile(r"[^\x00-\x1f|]{1,16}")
DEFAULT_CURRENCY = "USD"

# A template's blanks, as published guides fill them: a date's format, or words
# naming what belongs there ("REFERENCE NUMBER", "TOTAL DOLLAR AMT OF CHECK").
# Real references hold a digit; these never do.
_DATE_MASKS = frozenset({"CCYYMMDD", "YYYYMMDD", "YYMMDD", "MMDDYY", "MMDDCCYY", "HHMM"})
_BLANK_WORDS = frozenset({"NUMBER", "NO.", "AMOUNT", "AMT", "I.D.", "ID", "NAME", "DATE"})


@dataclass(frozen=True, slots=True)
class RemittanceFile:
    """A file read: its remittances, or the problems that refuse it whole.
    ``interchanges`` is set when the envelopes could be read (a 997 can be written)."""

    remittances: tuple[Remittance, ...]
    problems: tuple[Problem, ...]
    interchanges: tuple[Interchange, ...] | None

    @property
    def refused(self) -> bool:
        return bool(self.problems)


def read_820(data: bytes) -> RemittanceFile:
    """Every 820 of the file, or its problems (then no remittance). A file the reader
    refuses but whose envelopes it read (a control number that is a placeholder too)
    is mapped all the same, so that its refusal names every problem, not the first."""
    problems = Problems()
    try:
        interchanges = read_file(data)
    except EdiRefused as exc:
        if exc.interchanges is None:
            return RemittanceFile((), tuple(exc.problems), None)
        problems.extend(exc.problems)
        interchanges = exc.interchanges
    remittances: list[Remittance] = []
    for interchange in interchanges:
        for group in interchange.groups:
            for transaction_set in group.sets:
                place = Place(interchange, group, transaction_set)
                if place.code != "820":
                    message = f"transaction set {place.code[:10]!r}: a remittance is an 820"
                    st = transaction_set.st
                    code = "edi_unsupported_transaction_set"
                    problems.at(code, message, st, 1, place.control_number)
                    continue
                remittance = map_820(place, problems)
                if remittance is not None:
                    remittances.append(remittance)
    if not problems and not remittances:
        problems.add(Problem("edi_no_documents", "no 820 in the file: no remittance"))
    if problems:
        return RemittanceFile((), tuple(problems.in_order()), interchanges)
    return RemittanceFile(tuple(remittances), (), interchanges)


def map_820(place: Place, problems: Problems) -> Remittance | None:
    """One 820 set's remittance, or None when a problem was found (then it is in ``problems``)."""
    values = _Values(problems, place)
    try:
        remittance = _remittance(place, values)
    except ValidationError as exc:  # every value is checked where read: a bug, not a 500
        values.unmappable(f"not a remittance: {exc.errors()[0]['msg']}")
        return None
    return remittance if values.ok else None


def _remittance(place: Place, values: _Values) -> Remittance | None:
    segments = tagged(place.transaction_set, _TAGS)
    bpr = values.one(segments, "BPR", "the payment")
    trn = values.one(segments, "TRN", "the trace number")
    if bpr is None or trn is None:
        return None
    header, entities = _split(segments)
    paid_total = values.r_amount(bpr, 2, "BPR02 (the amount paid)", required=True)
    trace = values.reference(trn, 2, "TRN02 (the trace number)", required=True)
    payer = _payer(header, place.interchange, values)
    currency = _currency(header, values)
    paid_at = _paid_at(bpr, header, values)
    lines, standalone = _lines(entities, values)
    standalone = [*(values.adjustment(s) for s in header if s.tag == "ADX"), *standalone]
    if not values.ok or payer is None or paid_total is None or trace is None:
        return None
    return Remittance(
        payer=payer,
        trace=trace,
        paid_total=paid_total,
        currency=currency,
        paid_at=paid_at,
        lines=tuple(lines),
        adjustments=tuple(a for a in standalone if a is not None),
        control_number=place.control_number,
    )


def _split(segments: list[Segment]) -> tuple[list[Segment], list[list[Segment]]]:
    """The header (before the first ENT or RMR), and each ENT's segments (an 820
    that sends RMRs with no ENT is one entity)."""
    header: list[Segment] = []
    entities: list[list[Segment]] = []
    for segment in segments:
        if segment.tag == "ENT" or (segment.tag == "RMR" and not entities):
            entities.append([])
        if entities:
            entities[-1].append(segment)
        else:
            header.append(segment)
    return header, entities


def _lines(
    entities: list[list[Segment]], values: _Values
) -> tuple[list[Line], list[Adjustment | None]]:
    """The lines, and the ADXs of the ENTs (before their first RMR: X12 puts an
    ENT's ADX loop before its RMR loop, so one after an RMR is the line's)."""
    lines: list[Line] = []
    standalone: list[Adjustment | None] = []
    for entity in entities:
        rmr: Segment | None = None
        under: list[Segment] = []
        for segment in entity:
            if segment.tag == "RMR":
                if rmr is not None:
                    lines.extend(values.line(rmr, under))
                rmr, under = segment, []
            elif rmr is not None:
                under.append(segment)
            elif segment.tag == "ADX":
                standalone.append(values.adjustment(segment))
        if rmr is not None:
            lines.extend(values.line(rmr, under))
    return lines, standalone


def _payer(header: list[Segment], interchange: Interchange, values: _Values) -> Payer | None:
    n1 = next((s for s in header if s.tag == "N1" and s.get(1).strip() == "PR"), None)
    if n1 is None:
        return _sender(interchange, None)
    name = n1.get(2).strip() or None
    if name is not None:
        values.identifier(name, "N102 (the payer's name)", n1, 2)
    payer_id = values.reference(n1, 4, "N104 (the payer's id)", required=False)
    qualifier = values.code(n1, 3, "N103 (the payer id's qualifier)")
    if not values.ok:
        return None
    if payer_id is None:  # named, but identified only by the envelope
        return _sender(interchange, name)
    return Payer(id=payer_id, id_qualifier=qualifier, name=name)


def _sender(interchange: Interchange, name: str | None) -> Payer:
    return Payer(
        id=interchange.sender_id or None,
        id_qualifier=interchange.sender_qualifier or None,
        name=name,
        from_sender=True,
    )


def _currency(header: list[Segment], values: _Values) -> str:
    cur = next((s for s in header if s.tag == "CUR"), None)
    if cur is None:
        return DEFAULT_CURRENCY
    currency = cur.get(2).strip()
    if not _CURRENCY.fullmatch(currency):
        values.unmappable(f"CUR02 {currency[:20]!r} is not a currency (ISO 4217)", cur, 2)
    return currency


def _paid_at(bpr: Segment, header: list[Segment], values: _Values) -> dt.date | None:
    if bpr.get(16).strip():
        return values.date(bpr, 16, "BPR16 (the payment's date)")
    dtm = next((s for s in header if s.tag == "DTM"), None)
    return None if dtm is None else values.date(dtm, 2, f"DTM02 (DTM*{dtm.get(1).strip()})")


def _placeholder(text: str) -> bool:
    upper = text.strip().upper()
    if upper in _DATE_MASKS:
        return True
    words = upper.split()
    return (
        len(words) > 1
        and not any(c.isdigit() for c in upper)
        and any(w.rstrip("#") in _BLANK_WORDS for w in words)
    )


class _Values(SetValues):
    """One 820's values, each checked where it is read (the problem names its element)."""

    def __init__(self, problems: Problems, place: Place) -> None:
        super().__init__(problems, place.transaction_set)

    def one(self, segments: list[Segment], tag: str, what: str) -> Segment | None:
        found = [s for s in segments if s.tag == tag]
        if len(found) != 1:
            many = f"{len(found)} {tag} ({what}): an 820 has one"
            self.unmappable(
                many if found else f"no {tag} ({what}): an 820 without one is no remittance"
            )
            return None
        return found[0]

    def r_amount(self, segment: Segment, n: int, what: str, *, required: bool) -> Decimal | None:
        """An amount of X12 type R (not the N2 of ``amount``), fitting Money; None when
        empty (a problem when ``required``) or bad."""
        text = segment.get(n).strip()
        if not text:
            if required:
                self.unmappable(f"{what} is empty", segment, n)
            return None
        value = r(text)
        if value is None:
            blank = " (a template's placeholder)" if _placeholder(text) else ""
            message = f"{what} {text[:30]!r} is not a number{blank}"
            self.fail("edi_bad_number", message, segment, n)
            return None
        if fits(value, MONEY_PLACES) is None:
            message = f"{what} {text[:30]} does not fit: at most 4 decimals, below 10^12"
            self.unmappable(message, segment, n)
            return None
        return value

    def reference(self, segment: Segment, n: int, what: str, *, required: bool) -> str | None:
        text = segment.get(n).strip()
        if not text:
            if required:
                self.unmappable(f"{what} is empty", segment, n)
            return None
        if _placeholder(text):
            self.unmappable(f"{what} {text[:40]!r} is a template's placeholder", segment, n)
        return self.identifier(text, what, segment, n)

    def code(self, segment: Segment, n: int, what: str) -> str | None:
        text = segment.get(n).strip()
        if text and not _CODE.fullmatch(text):
            self.unmappable(f"{what} {text[:20]!r} is not a code", segment, n)
        return text or None

    def date(self, segment: Segment, n: int, what: str) -> dt.date | None:
        text = segment.get(n).strip()
        try:
            if len(text) == 8 and text.isdigit() and text.isascii():
                return dt.date(int(text[:4]), int(text[4:6]), int(text[6:]))
        except ValueError:
            pass
        blank = "a template's placeholder" if _placeholder(text) else "not a date (CCYYMMDD)"
        self.unmappable(f"{what} {text[:20]!r} is {blank}", segment, n)
        return None

    def adjustment(self, adx: Segment) -> Adjustment | None:
        amount = self.r_amount(adx, 1, "ADX01 (the adjustment)", required=True)
        reason = self.code(adx, 2, "ADX02 (the reason)")
        if reason is None:
            self.unmappable("ADX02 (the reason) is empty", adx, 2)
        reference = self.reference(adx, 4, "ADX04 (the adjustment's reference)", required=False)
        qualifier = self.code(adx, 3, "ADX03 (the reference's qualifier)")
        if amount is None or reason is None or not self.ok:
            return None
        return Adjustment(
            amount=amount, reason_code=reason, reference=reference, reference_qualifier=qualifier
        )

    def line(self, rmr: Segment, under: list[Segment]) -> list[Line]:
        """The RMR's line (none after a problem), with the REF, DTM and ADX under it."""
        reference = self.reference(rmr, 2, "RMR02 (the line's reference)", required=True)
        paid = self.r_amount(rmr, 4, "RMR04 (the amount paid)", required=True)
        invoiced = self.r_amount(rmr, 5, "RMR05 (the amount invoiced)", required=False)
        discount = self.r_amount(rmr, 6, "RMR06 (the discount taken)", required=False)
        qualifier = self.code(rmr, 1, "RMR01 (the reference's qualifier)")
        references, dates, adjustments = [], [], []
        for segment in under:
            if segment.tag == "ADX":
                adjustments.append(self.adjustment(segment))
            elif segment.tag == "REF" and segment.get(2).strip():
                value = self.reference(segment, 2, "REF02", required=True)
                kind = self.code(segment, 1, "REF01 (the reference's qualifier)")
                if value is not None and kind is not None and self.ok:
                    references.append(Reference(qualifier=kind, value=value))
            elif segment.tag == "DTM":
                date = self.date(segment, 2, f"DTM02 (DTM*{segment.get(1).strip()[:10]})")
                kind = self.code(segment, 1, "DTM01 (the date's qualifier)")
                if date is not None and kind is not None and self.ok:
                    dates.append(Dated(qualifier=kind, date=date))
        if reference is None or paid is None or not self.ok:
            return []
        return [
            Line(
                reference=reference,
                qualifier=qualifier,
                paid=paid,
                invoiced=invoiced,
                discount=discount,
                references=tuple(references),
                dates=tuple(dates),
                adjustments=tuple(a for a in adjustments if a is not None),
            )
        ]
