"""The API killed in the middle of a remittance's match loses and doubles
nothing (docs/architecture.md#remittances-and-deductions): the match is one
transaction, so a process that dies inside it leaves nothing, and the payer's
retry of the same remittance records it once.

The test holds ``LOCK TABLE deductions IN SHARE MODE``: the API's transaction
has recorded the remittance, taken the partition's match lock and decided,
and waits to write its deductions; the API is SIGKILLed there.
"""

from __future__ import annotations

import threading
import time
from decimal import Decimal
from typing import Any

from sqlalchemy import Engine, func, select, text

from shared.adapters.db.remittances.tables import deductions, remittances
from shared.adapters.db.tables import ledger_entries as le
from tests.support.disputes import new_vendor, settle
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.stack import Stack


def _api_waits(engine: Engine) -> bool:
    with engine.connect() as conn:
        return bool(
            conn.execute(
                text(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND application_name = 'api' AND wait_event_type = 'Lock'"
                )
            ).scalar_one()
        )


def test_the_api_killed_inside_a_match_then_the_retry_records_it_once(
    stack: Stack, engine: Engine
) -> None:
    vendor = new_vendor(engine)
    doc = promo_doc(vendor, [promo_line(1, "800", "100.00")])
    settle(engine, [doc])
    body = {
        "partition_key": vendor,
        "trace": uid("T-"),
        "paid_total": "0.00",
        "currency": "USD",
        "paid_at": "2026-12-01",
        "adjustments": [{"amount": "-60.00", "reason_code": "02", "reference": doc["document_id"]}],
    }
    producer = stack.producer()
    answers: list[Any] = []
    hold = engine.connect()
    hold.begin()
    hold.execute(text("LOCK TABLE deductions IN SHARE MODE"))

    def send() -> None:
        try:
            answers.append(producer.signed_json("POST", "/v1/remittances", body))
        except Exception as exc:  # the API dies under it
            answers.append(exc)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        deadline = time.monotonic() + 60
        while not _api_waits(engine):
            assert time.monotonic() < deadline, "the API never reached the match"
            time.sleep(0.02)
        stack.kill("api")
    finally:
        hold.rollback()
        hold.close()
    sender.join(timeout=60)
    assert answers and not hasattr(answers[0], "status_code"), answers
    stack.start_api()
    again = stack.producer()
    first = again.signed_json("POST", "/v1/remittances", body)
    assert first.status_code == 201, first.text
    replay = again.signed_json("POST", "/v1/remittances", body)
    assert replay.status_code == 200, replay.text
    [got] = first.json()["remittances"]
    assert replay.json()["remittances"][0]["id"] == got["id"]
    with engine.connect() as conn:
        kept = (
            select(func.count())
            .select_from(remittances)
            .where(remittances.c.trace == body["trace"])
        )
        assert conn.execute(kept).scalar_one() == 1
        rows = (
            select(func.count())
            .select_from(deductions)
            .where(deductions.c.remittance_id == got["id"])
        )
        assert conn.execute(rows).scalar_one() == 1
        deltas = conn.execute(
            select(le.c.outcome, le.c.delta).where(
                le.c.partition_key == vendor, le.c.document_id == doc["document_id"]
            )
        ).all()
    assert sorted(o for o, _ in deltas) == ["deducted", "posted"]
    assert sum((d for _, d in deltas), Decimal(0)) == Decimal("40.00")
