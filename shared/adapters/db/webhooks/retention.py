"""What the webhooks component's pruner deletes (docs/operations.md#retention),
one small batch a transaction, so that no table a producer can grow grows
without bound: delivered deliveries and their attempts, failed ones later,
events once none of their deliveries remain, and refused X12 files. Each
function deletes at most ``limit`` rows of its main table and says how many
of each table it deleted."""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Engine, and_, delete, exists, or_, select

from shared.adapters.db.edi.tables import edi_refusals
from shared.adapters.db.tables import PUBLISHED_TYPES, outbox, webhook_attempts, webhook_deliveries

ev, dl, at = outbox, webhook_deliveries, webhook_attempts


def deliveries(
    engine: Engine, delivered_before: dt.datetime, failed_before: dt.datetime, limit: int
) -> dict[str, int]:
    """Deliveries delivered before ``delivered_before`` (their last attempt) and
    failed before ``failed_before`` (their last attempt, or their creation for
    one failed without any), with their attempts. Pending ones never."""
    old = or_(
        and_(dl.c.status == "delivered", dl.c.last_attempt_at < delivered_before),
        and_(dl.c.status == "failed", dl.c.last_attempt_at < failed_before),
        and_(
            dl.c.status == "failed",
            dl.c.last_attempt_at.is_(None),
            dl.c.created_at < failed_before,
        ),
    )
    with engine.begin() as conn:
        ids = conn.execute(select(dl.c.id).where(old).limit(limit)).scalars().all()
        if not ids:
            return {"webhook_deliveries": 0, "webhook_attempts": 0}
        attempts = conn.execute(delete(at).where(at.c.delivery_id.in_(ids))).rowcount
        # Still old: a manual retry may have made one pending meanwhile.
        gone = conn.execute(delete(dl).where(dl.c.id.in_(ids), old)).rowcount
    return {"webhook_deliveries": gone, "webhook_attempts": attempts}


def events(engine: Engine, fanned_out_before: dt.datetime, limit: int) -> dict[str, int]:
    """Webhook events fanned out before ``fanned_out_before`` none of whose
    deliveries remain (never one not yet fanned out, never an outcome unit: the
    ledger feed reads those for good)."""
    lonely = and_(
        ev.c.type.not_in(PUBLISHED_TYPES),
        ev.c.published_at < fanned_out_before,
        ~exists().where(dl.c.event_id == ev.c.event_id),
    )
    with engine.begin() as conn:
        ids = conn.execute(select(ev.c.id).where(lonely).limit(limit)).scalars().all()
        gone = conn.execute(delete(ev).where(ev.c.id.in_(ids), lonely)).rowcount if ids else 0
    return {"webhook_events": gone}


def edi_refused(engine: Engine, before: dt.datetime, limit: int) -> dict[str, int]:
    """Refused X12 files received before ``before``. Read in id order, which is
    their order of arrival: the oldest are the first rows the primary key
    gives, so no index on ``received_at`` is needed."""
    rf = edi_refusals
    with engine.begin() as conn:
        ids = (
            conn.execute(
                select(rf.c.id).where(rf.c.received_at < before).order_by(rf.c.id).limit(limit)
            )
            .scalars()
            .all()
        )
        gone = conn.execute(delete(rf).where(rf.c.id.in_(ids))).rowcount if ids else 0
    return {"edi_refusals": gone}
