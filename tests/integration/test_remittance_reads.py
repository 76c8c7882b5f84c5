"""Reading remittances and deductions over HTTP in process
(docs/api.md#remittances-and-deductions), on each ledger backend: the pages
and their cursors, one of each, the filters, the CSV (neutralised), the 404s
and 422s, and the aging of what is still open."""

from __future__ import annotations

import csv
import datetime as dt
import io
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from services.commands.client import Client
from shared.adapters.db.remittances import reads as reads_db
from tests.integration.test_remittances import (
    accrual,
    decide,
    http,  # noqa: F401  (a fixture)
    operator,  # noqa: F401  (a fixture)
    producer,  # noqa: F401  (a fixture)
    remit,
    send,
)
from tests.support.disputes import new_vendor
from tests.support.factories import uid
from tests.support.infra import VIEWER_TOKEN

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def viewer(http: TestClient) -> Client:  # noqa: F811
    return Client("http://testserver", token=VIEWER_TOKEN, http=http)


def _today() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def _remit(producer: Client, body: dict[str, Any]) -> dict[str, Any]:  # noqa: F811
    answer = send(producer, body)
    assert answer.status_code == 201, answer.text
    got: dict[str, Any] = answer.json()["remittances"][0]
    return got


def _get(client: Client, path: str) -> Any:
    answer = client.get(path)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _dated(vendor: str, days_ago: int, amount: str, code: str = "06") -> dict[str, Any]:
    """A JSON remittance paid ``days_ago`` days ago taking ``amount`` off (a shortage:
    nothing to match it to, so it is disputed whole)."""
    body = remit(vendor, {"amount": f"-{amount}", "reason_code": code})
    body["paid_at"] = (_today() - dt.timedelta(days=days_ago)).isoformat()
    return body


def test_a_remittance_reads_back_with_its_lines_deductions_and_matches(
    engine: Engine,
    producer: Client,  # noqa: F811
    viewer: Client,
) -> None:
    vendor = new_vendor(engine)
    doc = accrual(engine, vendor, "100.00")
    body = {
        "partition_key": vendor,
        "trace": uid("TR"),
        "paid_total": "500.00",
        "currency": "USD",
        "paid_at": "2026-12-01",
        "lines": [
            {
                "reference": "INV-1",
                "qualifier": "IV",
                "paid": "440.00",
                "invoiced": "520.00",
                "discount": "10.00",
                "adjustments": [{"amount": "-60.00", "reason_code": "02", "reference": doc}],
            }
        ],
        "adjustments": [{"amount": "-5.00", "reason_code": "22"}],
    }
    got = _remit(producer, body)
    one = _get(viewer, f"/v1/remittances/{got['id']}")
    assert (one["id"], one["trace"], one["partition_key"]) == (got["id"], body["trace"], vendor)
    assert (one["source_format"], one["currency"], one["paid_total"]) == ("json", "USD", "500.00")
    # 440 paid less 5 standalone: 435 computed, 65 apart.
    assert one["computed_total"] == "435.00"
    assert one["balance_difference"] == {
        "stated": "500.00",
        "computed": "435.00",
        "difference": "65.00",
    }
    assert one["lines"] == [
        {
            "reference": "INV-1",
            "qualifier": "IV",
            "paid": "440.00",
            "invoiced": "520.00",
            "discount": "10.00",
            "adjustments": [{"amount": "-60.00", "reason_code": "02", "reference": doc}],
        }
    ]
    assert one["adjustments"] == [{"amount": "-5.00", "reason_code": "22", "reference": None}]
    assert one["acknowledgement"] is None
    promo, short, freight = one["deductions"]  # line order, then the standalone ones
    assert (promo["status"], promo["matched"], promo["reason_class"]) == (
        "matched",
        "60.00",
        "promotion",
    )
    assert promo["matches"] == [{"document_id": doc, "outcome": "deducted", "amount": "60.00"}]
    assert promo["line_reference"] == "INV-1" and promo["past_window"] is False
    # 520 - 10 - 440 - 60 = 10 unexplained.
    assert (short["reason_class"], short["amount"], short["status"]) == (
        "unexplained",
        "10.00",
        "disputed",
    )
    assert (freight["reason_class"], freight["disputed"], freight["line_reference"]) == (
        "freight",
        "5.00",
        None,
    )
    assert (one["matched"], one["written_off"], one["disputed"]) == ("60.00", "0.00", "15.00")
    assert promo["days_outstanding"] == (_today() - dt.date(2026, 12, 1)).days
    single = _get(viewer, f"/v1/deductions/{promo['id']}")
    assert single == promo


