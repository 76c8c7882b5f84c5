"""What a remittance's webhook events tell (docs/api.md#webhooks), read when
the relay fans them out: ``remittance.received`` the remittance and what its
deductions came to; ``deduction.matched`` and ``deduction.disputed`` the
same, with the deductions that matched (or were written off within
tolerance, or matched by a person) or that wait for a person."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, select

from shared.adapters.db.remittances.tables import deductions as dd
from shared.adapters.db.remittances.tables import remittances as rm
from shared.domain.kinds import DEDUCTION_KIND, shown
from shared.domain.money import ZERO
from shared.domain.remittances.status import status_of

REMITTANCE_RECEIVED = "remittance.received"
DEDUCTION_MATCHED = "deduction.matched"
DEDUCTION_DISPUTED = "deduction.disputed"
TYPES = (REMITTANCE_RECEIVED, DEDUCTION_MATCHED, DEDUCTION_DISPUTED)


def _money(value: Decimal) -> str:
    return shown(DEDUCTION_KIND, value)


def data_of(engine: Engine, kind: str, remittance_id: str) -> dict[str, Any] | None:
    with engine.connect() as conn:
        head = conn.execute(select(rm).where(rm.c.id == remittance_id)).first()
        if head is None:
            return None
        rows = conn.execute(
            select(dd).where(dd.c.remittance_id == remittance_id).order_by(dd.c.seq)
        ).all()
    sums = {"matched": ZERO, "written_off": ZERO, "disputed": ZERO}
    for row in rows:
        for name in sums:
            sums[name] += Decimal(row._mapping[name])
    data: dict[str, Any] = {
        "remittance_id": head.id,
        "trace": head.trace,
        "payer": head.payer,
        "partition_key": head.partition_key,
        "currency": head.currency,
        "paid_total": _money(Decimal(head.paid_total)),
        "computed_total": _money(Decimal(head.computed_total)),
        "paid_at": None if head.paid_at is None else head.paid_at.isoformat(),
        "deductions": len(rows),
        **{name: _money(value) for name, value in sums.items()},
        "url": f"/v1/remittances/{head.id}",
    }
    if kind == REMITTANCE_RECEIVED:
        return data
    wanted = [
        r
        for r in rows
        if (Decimal(r.disputed) > 0 if kind == DEDUCTION_DISPUTED else Decimal(r.matched) > 0)
        or (kind == DEDUCTION_MATCHED and r.decision == "match")
    ]
    data["items"] = [
        {
            "deduction_id": r.id,
            "amount": _money(Decimal(r.amount)),
            "reason_code": r.reason_code,
            "reason_class": r.reason_class,
            "reference": r.reference,
            "matched": _money(Decimal(r.matched)),
            "written_off": _money(Decimal(r.written_off)),
            "disputed": _money(Decimal(r.disputed)),
            "dispute_reason": r.dispute_reason,
            "due_on": r.due_on.isoformat(),
            "status": status_of(Decimal(r.disputed), r.decision),
        }
        for r in wanted
    ]
    return data
