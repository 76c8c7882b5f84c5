"""Amounts as finance reads them: thousands separators, at the kind's quantum
(``Kind.quantum``), never rounded: an amount with more places than its quantum
keeps them all (``shared.domain.money.at_quantum``)."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from shared.domain.kinds import KINDS
from shared.domain.money import BASIS, at_quantum


def money(amount: str | Decimal | None, kind: str | None = None) -> str:
    """``"1234567890.1200"`` of a promo job → ``"1,234,567,890.12"``; None → ``""``."""
    if amount is None or amount == "":
        return ""
    try:
        value = Decimal(amount)
    except InvalidOperation:
        return str(amount)  # not a number: shown as the API sent it
    if not value.is_finite():
        return str(amount)
    known = KINDS.get(kind or "")
    return f"{at_quantum(value, known.quantum if known else BASIS):,f}"
