"""What the webhooks component's pruner deletes (services/webhooks/pruner.py,
docs/operations.md#retention), on both ledgers: delivered deliveries and their
attempts after SETTLEQ_WEBHOOK_RETENTION_DAYS, failed ones after 90 days,
events once none of their deliveries remain, refused X12 files after
SETTLEQ_EDI_REFUSAL_RETENTION_DAYS; nothing younger, nothing pending. The
clock is moved in the rows."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import Engine, func, insert, select, update

from services.webhooks.metrics import WebhookMetrics
from services.webhooks.pruner import Pruner
from shared.adapters.db.edi.tables import edi_refusals
from shared.adapters.db.tables import outbox, webhook_attempts, webhook_deliveries
from shared.adapters.db.webhooks import deliveries, endpoints
from shared.adapters.db.webhooks.events import new_event_id
from shared.config.settings import Settings
from tests.support.factories import uid
from tests.support.infra import ServiceEnv

pytestmark = pytest.mark.both_backends
NOW = dt.datetime.now(dt.UTC)


def days(n: float) -> dt.datetime:
    return NOW - dt.timedelta(days=n)


@pytest.fixture(scope="module")
def settings(backend_env: ServiceEnv) -> Settings:
    return backend_env.settings()


def _delivery(
    engine: Engine, endpoint_id: str, status: str, last: dt.datetime | None, fanned: dt.datetime
) -> tuple[str, str]:
    """An event fanned out at ``fanned`` to one endpoint, its delivery ``status``
    since ``last`` (with an attempt then, if any): (event id, delivery id)."""
    event_id = new_event_id()
    with engine.begin() as conn:
        conn.execute(
            insert(outbox).values(
                event_id=event_id, type="job.completed", subject=uid("J-"), created_at=fanned
            )
        )
        [delivery_id] = deliveries.fan_out(conn, event_id, "{}", [endpoint_id], fanned)
        conn.execute(
            update(webhook_deliveries)
            .where(webhook_deliveries.c.id == delivery_id)
            .values(
                status=status,
                last_attempt_at=last,
                first_attempt_at=last,
                attempts=0 if last is None else 1,
                next_attempt_at=fanned if status == "pending" else None,
                created_at=fanned,
            )
        )
        if last is not None:
            conn.execute(
                insert(webhook_attempts).values(
                    delivery_id=delivery_id,
                    attempt=1,
                    at=last,
                    status_code=200 if status == "delivered" else 500,
                    error=None,
                    detail="HTTP",
                    latency_ms=5,
                    answer="ok",
                )
            )
    return event_id, delivery_id


def _exists(engine: Engine, table: object, column: object, value: object) -> bool:
    with engine.connect() as conn:
        n = conn.execute(select(func.count()).select_from(table).where(column == value)).scalar()  # type: ignore[arg-type,call-overload]
    return bool(n)


@pytest.mark.regression
def test_the_pruner_keeps_each_table_to_its_retention(settings: Settings, engine: Engine) -> None:
    """Nothing was ever deleted: 200 refused files from invented senders in
    1.6 s stayed for ever, and so did every delivery and attempt."""
    endpoint, _ = endpoints.create(
        engine, uid("K-"), "https://a.example/h", ["job.completed"], None, days(200)
    )
    cases = {
        "delivered_old": ("delivered", days(31), days(31), False),
        "delivered_young": ("delivered", days(29), days(31), True),
        "retried_lately": ("delivered", days(1), days(40), True),  # a manual retry's
        "failed_young": ("failed", days(89), days(92), True),
        "failed_old": ("failed", days(91), days(94), False),
        "failed_unattempted_old": ("failed", None, days(91), False),
        "pending_old": ("pending", days(120), days(121), True),
    }
    made = {
        name: _delivery(engine, endpoint.id, status, last, fanned)
        for name, (status, last, fanned, _) in cases.items()
    }
    lonely_old, lonely_young, waiting = new_event_id(), new_event_id(), new_event_id()
    with engine.begin() as conn:
        for event_id, fanned in ((lonely_old, days(31)), (lonely_young, days(1)), (waiting, None)):
            conn.execute(
                insert(outbox).values(
                    event_id=event_id,
                    type="job.completed",
                    subject=uid("J-"),
                    created_at=days(40),
                    published_at=fanned,
                )
            )
        sender = uid("S-")
        for age in (91, 91, 91, 89):
            conn.execute(
                insert(edi_refusals).values(
                    sender_qualifier="ZZ",
                    sender_id=sender,
                    key_id="k",
                    received_at=days(age),
                    code="edi_partner_unknown",
                    codes="edi_partner_unknown",
                    sets=1,
                    sets_at_fault=1,
                    file_sha256="0" * 64,
                )
            )
    metrics = WebhookMetrics()
    pruned = Pruner(settings, engine, metrics, batch=2).prune(NOW)

    for name, (_, _, _, kept) in cases.items():
        event_id, delivery_id = made[name]
        assert _exists(engine, webhook_deliveries, webhook_deliveries.c.id, delivery_id) is kept
        assert _exists(engine, webhook_attempts, webhook_attempts.c.delivery_id, delivery_id) is (
            kept and cases[name][1] is not None
        ), name
        # An event goes with its last delivery, once it is old.
        assert _exists(engine, outbox, outbox.c.event_id, event_id) is kept, name
    assert not _exists(engine, outbox, outbox.c.event_id, lonely_old)
    assert _exists(engine, outbox, outbox.c.event_id, lonely_young)
    assert _exists(engine, outbox, outbox.c.event_id, waiting)
    with engine.connect() as conn:
        left = conn.execute(
            select(edi_refusals.c.received_at).where(edi_refusals.c.sender_id == sender)
        ).all()
    assert len(left) == 1
    # Counted by table (at least ours: the database is the session's).
    assert pruned["webhook_deliveries"] >= 3 and pruned["webhook_attempts"] >= 2
    assert pruned["webhook_events"] >= 4 and pruned["edi_refusals"] >= 3
    for table, n in pruned.items():
        assert metrics.pruned.labels(table)._value.get() == n
    assert Pruner(settings, engine, metrics, batch=2).prune(NOW) == dict.fromkeys(pruned, 0)
