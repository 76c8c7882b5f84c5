"""Every settlement kind over HTTP through the real stack, checked against an
independent calculation written here (docs/architecture.md#settlement-kinds,
docs/architecture.md#re-pricing-lineage-and-advisory-locks)."""

from __future__ import annotations

import base64
import json
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import Engine, select

from shared.adapters.db import tables
from tests.support.factories import uid
from tests.support.stack import Stack

D = Decimal


def put_contract(stack: Stack, kind: str, partition: str, version: int, body: dict) -> None:
    response = stack.operator().bearer("PUT", f"/v1/contracts/{kind}/{partition}/{version}", body)
    assert response.status_code == 201, response.text


def run(stack: Stack, kind: str, documents: list[dict[str, Any]], key: str | None = None) -> dict:
    producer = stack.producer()
    body = json.dumps({"kind": kind, "documents": documents}).encode()
    response = producer.submit(body, idempotency_key=key)
    assert response.status_code in (200, 202), response.text
    job = producer.wait(response.json()["job_id"], timeout=90)
    assert job["state"] == "completed"
    return job


def lines_of(stack: Stack, job_id: str) -> list[dict[str, Any]]:
    page = stack.viewer().bearer("GET", f"/v1/jobs/{job_id}/lines?limit=1000").json()
    return list(page["items"])


def ledger(engine: Engine, job_id: str) -> list[Any]:
    ledger = tables.ledger_entries
    with engine.connect() as conn:
        return list(
            conn.execute(
                select(ledger).where(ledger.c.job_id == job_id).order_by(ledger.c.id)
            ).all()
        )


def cents(value: Decimal) -> Decimal:
    return value.quantize(D("0.01"), rounding=ROUND_HALF_UP)


def test_recipe_costs_post_per_location_with_deltas_against_their_history(
    stack: Stack, engine: Engine
) -> None:
    recipe = uid("RECIPE-")
    # Bill of materials (edible-portion quantity per sku).
    bom = {"FLOUR": "0.25", "TOMATO": "0.180", "MOZZ": "0.125", "BASIL": "0.004"}
    put_contract(stack, "recipe_cost", recipe, 1, {"bom": bom})

    def request(doc: str, prices: dict[str, str], trigger: str, at: str) -> dict[str, Any]:
        return {
            "document_id": doc,
            "partition_key": recipe,
            "contract_version": 1,
            "recipe_id": recipe,
            "location_ids": ["STORE-2", "STORE-1"],
            "effective_at": at,
            "pricing_snapshot": prices,
            "trigger": trigger,
        }

    first_prices = {"FLOUR": "0.62", "TOMATO": "2.395", "MOZZ": "6.10", "BASIL": "31.75"}
    # 0.25*0.62 + 0.180*2.395 + 0.125*6.10 + 0.004*31.75
    #   = 0.155 + 0.4311 + 0.7625 + 0.127 = 1.4756
    first_cost = D("1.4756")
    second_prices = {**first_prices, "MOZZ": "6.45", "EXTRA": "9.99"}  # vendor raised mozzarella
    # 0.155 + 0.4311 + 0.125*6.45 (0.80625) + 0.127 = 1.51935 -> 1.5194 (half up at 0.0001)
    second_cost = D("1.5194")

    first = run(
        stack,
        "recipe_cost",
        [request(uid("R-"), first_prices, "bulk_import", "2026-07-01T00:00:00Z")],
    )
    second = run(
        stack,
        "recipe_cost",
        [request(uid("R-"), second_prices, "vendor_rate", "2026-08-01T00:00:00+00:00")],
    )
    missing = run(
        stack,
        "recipe_cost",
        [request(uid("R-"), {"FLOUR": "0.62"}, "spec_change", "2026-09-01T00:00:00Z")],
    )

    assert first["outcomes"]["posted"] == second["outcomes"]["posted"] == 2
    assert D(first["amounts"]["posted"]) == 2 * first_cost
    rows_1, rows_2 = ledger(engine, first["job_id"]), ledger(engine, second["job_id"])
    assert {(r.line_ref, r.amount, r.delta, r.supersedes_id) for r in rows_1} == {
        ("STORE-1", first_cost, first_cost, None),
        ("STORE-2", first_cost, first_cost, None),
    }
    previous = {r.line_ref: r.id for r in rows_1}
    assert {(r.line_ref, r.amount, r.delta, r.supersedes_id) for r in rows_2} == {
        (loc, second_cost, second_cost - first_cost, previous[loc])
        for loc in ("STORE-1", "STORE-2")
    }
    assert missing["outcomes"] == {"posted": 0, "disputed": 0, "duplicate": 0, "dead_lettered": 2}
    assert {line["reason"] for line in lines_of(stack, missing["job_id"])} == {"missing_price"}


