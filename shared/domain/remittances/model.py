"""A remittance: what one payer paid, line by line, and what it took off
(docs/architecture.md#remittances-and-deductions).

The same shape whether it came as an X12 820 (``x12_820``) or as JSON: wire
models that refuse unknown fields and coerce nothing, as a document's do
(``shared.domain.kinds.base.WireModel``). Money is ``Money``: a Decimal, a
string on the wire, never a float.

Signs are the payer's: an adjustment's ``amount`` is negative when it reduces
the payment. What is a deduction, and the balance check, are ``deductions``'.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from shared.domain.kinds.base import Identifier, WireModel
from shared.domain.kinds.dates import IsoDate
from shared.domain.money import Money

# ISO 4217: three upper-case letters.
Currency = Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]
# An X12 qualifier or code (REF01, DTM01, RMR01, ADX02...): short, as sent.
Code = Annotated[str, StringConstraints(min_length=1, max_length=16, pattern=r"^[^\x00-\x1f|]+$")]
_MANY = 1_000_000  # lines or adjustments in one remittance, as a document's lines


class Reference(WireModel):
    """A REF under a line: its qualifier (REF01) and value (REF02)."""

    qualifier: Code
    value: Identifier


class Dated(WireModel):
    """A DTM under a line: its qualifier (DTM01: ``003`` invoice, ``097`` transaction...)."""

    qualifier: Code
    date: IsoDate


class Adjustment(WireModel):
    """An ADX: money added to (positive) or taken off (negative) the payment."""

    amount: Money
    reason_code: Code  # ADX02, X12 element 426, or the partner's own ("ZZ", "70")
    reference: Identifier | None = None  # ADX04
    reference_qualifier: Code | None = None  # ADX03: CM credit memo, DB debit memo...


class Line(WireModel):
    """An RMR: one invoice (or credit memo...) paid, with what was adjusted on it."""

    reference: Identifier  # RMR02
    qualifier: Code | None = None  # RMR01: IV invoice, CM credit memo, OS...
    paid: Money  # RMR04
    invoiced: Money | None = None  # RMR05
    discount: Money | None = None  # RMR06: the terms discount taken
    references: tuple[Reference, ...] = Field(default=(), max_length=1000)
    dates: tuple[Dated, ...] = Field(default=(), max_length=1000)
    adjustments: tuple[Adjustment, ...] = Field(default=(), max_length=_MANY)


class Payer(WireModel):
    """Who paid, as the 820 names it: N1*PR (N103 qualifier, N104 id, N102 name),
    else the interchange's sender (ISA05, ISA06), which partner profiles are named by."""

    id: Identifier | None = None
    id_qualifier: Code | None = None
    name: Identifier | None = None
    from_sender: bool = False  # the id is the ISA sender's, the N1*PR giving none


class Remittance(WireModel):
    payer: Payer
    trace: Identifier  # TRN02: the payer's number for this payment
    paid_total: Money  # BPR02, as stated
    currency: Currency
    paid_at: IsoDate | None = None
    lines: tuple[Line, ...] = Field(default=(), max_length=_MANY)
    # ADX under ENT or the header: adjusting the payment, not a line.
    adjustments: tuple[Adjustment, ...] = Field(default=(), max_length=_MANY)
    control_number: Identifier | None = None  # ST02 of the 820 it came in
