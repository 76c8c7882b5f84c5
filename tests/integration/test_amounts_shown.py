"""Every read shows an amount at its kind's quantum (docs/api.md#kinds): 0.01
for promo and freight, 0.0001 for a recipe's unit costs, whatever the ledger's
NUMERIC(20,4) column holds. A job, its lines and timeline, the feed, a
dispute and its resolution, a line's history, the dashboard, a partner's
open disputes, the CSV exports and the audit log, on each ledger backend."""

from __future__ import annotations

import csv
import io
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.commands.client import Client
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.contracts import put_contract
from shared.domain.kinds import KINDS
from shared.domain.money import at_quantum, plain
from shared.domain.synthetic import freight_contract, recipe_contract
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv

pytestmark = [pytest.mark.both_backends, pytest.mark.regression]
DEADLINE_S = 120.0  # another test's open transaction may hold the feed back meanwhile

# The keys a read names an amount by, at any depth of its body.
MONEY = frozenset(
    {
        "amount",
        "claimed_amount",
        "ledger_claimed_amount",
        "delta",
        "model_amount",
        "variance",
        "posted",
        "disputed",
        "amount_now",
        "amount_posted",
        "amount_disputed",
    }
)


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def viewer(http: TestClient) -> Client:
    return Client("http://testserver", token=VIEWER_TOKEN, http=http)


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


def settle_job(ctx: WorkerContext, docs: list[dict[str, Any]], kind: str) -> str:
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, kind)
    for message in messages:
        assert settle_chunk(ctx, message, 1) is not None
    return job_id


@pytest.fixture(scope="module")
def promo(ctx: WorkerContext) -> tuple[str, str, str]:
    """A promo job: a line posted at 1.00, a claim of 6.00 disputed (model 5.00)."""
    vendor = uid("V-")
    publish_promo_contracts(ctx.engine, [vendor])
    doc = promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "40", "6.00")])
    return settle_job(ctx, [doc], "promo_accrual"), vendor, doc["document_id"]


@pytest.fixture(scope="module")
def freight(ctx: WorkerContext) -> tuple[str, str]:
    """A freight job: a 100-mile leg billed at its model, 53.75, and one billed
    60.00 (disputed)."""
    carrier = uid("CARRIER-")
    put_contract(ctx.engine, "freight_audit", carrier, 1, freight_contract())
    legs = [
        {"leg_no": n, "miles": "100", "accessorials": [], "billed_amount": billed}
        for n, billed in ((1, "53.75"), (2, "60.00"))
    ]
    doc = {
        "document_id": uid("PRO-"),
        "partition_key": carrier,
        "contract_version": 1,
        "document_type": "PDF",
        "legs": legs,
    }
    return settle_job(ctx, [doc], "freight_audit"), carrier


@pytest.fixture(scope="module")
def recipe(ctx: WorkerContext) -> tuple[str, str]:
    """A recipe costed at 1.22 a portion at one location: a unit cost keeps four places."""
    name = uid("RECIPE-")
    put_contract(ctx.engine, "recipe_cost", name, 1, recipe_contract())
    doc = {
        "document_id": uid("RCP-"),
        "partition_key": name,
        "recipe_id": name,
        "contract_version": 1,
        "location_ids": ["STORE-1"],
        "effective_at": "2026-07-01T00:00:00Z",
        "pricing_snapshot": {"FLOUR": "2", "TOMATO": "1", "MOZZ": "4", "BASIL": "10"},
        "trigger": "vendor_rate",
    }
    return settle_job(ctx, [doc], "recipe_cost"), name


def get(client: Client, path: str) -> Any:
    response = client.bearer("GET", path)
    assert response.status_code == 200, response.text
    return response.json()


def feed_rows(client: Client, partition_key: str, count: int) -> list[dict[str, Any]]:
    """The partition's first ``count`` feed rows. The feed is shared with the
    rest of the suite: a page may end on its scan budget before the rows, or
    another test's open transaction may hold them back a while."""
    rows: list[dict[str, Any]] = []
    cursor = ""
    deadline = time.monotonic() + DEADLINE_S
    while len(rows) < count and time.monotonic() < deadline:
        page = get(client, f"/v1/ledger/feed?partition_key={partition_key}&wait=5{cursor}")
        rows += page["items"]
        cursor = f"&after={page['next_cursor']}"
    assert len(rows) == count, rows
    return rows


def amounts(body: Any) -> list[str]:
    """Every amount a body holds, by its key, depth first."""
    found: list[str] = []
    if isinstance(body, dict):
        for key, value in body.items():
            if key in MONEY and isinstance(value, str):
                found.append(value)
            else:
                found += amounts(value)
    elif isinstance(body, list):
        for value in body:
            found += amounts(value)
    return found