FREIGHT_RATES = {
    "rates": {"cwt": "41.93", "unit": "2510.00", "flat": "45.00", "mile": "2.150"},
    "discount_pct": "0.80",
    "fuel_surcharge": "0.268",
    "fuel_basis": "net",
    "accessorials": {"LIFTGATE": "75.00", "ENS": {"per": "mile", "rate": "0.1980"}},
    "tolerance": "1.00",
}


def expected_leg(leg: dict[str, Any]) -> Decimal:
    """docs/architecture.md#freight-audits for FREIGHT_RATES, by hand."""
    rates = {k: D(v) for k, v in FREIGHT_RATES["rates"].items()}
    basis = leg.get("rate_basis", "mile")
    quantity = D(leg.get("rated_quantity") or leg.get("miles") or "1")
    if basis == "flat":
        quantity = D(1)
    net = quantity * rates[basis] * (1 - D("0.80"))
    extras = D(0)
    for code in leg["accessorials"]:
        extras += D("75.00") if code == "LIFTGATE" else D("0.1980") * D(leg["miles"])
    return cents(net + D("0.268") * net + extras)


def test_freight_invoices_are_audited_leg_by_leg(stack: Stack, engine: Engine) -> None:
    carrier = uid("CARRIER-")
    put_contract(stack, "freight_audit", carrier, 1, FREIGHT_RATES)
    legs = [
        # 128.34 cwt at 41.93, less 80%: 5381.2962 * 0.2 = 1076.25924; fuel 26.8% of net
        # 288.4374763...; total 1364.696716... -> 1364.70 billed exactly: posted.
        {
            "leg_no": 1,
            "rate_basis": "cwt",
            "rated_quantity": "128.34",
            "accessorials": [],
            "billed_amount": "1364.70",
        },
        {
            "leg_no": 2,
            "rate_basis": "unit",
            "accessorials": ["LIFTGATE"],
            "billed_amount": "711.57",
        },  # 2510*0.2=502 + fuel 134.536 + 75 = 711.536 -> 711.54
        {"leg_no": 3, "miles": "412", "accessorials": ["ENS"], "billed_amount": "400.00"},
        {"leg_no": 4, "rate_basis": "flat", "accessorials": [], "billed_amount": "11.41"},
        {"leg_no": 5, "miles": "10", "accessorials": ["DETENTION"], "billed_amount": "9.00"},
    ]
    edi = base64.b64encode(b"ISA*00*          *00*          *ZZ*CARRIER~").decode()
    docs = [
        {
            "document_id": uid("PRO-"),
            "partition_key": carrier,
            "contract_version": 1,
            "document_type": "PDF",
            "raw_payload": edi,
            "legs": legs,
        },
    ]
    job = run(stack, "freight_audit", docs)
    expected = {leg["leg_no"]: expected_leg(leg) for leg in legs[:4]}
    billed = {leg["leg_no"]: D(leg["billed_amount"]) for leg in legs}
    outcome = {
        n: "posted" if abs(billed[n] - e) <= D("1.00") else "disputed" for n, e in expected.items()
    }
    assert outcome == {1: "posted", 2: "posted", 3: "disputed", 4: "posted"}
    assert job["outcomes"] == {"posted": 3, "disputed": 1, "duplicate": 0, "dead_lettered": 1}
    rows = {int(r.line_ref): r for r in ledger(engine, job["job_id"])}
    assert {n: r.amount for n, r in rows.items()} == expected
    assert D(job["amounts"]["posted"]) == sum(expected[n] for n in (1, 2, 4))
    assert D(job["amounts"]["disputed"]) == billed[3]
    lines = {line["line_ref"]: line for line in lines_of(stack, job["job_id"])}
    # The invoice said PDF but its payload is X12: corrected and noted on each settled leg.
    assert {lines[str(n)]["reason"] for n in (1, 2, 3, 4)} == {"document_type_corrected"}
    # A noted line is listed from its ledger row (the note joined on): the first
    # version's delta is the amount itself.
    assert all(D(lines[str(n)]["delta"]) == rows[n].amount for n in (1, 2, 3, 4))
    assert (
        lines["5"]["outcome"] == "dead_lettered" and lines["5"]["reason"] == "unknown_accessorial"
    )


