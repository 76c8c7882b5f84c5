"""A remittance's deductions and its balance check
(docs/architecture.md#remittances-and-deductions).

A deduction is money the payer took:
- every negative adjustment, on a line or standing alone;
- a line's unexplained short-pay: ``invoiced - discount - paid`` less what its
  adjustments took, when above zero (reason ``unexplained``).

"Less what its adjustments took" is ``+ sum(adjustments)``, their signs as
sent (negative takes): the EDI.Net sample's line 26801 is 143.76 short and
carries ``ADX*-143.76*59``, and it is one deduction of 143.76, not two.

Each deduction keeps the partner's raw ``reason_code`` and gets a
``reason_class`` from ``DEFAULT_REASONS`` (X12 element 426), which a partner's
profile overrides per code, since retailers use codes of their own.

The balance check compares the stated total (BPR02) with the paid lines plus
the standalone adjustments; a difference is reported, never refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Final, Literal, get_args

from shared.domain.money import ZERO, exact_arithmetic
from shared.domain.remittances.model import Adjustment, Line, Remittance

ReasonClass = Literal[
    "promotion",
    "pricing",
    "shortage",
    "damage",
    "return",
    "duplicate",
    "compliance",
    "freight",
    "discount",
    "unexplained",
    "other",
]
REASON_CLASSES: Final = frozenset(get_args(ReasonClass))
UNEXPLAINED: Final = "unexplained"  # the reason_code and class of a short-pay no ADX explains

# X12 element 426 (Adjustment Reason Code), the codes settleq classes by default; any
# other code is "other" unless the partner's profile says what it means.
DEFAULT_REASONS: Final[Mapping[str, ReasonClass]] = {
    "01": "pricing",
    "02": "promotion",
    "06": "shortage",
    "14": "return",
    "16": "promotion",
    "19": "duplicate",
    "22": "freight",
    "24": "discount",
    "54": "freight",
    "56": "promotion",
    "57": "promotion",
    "59": "shortage",
}


@dataclass(frozen=True, slots=True)
class Deduction:
    """Money taken off a payment. ``amount`` is what was taken: above zero."""

    amount: Decimal
    reason_code: str
    reason_class: ReasonClass
    reference: str | None  # the adjustment's, else its line's RMR02
    line: int | None  # the index of its line in ``Remittance.lines``; None: standalone


@dataclass(frozen=True, slots=True)
class Balance:
    """The stated total against what the lines and standalone adjustments add up to."""

    stated: Decimal  # BPR02
    computed: Decimal  # sum of the lines' paid, plus the standalone adjustments

    @property
    def difference(self) -> Decimal:
        """``stated - computed``: negative when the payer states less than it itemises."""
        with exact_arithmetic():
            return self.stated - self.computed

    @property
    def balanced(self) -> bool:
        return self.difference == 0


def reason_class(code: str, overrides: Mapping[str, str] | None = None) -> ReasonClass:
    """The class of a raw reason code: the profile's ``overrides`` first, then
    ``DEFAULT_REASONS``, else ``other``. Raises ``ValueError`` for an override
    naming no class (a profile is checked when it is put, so this is a bug)."""
    code = code.strip()
    if overrides and code in overrides:
        chosen = overrides[code]
        if chosen not in REASON_CLASSES:
            raise ValueError(f"reason code {code!r} maps to {chosen!r}, which is no reason class")
        return chosen  # type: ignore[return-value]  # checked against ReasonClass's values
    return DEFAULT_REASONS.get(code, "other")


def deductions(
    remittance: Remittance, overrides: Mapping[str, str] | None = None
) -> tuple[Deduction, ...]:
    """The remittance's deductions: each line's (its negative adjustments, then its
    unexplained short-pay), in line order, then the standalone negative adjustments."""
    found: list[Deduction] = []
    for index, line in enumerate(remittance.lines):
        for adjustment in line.adjustments:
            taken = _taken(adjustment, line.reference, index, overrides)
            if taken is not None:
                found.append(taken)
        short = unexplained_short_pay(line)
        if short > 0:
            found.append(Deduction(short, UNEXPLAINED, UNEXPLAINED, line.reference, index))
    for adjustment in remittance.adjustments:
        taken = _taken(adjustment, None, None, overrides)
        if taken is not None:
            found.append(taken)
    return tuple(found)


def unexplained_short_pay(line: Line) -> Decimal:
    """``invoiced - discount - paid + sum(adjustments)``: what the line is short that no
    adjustment explains (zero or less when none; zero for a line with no invoiced amount)."""
    if line.invoiced is None:
        return ZERO
    with exact_arithmetic():
        explained = sum((a.amount for a in line.adjustments), ZERO)
        return line.invoiced - (line.discount or ZERO) - line.paid + explained


def balance(remittance: Remittance) -> Balance:
    """The balance check. Line adjustments are not added: a line's ``paid`` is
    already net of them (the EDI.Net sample balances to the cent that way)."""
    with exact_arithmetic():
        paid = sum((line.paid for line in remittance.lines), ZERO)
        computed = paid + sum((a.amount for a in remittance.adjustments), ZERO)
    return Balance(remittance.paid_total, computed)


def _taken(
    adjustment: Adjustment,
    line_reference: str | None,
    line: int | None,
    overrides: Mapping[str, str] | None,
) -> Deduction | None:
    if adjustment.amount >= 0:
        return None  # it adds to the payment: nothing was taken
    return Deduction(
        -adjustment.amount,
        adjustment.reason_code,
        reason_class(adjustment.reason_code, overrides),
        adjustment.reference or line_reference,
        line,
    )