def test_the_remittance_list_pages_newest_first_and_filters_by_partition(
    engine: Engine,
    producer: Client,  # noqa: F811
    viewer: Client,
) -> None:
    vendor = new_vendor(engine)
    ids = [_remit(producer, _dated(vendor, 1, "1.00"))["id"] for _ in range(3)]
    other = new_vendor(engine)
    _remit(producer, _dated(other, 1, "1.00"))
    first = _get(viewer, f"/v1/remittances?partition_key={vendor}&limit=2")
    assert [r["id"] for r in first["remittances"]] == ids[::-1][:2]
    assert first["next_cursor"] is not None
    second = _get(
        viewer, f"/v1/remittances?partition_key={vendor}&limit=2&cursor={first['next_cursor']}"
    )
    assert [r["id"] for r in second["remittances"]] == ids[:1]
    assert second["next_cursor"] is None
    summary = first["remittances"][0]
    assert (summary["deductions"], summary["disputed"], summary["matched"]) == (1, "1.00", "0.00")
    # Stated 0.00 against the standalone -1.00: one apart.
    assert summary["balance_difference"] == {
        "stated": "0.00",
        "computed": "-1.00",
        "difference": "1.00",
    }
    assert "lines" not in summary


def test_not_found_and_invalid_queries_answer_their_codes(viewer: Client) -> None:
    cases = [
        ("/v1/remittances/rm_000000000000000000000000", 404, "remittance_not_found"),
        ("/v1/deductions/999999999", 404, "deduction_not_found"),
        ("/v1/deductions?status=pending", 422, "invalid_status"),
        ("/v1/deductions?reason_class=bribery", 422, "invalid_reason_class"),
        ("/v1/deductions?cursor=nonsense!", 422, "invalid_cursor"),
        ("/v1/remittances?cursor=bm9wZQ", 422, "invalid_cursor"),
    ]
    for path, status, code in cases:
        answer = viewer.get(path)
        assert (answer.status_code, answer.json()["error"]["code"]) == (status, code), path


def test_deductions_filter_by_status_reason_and_age_and_page_by_cursor(
    engine: Engine,
    producer: Client,  # noqa: F811
    operator: Client,  # noqa: F811
    viewer: Client,
) -> None:
    vendor = new_vendor(engine)
    doc = accrual(engine, vendor, "50.00")
    matched = _remit(
        producer, remit(vendor, {"amount": "-50.00", "reason_code": "02", "reference": doc})
    )
    old = _remit(producer, _dated(vendor, 45, "7.00", code="22"))
    denied = _remit(producer, _dated(vendor, 2, "3.00"))
    accepted = _remit(producer, _dated(vendor, 2, "4.00"))

    def ids(query: str) -> list[str]:
        found = _get(viewer, f"/v1/deductions?partition_key={vendor}&{query}")["deductions"]
        return [d["remittance_id"] for d in found]

    [deny_id] = [d["id"] for d in _get(viewer, f"/v1/remittances/{denied['id']}")["deductions"]]
    [accept_id] = [d["id"] for d in _get(viewer, f"/v1/remittances/{accepted['id']}")["deductions"]]
    assert decide(operator, deny_id, {"decision": "deny", "note": "recover"}).status_code == 200
    assert decide(operator, accept_id, {"decision": "accept", "note": "ok"}).status_code == 200

    assert ids("status=matched") == [matched["id"]]
    assert ids("status=disputed") == [old["id"]]
    assert ids("status=denied") == [denied["id"]]
    assert ids("status=written_off") == [accepted["id"]]
    assert ids("status=open") == [old["id"], denied["id"]]
    assert ids("") == [matched["id"], old["id"], denied["id"], accepted["id"]]
    assert ids("reason_class=freight") == [old["id"]]
    assert ids("aged_over=30") == [old["id"]]
    assert ids("aged_over=45") == []

    written = _get(viewer, f"/v1/deductions/{accept_id}")
    assert (written["status"], written["written_off"], written["disputed"]) == (
        "written_off",
        "4.00",
        "0.00",
    )
    assert written["decision"] == "accept" and written["decided_at"] is not None
    assert [m["outcome"] for m in written["matches"]] == ["written_off"]
    denial = _get(viewer, f"/v1/deductions/{deny_id}")
    assert (denial["status"], denial["disputed"], denial["matches"]) == ("denied", "3.00", [])

    page = _get(viewer, f"/v1/deductions?partition_key={vendor}&limit=3")
    assert len(page["deductions"]) == 3 and page["next_cursor"]
    rest = _get(
        viewer, f"/v1/deductions?partition_key={vendor}&limit=3&cursor={page['next_cursor']}"
    )
    assert [d["remittance_id"] for d in rest["deductions"]] == [accepted["id"]]
    assert rest["next_cursor"] is None