def test_cwt_leg_without_rated_quantity_is_refused_at_the_door(stack: Stack) -> None:
    doc = {
        "document_id": uid("PRO-"),
        "partition_key": "C",
        "contract_version": 1,
        "document_type": "EDI",
        "legs": [{"leg_no": 1, "rate_basis": "cwt", "accessorials": [], "billed_amount": "1"}],
    }
    response = stack.producer().submit(
        json.dumps({"kind": "freight_audit", "documents": [doc]}).encode()
    )
    assert response.status_code == 422


def test_repricing_posts_deltas_once_and_a_resubmission_posts_nothing(
    stack: Stack, engine: Engine
) -> None:
    vendor = uid("REPRICE-")
    put_contract(
        stack,
        "promo_accrual",
        vendor,
        1,
        {"tier_rates": {"T1": "0.125", "T2": "0.45"}, "tolerance": "0.05"},
    )
    put_contract(
        stack,
        "promo_accrual",
        vendor,
        2,
        {"tier_rates": {"T1": "0.13", "T2": "0.45"}, "tolerance": "0.05"},
    )
    lines = [
        {
            "line_no": n,
            "sku": f"SKU-{n}",
            "promo_tier": "T1",
            "qualifying_units": str(8 * n),
            "claimed_amount": str(n),
        }
        for n in range(1, 6)
    ]
    doc_id = uid("INV-")

    def doc(version: int) -> dict[str, Any]:
        return {
            "document_id": doc_id,
            "partition_key": vendor,
            "contract_version": version,
            "period": "2026-Q3",
            "lines": lines,
        }

    v1 = run(stack, "promo_accrual", [doc(1)])
    v2 = run(stack, "promo_accrual", [doc(2)])
    again = run(stack, "promo_accrual", [doc(2)], key=uid("resubmit-"))
    rows_1 = {r.reconciliation_key: r for r in ledger(engine, v1["job_id"])}
    rows_2 = ledger(engine, v2["job_id"])
    assert len(rows_1) == len(rows_2) == 5
    for row in rows_2:
        old = rows_1[row.reconciliation_key]
        n = int(row.line_ref)
        # v1: 8n * 0.125 = n; v2: 8n * 0.13 = 1.04n; delta 0.04n
        assert (old.amount, row.amount) == (D(n), cents(D("1.04") * n))
        assert row.delta == row.amount - old.amount and row.supersedes_id == old.id
        assert old.delta + row.delta == row.amount  # the key's deltas sum to its latest amount
    assert again["outcomes"] == {"posted": 0, "disputed": 0, "duplicate": 5, "dead_lettered": 0}
    assert ledger(engine, again["job_id"]) == []
