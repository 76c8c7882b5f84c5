"""Deduction disputes in the dispute queue's figures (docs/api.md#disputes):
those waiting for a person's decision, their amount, how many are past their
window, and the oldest's due date."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import Engine, select

from shared.adapters.db.remittances.tables import deductions as dd
from shared.domain.money import ZERO


@dataclass(frozen=True)
class Waiting:
    count: int
    amount: Decimal
    past_window: int
    oldest_due_on: dt.date | None


def waiting(engine: Engine, today: dt.date) -> Waiting:
    """Disputed deductions with no decision yet (one read; summed here: SQLite
    keeps money as text)."""
    with engine.connect() as conn:
        rows = conn.execute(
            select(dd.c.disputed, dd.c.due_on).where(dd.c.decision.is_(None), dd.c.disputed > 0)
        ).all()
    return Waiting(
        count=len(rows),
        amount=sum((Decimal(r.disputed) for r in rows), ZERO),
        past_window=sum(1 for r in rows if r.due_on < today),
        oldest_due_on=min((r.due_on for r in rows), default=None),
    )