def test_the_deductions_csv_is_neutralised_and_follows_the_filter(
    engine: Engine,
    producer: Client,  # noqa: F811
    viewer: Client,
) -> None:
    vendor = new_vendor(engine)
    _remit(producer, remit(vendor, {"amount": "-9.50", "reason_code": "22", "reference": "=cmd()"}))
    _remit(producer, _dated(vendor, 1, "2.00"))
    for path, accept in (
        (f"/v1/deductions?partition_key={vendor}&format=csv", None),
        (f"/v1/deductions?partition_key={vendor}", "text/csv"),
    ):
        answer = (
            viewer.get(path)
            if accept is None
            else viewer._http.get(
                path, headers={"Authorization": f"Bearer {VIEWER_TOKEN}", "Accept": accept}
            )
        )
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(answer.text)))
        assert [r["reference"] for r in rows] == ["'=cmd()", ""]
        assert [r["amount"] for r in rows] == ["9.50", "2.00"]
        assert rows[0]["status"] == "disputed" and rows[0]["reason_class"] == "freight"
    only = viewer.get(f"/v1/deductions?partition_key={vendor}&reason_class=shortage&format=csv")
    assert [r["amount"] for r in csv.DictReader(io.StringIO(only.text))] == ["2.00"]


def test_aging_buckets_the_open_amount_by_age_with_its_weighted_days(
    engine: Engine,
    producer: Client,  # noqa: F811
    operator: Client,  # noqa: F811
    viewer: Client,
) -> None:
    vendor = new_vendor(engine)
    # 30 and 90 days: the buckets' edges, each in the lower bucket.
    dated = ((0, "10.00"), (31, "20.00"), (61, "30.00"), (91, "40.00"), (30, "1.00"), (90, "2.00"))
    for days, amount in dated:
        _remit(producer, _dated(vendor, days, amount))
    # Denied stays open (the payer owes it); accepted is closed; a freight one
    # shows in by_reason.
    denied = _remit(producer, _dated(vendor, 5, "5.00", code="22"))
    accepted = _remit(producer, _dated(vendor, 100, "1000.00"))
    [deny_id] = [d["id"] for d in _get(viewer, f"/v1/remittances/{denied['id']}")["deductions"]]
    [accept_id] = [d["id"] for d in _get(viewer, f"/v1/remittances/{accepted['id']}")["deductions"]]
    assert decide(operator, deny_id, {"decision": "deny", "note": "recover"}).status_code == 200
    assert decide(operator, accept_id, {"decision": "accept", "note": "fine"}).status_code == 200

    aging = _get(viewer, f"/v1/deductions/aging?partition_key={vendor}")
    assert aging["as_of"] == _today().isoformat()
    [part] = aging["partitions"]
    assert part["partition_key"] == vendor
    assert (part["open_count"], part["open_amount"]) == (7, "108.00")
    assert part["buckets"] == {"0-30": "16.00", "31-60": "20.00", "61-90": "32.00", "90+": "40.00"}
    # Due 30 days after: those of 31, 61, 90 and 91 days are past their window;
    # the one of 30 days is due today, not past it.
    assert part["past_window"] == "92.00"
    # (0*10 + 31*20 + 61*30 + 91*40 + 5*5 + 30*1 + 90*2) / 108 = 6325 / 108 = 58.56...
    assert part["days_outstanding"] == "58.6"
    assert aging["by_reason"] == [
        {"reason_class": "freight", "open_count": 1, "open_amount": "5.00"},
        {"reason_class": "shortage", "open_count": 6, "open_amount": "103.00"},
    ]
    assert aging["totals"] == {k: v for k, v in part.items() if k != "partition_key"}

    everyone = _get(viewer, "/v1/deductions/aging")
    keys = [p["partition_key"] for p in everyone["partitions"]]
    assert vendor in keys and keys == sorted(keys)
    assert everyone["totals"]["open_count"] == sum(p["open_count"] for p in everyone["partitions"])


def test_the_reads_need_a_token(http: TestClient) -> None:  # noqa: F811
    for path in ("/v1/remittances", "/v1/deductions", "/v1/deductions/aging", "/v1/deductions/1"):
        assert http.get(path).status_code == 401, path


def test_days_outstanding_is_a_tenth_of_a_day_rounded_half_up() -> None:
    aged = reads_db.Aged(open_amount=Decimal("4.00"), weighted_days=Decimal("41.00"))
    assert aged.days_outstanding() == Decimal("10.3")  # 10.25: half up, never to even
    assert reads_db.Aged().days_outstanding() is None
