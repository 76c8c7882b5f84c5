"""The matching rule (docs/architecture.md#remittances-and-deductions): one
deduction against the payer partition's settled accrual documents, decided as
a pure function.

The caller (the remittance's transaction, later) holds the partition's
documents locked, calls ``decide`` for each deduction and ``apply`` to carry
the decision into the open amounts the next deduction sees. Nothing here reads
or writes a row: a ``Decision`` says what to book, and the booking is the
ledger writer's. A partition of many documents need not be read whole:
``amount_window`` says which open amounts can match by amount, and ``decide``
on those (and the document a reference names) decides as on all.

The rule as §3.12 states it:

1. Only the ``promotion`` class matches; every other class is a dispute
   (``not_promotion``).
2. **By reference**: a reference that names one of the partition's settled
   documents takes from that document.
3. **Else by amount**: from the oldest open document whose open amount is
   within tolerance of the deduction.
4. **Tolerance**: above the open amount but within tolerance, the open amount
   is matched and the difference written off against the document; above
   tolerance, the open amount is matched and the rest is a dispute
   (``over_deduction``). What nothing takes is a dispute (``unmatched``).

Where §3.12 is silent, decided here:

- **Both tolerances set: the smaller applies.** A write-off is money given up
  with no person looking, so it must stay inside every limit the partner's
  profile sets: "2 % but never more than 50.00". This is the usual practice of
  payment-difference tolerances: SAP's tolerance groups "always use the lower"
  of the amount and the percentage (SAP KBA 3539821). A tolerance left at 0
  is *not set* (0 is §3.12's default), so a profile that sets only one of the
  two gets that one; with neither set the tolerance is 0 and only exact
  amounts match by amount. (SAP reads a blank as 0 and so matches nothing,
  the trap that KBA is about; a profile here cannot fall into it.)
- **Percent is of the open amount** of the document being matched (what the
  deduction is measured against), in percent points (``2`` is 2 %, as the
  name says), and is the one place a rounding happens: the limit is quantized
  once at a cent, half up (the quantum of the promotion class's documents).
- **Within tolerance** is ``|deduction - open| <= limit``, the boundary
  included, as every tolerance in settleq (§9).
- **By amount takes one document.** A deduction within tolerance of a document
  is that document's amount; making a deduction up from several documents is
  a guess at a subset sum, which is a person's ``match`` decision.
- **Oldest first; ties in age by document id**, so the decision does not
  depend on the order the caller lists documents in.
- **A reference to a document with nothing open** (fully deducted, or written
  below zero) matches nothing, writes nothing off and is never re-routed by
  amount: it is an ``over_deduction`` dispute against that document. The
  payer named it; taking the money from another document would hide a
  deduction of the same promotion twice, the fraud this loop exists to catch.
  A reference that names no settled document of the partition is no
  reference: the deduction is matched by amount.
- **Tolerance absorbs the difference of a match, never a whole deduction**:
  with nothing matched there is no write-off, whatever the absolute limit.
- **A deduction below the open amount** (by reference, or by amount within
  tolerance) is matched whole and the document stays open with the rest; an
  under-deduction is never written off (the payer may take the rest later).
- **Amounts**: a deduction is the positive amount taken (the caller turns an
  adjustment's negative amount into it); zero, negative or non-finite is
  refused with ``MatchingRefused``, as are negative tolerances, values outside
  §9's limits (money at most 4 places, the percent 6, all below 10^12), floats
  and two documents of one id. Nothing that comes in is rounded. Open amounts
  may be of any sign.

The invariant the §3.12 guarantee rests on, held by ``Decision`` itself (it
refuses to be built otherwise) and by ``apply``:
``matched + written_off + disputed == the deduction``, exactly; a match never
takes more than is open on its document; only a write-off takes a document's
open amount below zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal, InvalidOperation
from typing import Literal

from shared.domain.money import (
    BASIS,
    CENT,
    MONEY_PLACES,
    PRECISION,
    QUANTITY_PLACES,
    ZERO,
    DecimalOutOfRange,
    check_decimal,
    exact_arithmetic,
    quantize,
)

PROMOTION = "promotion"

DisputeReason = Literal["over_deduction", "unmatched", "not_promotion"]

_HUNDRED = Decimal(100)
# The window's bounds are quotients: rounded away from its inside, so the window
# only ever holds more, never fewer, of the documents that may match.
_OUTWARD_DOWN = Context(prec=PRECISION, rounding=ROUND_FLOOR, traps=[InvalidOperation])
_OUTWARD_UP = Context(prec=PRECISION, rounding=ROUND_CEILING, traps=[InvalidOperation])


class MatchingRefused(ValueError):
    """An input the rule cannot decide on: a deduction that is not a positive
    amount, a negative tolerance, a value outside §9's limits or not a Decimal,
    two documents of one id."""


class StaleDecision(MatchingRefused):
    """``apply`` was given documents the decision was not made on: a match
    would take more than is open, or names a document that is not there."""


def _finite(value: Decimal, what: str) -> Decimal:
    if not isinstance(value, Decimal) or not value.is_finite():
        raise MatchingRefused(f"{what} must be a finite Decimal, not {value!r}")
    return value


def _bounded(value: Decimal, what: str, places: int) -> Decimal:
    """``value``, refused unless within the wire's limits (§9): a deduction and a
    tolerance are bounded where they come in, so the exact arithmetic here has
    room to spare. An open amount, a sum of ledger rows, is only held finite: a
    sum of ``NUMERIC(20,4)`` rows by a percent's 18 digits stays far inside
    ``exact_arithmetic``'s 80, where a rounding would raise, never pass."""
    _finite(value, what)
    try:
        check_decimal(value, places)
    except DecimalOutOfRange as exc:
        raise MatchingRefused(f"{what} out of range: {exc}") from None
    return value


