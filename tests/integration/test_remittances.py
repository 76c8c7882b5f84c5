"""Remittances over HTTP in process (docs/api.md#remittances-and-deductions), on
each ledger backend: a payer's 820 or JSON recorded once, its deductions
matched to settled accruals by reference, by amount and within tolerance, the
rest disputed; the matches are ledger rows."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, func, select

from services.api.app import create_app
from services.commands.client import Client
from shared.adapters.db.remittances.tables import deductions, remittances
from shared.adapters.db.tables import ledger_entries as le
from tests.support.disputes import new_vendor, settle
from tests.support.factories import promo_doc, promo_line, uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_SECRET,
    ServiceEnv,
)

pytestmark = pytest.mark.both_backends
NOW = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)
REALDATA = Path(__file__).resolve().parents[3] / "shared" / "realdata" / "other" / "x12_820"


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def producer(http: TestClient) -> Client:
    return Client("http://testserver", key_id=PRODUCER_ID, secret=PRODUCER_SECRET, http=http)


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


def accrual(engine: Engine, vendor: str, amount: str, document_id: str | None = None) -> str:
    """A settled promo document of one line modelled at ``amount`` (T1 at 0.125 a unit)."""
    units = str(Decimal(amount) / Decimal("0.125"))
    doc = promo_doc(vendor, [promo_line(1, units, amount)], document_id=document_id)
    settle(engine, [doc])
    return str(doc["document_id"])


def payer(operator: Client, vendor: str, **profile: Any) -> str:
    sender = uid("PY")[:14]
    body = {"name": "A payer", "contract_version": 1, "payer_partition_key": vendor, **profile}
    answer = operator.bearer("PUT", f"/v1/partners/ZZ/{sender}", body)
    assert answer.status_code in (200, 201), answer.text
    return sender


def send(producer: Client, body: dict[str, Any]) -> Any:
    return producer.signed_json("POST", "/v1/remittances", body)


def remit(vendor: str, *adjustments: dict[str, Any], trace: str | None = None) -> dict[str, Any]:
    return {
        "partition_key": vendor,
        "trace": trace or uid("TR"),
        "paid_total": "0.00",
        "currency": "USD",
        "paid_at": "2026-12-01",
        "adjustments": list(adjustments),
    }


def open_amount(engine: Engine, vendor: str, document_id: str) -> Decimal:
    with engine.connect() as conn:
        deltas = conn.execute(
            select(le.c.delta).where(le.c.partition_key == vendor, le.c.document_id == document_id)
        ).scalars()
        return sum(deltas, Decimal(0))


def test_a_promotion_deduction_is_matched_by_reference_and_its_row_is_in_the_ledger(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    payer(operator, vendor)
    doc = accrual(engine, vendor, "100.00")
    body = remit(vendor, {"amount": "-60.00", "reason_code": "02", "reference": doc})
    answer = send(producer, body)
    assert answer.status_code == 201, answer.text
    got = answer.json()["remittances"][0]
    assert (got["created"], got["matched"], got["disputed"]) == (True, "60.00", "0.00")
    assert open_amount(engine, vendor, doc) == Decimal("40.00")
    again = send(producer, body)
    assert again.status_code == 200
    assert again.json()["remittances"][0] == got | {"created": False}  # its figures, again
    assert open_amount(engine, vendor, doc) == Decimal("40.00")  # a replay books nothing
    with engine.connect() as conn:
        rows = conn.execute(
            select(le.c.outcome, le.c.amount, le.c.delta, le.c.correlation_id).where(
                le.c.job_id == got["id"]
            )
        ).all()
    assert [(r.outcome, r.amount, r.delta, r.correlation_id) for r in rows] == [
        ("deducted", Decimal("60.00"), Decimal("-60.0000"), got["id"])
    ]


def test_the_same_trace_with_other_content_is_refused_naming_the_remittance(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    body = remit(vendor, {"amount": "-5.00", "reason_code": "06"})
    first = send(producer, body).json()["remittances"][0]
    changed = {**body, "paid_total": "1.00"}
    refused = send(producer, changed)
    assert refused.status_code == 409, refused.text
    error = refused.json()["error"]
    assert error["code"] == "remittance_duplicate_trace" and first["id"] in error["message"]


def test_by_amount_within_tolerance_the_excess_is_written_off_and_above_it_disputed(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    payer(operator, vendor, tolerance={"absolute": "2.00"})
    older = accrual(engine, vendor, "50.00")
    accrual(engine, vendor, "50.00")
    within = send(producer, remit(vendor, {"amount": "-51.50", "reason_code": "16"})).json()
    got = within["remittances"][0]
    assert (got["matched"], got["written_off"], got["disputed"]) == ("50.00", "1.50", "0.00")
    assert open_amount(engine, vendor, older) == Decimal("-1.50")  # only a write-off goes below
    beyond = send(producer, remit(vendor, {"amount": "-80.00", "reason_code": "16"})).json()
    got = beyond["remittances"][0]
    assert (got["matched"], got["written_off"], got["disputed"]) == ("0.00", "0.00", "80.00")
    with engine.connect() as conn:
        reason = conn.execute(
            select(deductions.c.dispute_reason).where(deductions.c.remittance_id == got["id"])
        ).scalar_one()
    assert reason == "unmatched"


def test_other_classes_are_disputed_with_a_due_date_from_the_profiles_window(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    payer(operator, vendor, dispute_window_days=10, deduction_reasons={"70": "promotion"})
    doc = accrual(engine, vendor, "20.00")
    body = remit(
        vendor,
        {"amount": "-7.00", "reason_code": "59"},
        {"amount": "-20.00", "reason_code": "70", "reference": doc},
    )
    got = send(producer, body).json()["remittances"][0]
    assert (got["matched"], got["disputed"]) == ("20.00", "7.00")
    with engine.connect() as conn:
        found = conn.execute(
            select(deductions.c.reason_class, deductions.c.due_on, deductions.c.disputed)
            .where(deductions.c.remittance_id == got["id"])
            .order_by(deductions.c.seq)
        ).all()
    assert [(f.reason_class, f.due_on.isoformat()) for f in found] == [
        ("shortage", "2026-12-11"),
        ("promotion", "2026-12-11"),
    ]


def test_a_key_may_remit_only_for_its_own_partitions(http: TestClient, engine: Engine) -> None:
    scoped = Client("http://testserver", key_id=SCOPED_ID, secret=SCOPED_SECRET, http=http)
    refused = send(scoped, remit(uid("V-"), {"amount": "-1.00", "reason_code": "02"}))
    assert refused.status_code == 403, refused.text
    assert refused.json()["error"]["code"] == "partition_not_allowed"


def test_a_json_remittance_that_is_not_one_is_a_clear_422(producer: Client) -> None:
    answer = producer.signed(
        "POST", "/v1/remittances", b'{"trace": 1}', {"Content-Type": "application/json"}
    )
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "remittance_invalid"


def _edi(producer: Client, data: bytes) -> Any:
    return producer.signed("POST", "/v1/remittances", data, {"Content-Type": "application/edi-x12"})


def test_the_edi_net_sample_balances_and_its_adx_is_one_shortage_deduction(
    engine: Engine, producer: Client, operator: Client
) -> None:
    data = (REALDATA / "x12.820.issue140.edi").read_bytes()
    vendor = new_vendor(engine)
    answer = _edi(producer, data)
    assert answer.status_code == 422 and answer.json()["error"]["code"] == "edi_partner_unknown"
    sender = "1238742000008"
    body = {"name": "Mart", "contract_version": 1, "payer_partition_key": vendor}
    assert operator.bearer("PUT", f"/v1/partners/UL/{sender}", body).status_code in (200, 201)
    answer = _edi(producer, data)
    assert answer.status_code in (200, 201), answer.text
    [got] = answer.json()["remittances"]
    assert got["balance_difference"] is None
    assert (got["deductions"], got["disputed"]) == (1, "143.76")
    assert answer.json()["acknowledgement"].startswith("ISA")
    with engine.connect() as conn:
        assert (
            conn.execute(
                select(func.count()).select_from(remittances).where(remittances.c.id == got["id"])
            ).scalar_one()
            == 1
        )


def test_the_safeway_sample_is_read_as_published_and_its_difference_reported(
    engine: Engine, producer: Client, operator: Client
) -> None:
    data = (REALDATA / "Example4_Safeway.txt").read_bytes()
    vendor = new_vendor(engine)
    from shared.domain.remittances.x12_820 import read_820

    read = read_820(data)
    assert not read.refused, read.problems
    payer_id = read.remittances[0].payer.id
    assert payer_id is not None
    qualifier = "ZZ"
    body = {"name": "Safeway", "contract_version": 1, "payer_partition_key": vendor}
    operator.bearer("PUT", f"/v1/partners/{qualifier}/{payer_id}", body)
    answer = _edi(producer, data)
    assert answer.status_code in (200, 201), answer.text
    check = answer.json()["remittances"][0]["balance_difference"]
    assert check is not None and Decimal(check["difference"]).copy_abs() == Decimal("210.00")


def test_the_home_depot_template_is_refused_with_a_clear_error(producer: Client) -> None:
    data = (REALDATA / "Example3_HomeDepot.txt").read_bytes()
    answer = _edi(producer, data)
    assert answer.status_code == 422, answer.text
    error = answer.json()["error"]
    assert error["code"].startswith("edi_") and "placeholder" in json.dumps(error).lower()


def _disputed(engine: Engine, remittance_id: str) -> list[int]:
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(deductions.c.id)
                .where(deductions.c.remittance_id == remittance_id, deductions.c.disputed > 0)
                .order_by(deductions.c.seq)
            ).scalars()
        )


def decide(operator: Client, deduction_id: int, body: dict[str, Any]) -> Any:
    return operator.bearer("POST", f"/admin/deductions/{deduction_id}/decide", body)


def test_a_disputed_deduction_is_matched_by_a_person_and_then_decided_once(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    first, second = accrual(engine, vendor, "30.00"), accrual(engine, vendor, "30.00")
    got = send(producer, remit(vendor, {"amount": "-45.00", "reason_code": "06"})).json()
    [deduction] = _disputed(engine, got["remittances"][0]["id"])
    too_much = {
        "decision": "match",
        "note": "split",
        "matches": [
            {"document_id": first, "amount": "40.00"},
            {"document_id": second, "amount": "5.00"},
        ],
    }
    refused = decide(operator, deduction, too_much)
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "match_exceeds_open"
    body = {
        "decision": "match",
        "note": "split across both",
        "matches": [
            {"document_id": first, "amount": "30.00"},
            {"document_id": second, "amount": "15.00"},
        ],
    }
    decided = decide(operator, deduction, body)
    assert decided.status_code == 200, decided.text
    assert len(decided.json()["ledger_ids"]) == 2
    assert (open_amount(engine, vendor, first), open_amount(engine, vendor, second)) == (
        Decimal("0.00"),
        Decimal("15.00"),
    )
    again = decide(operator, deduction, body)
    assert again.status_code == 200 and again.json()["again"] is True
    assert open_amount(engine, vendor, second) == Decimal("15.00")
    other = decide(operator, deduction, {"decision": "deny", "note": "no"})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "deduction_already_decided"


def test_accept_writes_off_against_the_reference_and_deny_books_nothing(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    body = remit(
        vendor,
        {"amount": "-12.00", "reason_code": "22", "reference": "FRT-1"},
        {"amount": "-3.00", "reason_code": "59"},
    )
    got = send(producer, body).json()["remittances"][0]
    accept, deny = _disputed(engine, got["id"])
    assert decide(operator, accept, {"decision": "accept", "note": "freight ok"}).status_code == 200
    assert decide(operator, deny, {"decision": "deny", "note": "recover"}).status_code == 200
    with engine.connect() as conn:
        rows = conn.execute(
            select(le.c.outcome, le.c.document_id, le.c.delta).where(le.c.job_id == got["id"])
        ).all()
    assert [(r.outcome, r.document_id, r.delta) for r in rows] == [
        ("written_off", "FRT-1", Decimal("-12.0000"))
    ]


def test_bulk_accepts_the_oldest_disputed_deductions_of_a_filter(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    body = remit(vendor, *({"amount": f"-{n}.00", "reason_code": "59"} for n in (1, 2, 50)))
    send(producer, body)
    bulk = {
        "decision": "accept",
        "note": "small shortages",
        "partition_key": vendor,
        "max_amount": "5.00",
        "limit": 10,
    }
    answer = operator.bearer("POST", "/admin/deductions/decide", bulk)
    assert answer.status_code == 200 and answer.json() == {"decided": 2}, answer.text
    assert operator.bearer("POST", "/admin/deductions/decide", bulk).json() == {"decided": 0}


def test_a_remittance_writes_its_events_and_an_endpoint_may_subscribe_to_them(
    engine: Engine, producer: Client, operator: Client
) -> None:
    from shared.adapters.db.remittances.events import data_of
    from shared.adapters.db.tables import outbox
    from shared.adapters.db.webhooks import endpoints

    vendor = new_vendor(engine)
    doc = accrual(engine, vendor, "10.00")
    body = remit(
        vendor,
        {"amount": "-10.00", "reason_code": "02", "reference": doc},
        {"amount": "-4.00", "reason_code": "59"},
    )
    got = send(producer, body).json()["remittances"][0]
    with engine.connect() as conn:
        types = conn.execute(
            select(outbox.c.type, outbox.c.partitions).where(outbox.c.subject == got["id"])
        ).all()
    assert sorted(t for t, _ in types) == [
        "deduction.disputed",
        "deduction.matched",
        "remittance.received",
    ]
    assert all(list(p) == [vendor] for _, p in types)
    disputed = data_of(engine, "deduction.disputed", got["id"])
    assert disputed is not None and [i["amount"] for i in disputed["items"]] == ["4.00"]
    matched = data_of(engine, "deduction.matched", got["id"])
    assert matched is not None and [i["matched"] for i in matched["items"]] == ["10.00"]
    wanted = ["remittance.received", "deduction.matched", "deduction.disputed"]
    made, _ = endpoints.create(engine, uid("K-"), "https://a.example/h", wanted, None, NOW)
    assert sorted(made.events) == sorted(wanted)


def test_what_one_deduction_left_open_is_matched_by_amount_by_the_next(
    engine: Engine, producer: Client
) -> None:
    vendor = new_vendor(engine)
    accrual(engine, vendor, "90.00")  # older, never within reach of 40.00
    doc = accrual(engine, vendor, "100.00")
    body = remit(
        vendor,
        {"amount": "-60.00", "reason_code": "02", "reference": doc},
        {"amount": "-40.00", "reason_code": "02"},
    )
    got = send(producer, body).json()["remittances"][0]
    assert (got["matched"], got["disputed"]) == ("100.00", "0.00")
    assert open_amount(engine, vendor, doc) == Decimal("0")


def test_the_997_follows_the_payers_policy(
    engine: Engine, producer: Client, operator: Client
) -> None:
    data = (REALDATA / "x12.820.issue140.edi").read_bytes().replace(b"4529952", b"4529953")
    vendor = new_vendor(engine)
    body = {
        "name": "Mart",
        "contract_version": 1,
        "payer_partition_key": vendor,
        "acknowledge": "never",
    }
    assert operator.bearer("PUT", "/v1/partners/UL/1238742000008", body).status_code in (200, 201)
    answer = _edi(producer, data)
    assert answer.status_code == 201, answer.text
    assert answer.json()["acknowledgement"] is None


def test_the_dispute_queues_figures_count_deductions_waiting_for_a_decision(
    engine: Engine, producer: Client, operator: Client
) -> None:
    vendor = new_vendor(engine)
    before = operator.bearer("GET", "/v1/disputes/stats").json()["deductions"]
    send(producer, remit(vendor, {"amount": "-9.00", "reason_code": "59"}))
    after = operator.bearer("GET", "/v1/disputes/stats").json()["deductions"]
    assert after["open_count"] == before["open_count"] + 1
    assert Decimal(after["open_amount"]) - Decimal(before["open_amount"]) == Decimal("9.00")
