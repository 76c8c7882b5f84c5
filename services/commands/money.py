"""Amounts as finance reads them: thousands separators, at the kind's quantum
(0.01 for promo_accrual and freight_audit, 0.0001 for recipe_cost), never
rounded: an amount with more places than its quantum keeps them all."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from shared.domain.money import BASIS, CENT

QUANTA = {"promo_accrual": CENT, "freight_audit": CENT, "recipe_cost": BASIS}


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
    quantum = QUANTA.get(kind or "", BASIS)
    if value == value.quantize(quantum):
        return f"{value.quantize(quantum):,}"
    return f"{value.normalize():,f}"