@dataclass(frozen=True, slots=True)
class Claim:
    """A deduction as matching sees it: ``amount`` is what the payer took, a
    positive Decimal; ``reference`` the adjustment's or line's, or None."""

    amount: Decimal
    reason_class: str
    reference: str | None
    date: date

    def __post_init__(self) -> None:
        if _bounded(self.amount, "a deduction's amount", MONEY_PLACES) <= ZERO:
            raise MatchingRefused(
                f"a deduction's amount is the positive amount taken, not {self.amount}"
                " (an adjustment's negative amount is taken as its absolute value)"
            )


@dataclass(frozen=True, slots=True)
class OpenDocument:
    """A settled accrual document of the payer's partition: its open amount (the
    sum of ``delta`` over its rows, matches included) and when it was settled,
    for "the oldest first"."""

    document_id: str
    open_amount: Decimal
    settled_at: datetime

    def __post_init__(self) -> None:
        if not self.document_id:
            raise MatchingRefused("a document needs its document_id")
        _finite(self.open_amount, f"document {self.document_id}'s open amount")


@dataclass(frozen=True, slots=True)
class Tolerance:
    """A partner profile's tolerance: ``absolute`` money and ``percent`` (points,
    of the open amount). 0 is unset; with both set the smaller limit applies."""

    absolute: Decimal = ZERO
    percent: Decimal = ZERO

    def __post_init__(self) -> None:
        for what, value, places in (
            ("absolute", self.absolute, MONEY_PLACES),
            ("percent", self.percent, QUANTITY_PLACES),
        ):
            if _bounded(value, f"tolerance {what}", places) < ZERO:
                raise MatchingRefused(f"tolerance {what} must not be negative, not {value}")
        # Points of the open amount: past 100 a deduction of any size would "match".
        if self.percent > _HUNDRED:
            raise MatchingRefused(f"tolerance percent is at most 100, not {self.percent}")

    def limit(self, open_amount: Decimal) -> Decimal:
        """How far a deduction may differ from ``open_amount`` and still match it:
        the smaller of the limits set, the percent one rounded half up to a cent."""
        limits: list[Decimal] = []
        if self.absolute:
            limits.append(self.absolute)
        if self.percent:
            with exact_arithmetic():
                share = open_amount * self.percent / _HUNDRED
            limits.append(quantize(share, CENT))
        return min(limits, default=ZERO)


@dataclass(frozen=True, slots=True)
class Match:
    """``amount`` taken from the document: its open amount falls by as much."""

    document_id: str
    amount: Decimal


@dataclass(frozen=True, slots=True)
class WriteOff:
    """The excess within tolerance, booked ``written_off``: against the document
    matched (None only for a deduction that took from no document, which this
    rule never writes off but a person's ``accept`` does)."""

    document_id: str | None
    amount: Decimal


@dataclass(frozen=True, slots=True)
class Dispute:
    """What becomes a ``deduction`` dispute, and why; ``document_id`` is the
    document it was measured against, if any."""

    amount: Decimal
    reason: DisputeReason
    document_id: str | None = None


@dataclass(frozen=True, slots=True)
class Decision:
    """What one deduction becomes. Refuses to exist unless its parts are
    positive and add up to the deduction exactly."""

    claim: Claim
    matches: tuple[Match, ...] = ()
    write_off: WriteOff | None = None
    dispute: Dispute | None = None

    def __post_init__(self) -> None:
        parts = [m.amount for m in self.matches]
        parts += [p.amount for p in (self.write_off, self.dispute) if p is not None]
        if any(part <= ZERO for part in parts):
            raise MatchingRefused(f"a decision's parts must be positive: {self}")
        with exact_arithmetic():
            total = sum(parts, ZERO)
        if total != self.claim.amount:
            raise MatchingRefused(f"a decision's parts add up to {total}, not the deduction")

    @property
    def matched(self) -> Decimal:
        with exact_arithmetic():
            return sum((m.amount for m in self.matches), ZERO)

    @property
    def written_off(self) -> Decimal:
        return self.write_off.amount if self.write_off else ZERO

    @property
    def disputed(self) -> Decimal:
        return self.dispute.amount if self.dispute else ZERO