def test_a_jobs_amounts_its_lines_and_its_timeline_are_at_the_kinds_quantum(
    viewer: Client, promo: tuple[str, str, str], freight: tuple[str, str], recipe: tuple[str, str]
) -> None:
    promo_job, _, _ = promo
    job = get(viewer, f"/v1/jobs/{promo_job}")
    assert job["amounts"] == {"posted": "1.00", "disputed": "6.00", "disputed_model": "5.00"}
    lines = get(viewer, f"/v1/jobs/{promo_job}/lines")["items"]
    assert [(i["amount"], i["claimed_amount"], i["delta"]) for i in lines] == [
        ("1.00", "1.00", "1.00"),
        ("5.00", "6.00", "5.00"),
    ]
    timeline = get(viewer, f"/v1/jobs/{promo_job}/timeline")["partitions"]
    assert [(p["amount_posted"], p["amount_disputed"]) for p in timeline] == [("1.00", "6.00")]

    freight_job, _ = freight
    assert get(viewer, f"/v1/jobs/{freight_job}")["amounts"] == {
        "posted": "53.75",
        "disputed": "60.00",
        "disputed_model": "53.75",
    }
    legs = get(viewer, f"/v1/jobs/{freight_job}/lines")["items"]
    assert [(i["amount"], i["claimed_amount"]) for i in legs] == [
        ("53.75", "53.75"),
        ("53.75", "60.00"),
    ]

    recipe_job, _ = recipe
    assert get(viewer, f"/v1/jobs/{recipe_job}")["amounts"] == {
        "posted": "1.2200",
        "disputed": "0.0000",
        "disputed_model": "0.0000",
    }
    [cost] = get(viewer, f"/v1/jobs/{recipe_job}/lines")["items"]
    assert (cost["amount"], cost["claimed_amount"], cost["delta"]) == ("1.2200", None, "1.2200")

    listed = get(viewer, "/v1/jobs?limit=500")["items"]
    mine = {j["job_id"]: j["amounts"] for j in listed}
    assert mine[promo_job] == {"posted": "1.00", "disputed": "6.00", "disputed_model": "5.00"}
    assert mine[recipe_job]["posted"] == "1.2200"


def test_the_feed_and_a_lines_history_are_at_the_kinds_quantum(
    viewer: Client, promo: tuple[str, str, str], recipe: tuple[str, str]
) -> None:
    _, vendor, document_id = promo
    rows = feed_rows(viewer, vendor, 2)
    assert sorted((r["amount"], r["claimed_amount"], r["delta"]) for r in rows) == [
        ("1.00", "1.00", "1.00"),
        ("5.00", "6.00", "5.00"),
    ]
    _, name = recipe
    [cost] = feed_rows(viewer, name, 1)
    assert (cost["amount"], cost["claimed_amount"], cost["delta"]) == ("1.2200", None, "1.2200")

    found = get(viewer, f"/v1/lines?document_id={document_id}")["items"]
    assert sorted(amounts(found)) == sorted(["1.00", "1.00", "1.00", "5.00", "6.00", "5.00"])
    key = next(r["reconciliation_key"] for r in rows if r["claimed_amount"] == "6.00")
    identity = get(viewer, f"/v1/identities/{key}")
    assert identity["amount_now"] == "5.00"
    assert [(e["amount"], e["claimed_amount"], e["delta"]) for e in identity["entries"]] == [
        ("5.00", "6.00", "5.00")
    ]
    [opened] = identity["disputes"]
    assert (opened["claimed_amount"], opened["model_amount"], opened["variance"]) == (
        "6.00",
        "5.00",
        "1.00",
    )


def test_a_dispute_its_resolution_its_audit_entry_and_csv_are_at_the_kinds_quantum(
    viewer: Client, operator: Client, freight: tuple[str, str]
) -> None:
    _, carrier = freight
    [opened] = get(viewer, f"/v1/disputes?partition_key={carrier}")["items"]
    assert (opened["claimed_amount"], opened["model_amount"], opened["variance"]) == (
        "60.00",
        "53.75",
        "6.25",
    )
    with viewer.bearer_stream(f"/v1/disputes?partition_key={carrier}", "text/csv") as exported:
        text = exported.read().decode()
    [row] = list(csv.DictReader(io.StringIO(text)))
    assert (row["claimed_amount"], row["model_amount"], row["variance"]) == (
        "60.00",
        "53.75",
        "6.25",
    )
    done = operator.bearer(
        "POST",
        f"/admin/disputes/{opened['id']}/resolve",
        {"decision": "settle_at", "amount": "57", "note": "split"},
    )
    assert done.status_code == 200, done.text
    assert done.json()["resolution"]["amount"] == "57.00"
    assert get(viewer, f"/v1/disputes/{opened['id']}")["resolution"]["amount"] == "57.00"
    audit = get(operator, "/admin/audit?limit=500")["items"]
    [entry] = [a for a in audit if a["target"] == str(opened["id"])]
    assert entry["details"]["amount"] == "57.00"


def test_the_job_lines_csv_is_at_the_kinds_quantum(
    viewer: Client, promo: tuple[str, str, str]
) -> None:
    promo_job, _, _ = promo
    exported = viewer.bearer("GET", f"/v1/jobs/{promo_job}/lines.csv")
    assert exported.status_code == 200, exported.text
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [(r["amount"], r["claimed_amount"], r["delta"]) for r in rows] == [
        ("1.00", "1.00", "1.00"),
        ("5.00", "6.00", "5.00"),
    ]


def test_the_dashboard_and_a_partners_disputes_are_at_the_kinds_quantum(
    viewer: Client, operator: Client, promo: tuple[str, str, str], recipe: tuple[str, str]
) -> None:
    money = get(viewer, "/v1/dashboard/summary?range=1h")["money"]
    assert {m["kind"] for m in money} >= {"promo_accrual", "recipe_cost"}
    for m in money:
        for value in (m["posted"], m["disputed"]):
            # Other tests' sums share the ledger: each at its quantum, never cut.
            assert value == plain(at_quantum(Decimal(value), KINDS[m["kind"]].quantum)), m
    sender = uid("P")[:15].upper()
    put = operator.bearer("PUT", f"/v1/partners/ZZ/{sender}", {"name": "n", "contract_version": 1})
    assert put.status_code in (200, 201), put.text
    partner = get(viewer, f"/v1/partners/ZZ/{sender}")
    assert partner["health"]["open_disputes"] == {"count": 0, "variance": "0.00"}