def decide(
    claim: Claim, documents: Iterable[OpenDocument], tolerance: Tolerance = Tolerance()
) -> Decision:
    """The decision for ``claim`` against the partition's settled ``documents``
    (every one a reference may name, with nothing open or not: a document left
    out is one the reference does not name). Deterministic: the same claim,
    documents (in any order) and tolerance give the same decision. Raises
    ``MatchingRefused`` for two documents of one id."""
    by_id = _by_id(documents)
    if claim.reason_class != PROMOTION:
        return Decision(claim, dispute=Dispute(claim.amount, "not_promotion"))
    document = by_id.get(claim.reference) if claim.reference is not None else None
    if document is None:
        document = _by_amount(claim.amount, by_id.values(), tolerance)
    if document is None:
        return Decision(claim, dispute=Dispute(claim.amount, "unmatched"))
    return _take(claim, document, tolerance)


def _by_id(documents: Iterable[OpenDocument]) -> dict[str, OpenDocument]:
    by_id: dict[str, OpenDocument] = {}
    for document in documents:
        if document.document_id in by_id:
            raise MatchingRefused(f"document {document.document_id} is listed twice")
        by_id[document.document_id] = document
    return by_id


def _by_amount(
    amount: Decimal, documents: Iterable[OpenDocument], tolerance: Tolerance
) -> OpenDocument | None:
    with exact_arithmetic():
        near = [
            d
            for d in documents
            if d.open_amount > ZERO
            and (amount - d.open_amount).copy_abs() <= tolerance.limit(d.open_amount)
        ]
    return min(near, key=lambda d: (d.settled_at, d.document_id), default=None)


def amount_window(amount: Decimal, tolerance: Tolerance) -> tuple[Decimal, Decimal | None]:
    """The open amounts (low, high; None: no upper bound) a document may have and
    be within ``tolerance`` of a deduction of ``amount``, with some to spare: a
    caller holding many documents passes ``decide`` only those in the window
    (and the one a reference names) and gets the same decision as with all.

    With both limits set the smaller applies, so each bounds the window alone:
    the absolute one directly, the percent one through ``open * p / 100``
    (plus the half cent its rounding may add). Its bounds are rounded outward
    to the ledger's four places, so a query can hold them as they are."""
    low, high = amount, amount
    with exact_arithmetic():
        if tolerance.absolute:
            low, high = amount - tolerance.absolute, amount + tolerance.absolute
        if not tolerance.percent:
            return low, high
        # |amount - open| <= open * share + half a cent, solved for open.
        share, half_cent = tolerance.percent / _HUNDRED, CENT / 2
        floor = _OUTWARD_DOWN.quantize(_OUTWARD_DOWN.divide(amount - half_cent, 1 + share), BASIS)
        low = max(low, floor) if tolerance.absolute else floor
        if share < 1:
            ceiling = _OUTWARD_UP.quantize(_OUTWARD_UP.divide(amount + half_cent, 1 - share), BASIS)
            high = min(high, ceiling) if tolerance.absolute else ceiling
        elif not tolerance.absolute:
            return low, None
    return low, high


def _take(claim: Claim, document: OpenDocument, tolerance: Tolerance) -> Decision:
    available = max(document.open_amount, ZERO)
    matched = min(claim.amount, available)
    with exact_arithmetic():
        rest = claim.amount - matched
    matches = (Match(document.document_id, matched),) if matched else ()
    if not rest:
        return Decision(claim, matches)
    if matched and rest <= tolerance.limit(available):
        return Decision(claim, matches, write_off=WriteOff(document.document_id, rest))
    return Decision(claim, matches, dispute=Dispute(rest, "over_deduction", document.document_id))


def apply(documents: Sequence[OpenDocument], decision: Decision) -> tuple[OpenDocument, ...]:
    """``documents`` (same order) with the decision's matches and write-off taken
    off their open amounts, for the next deduction of the same transaction.

    Raises ``StaleDecision`` when a match names a document not given or takes
    more than is open on it now: a decision made on other open amounts than
    these is never applied."""
    by_id = _by_id(documents)
    taken: dict[str, Decimal] = {}
    with exact_arithmetic():
        for match in decision.matches:
            document = by_id.get(match.document_id)
            if document is None:
                raise StaleDecision(f"document {match.document_id} is not among the documents")
            taken[match.document_id] = taken.get(match.document_id, ZERO) + match.amount
            if taken[match.document_id] > document.open_amount:
                raise StaleDecision(
                    f"matches take {taken[match.document_id]} from document"
                    f" {match.document_id}, which has {document.open_amount} open"
                )
        write_off = decision.write_off
        if write_off is not None and write_off.document_id is not None:
            if write_off.document_id not in by_id:
                raise StaleDecision(f"document {write_off.document_id} is not among the documents")
            taken[write_off.document_id] = taken.get(write_off.document_id, ZERO) + write_off.amount
        return tuple(
            replace(d, open_amount=d.open_amount - taken[d.document_id])
            if d.document_id in taken
            else d
            for d in documents
        )
