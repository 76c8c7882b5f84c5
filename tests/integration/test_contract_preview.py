"""Previewing a contract version (docs/api.md#previewing-a-contract-version):
the selected documents' stored lines settled under an unpublished body by the
settlement code itself, writing nothing but the preview's audit line; then,
for every kind, the body published and the same documents re-sent through the
settle stage move exactly the previewed money, line by line, on each ledger
backend."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, delete, func, select

from services.api.app import create_app
from services.commands.client import Client
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db import tables
from shared.adapters.db.contracts import put_contract
from shared.adapters.db.schema import metadata
from tests.support.factories import promo_doc, promo_line, store_job, uid
from tests.support.infra import OPERATOR_TOKEN, ServiceEnv

pytestmark = pytest.mark.both_backends

ledger = tables.ledger_entries


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


def counts(engine: Engine) -> dict[str, int]:
    """Every table's rows."""
    with engine.connect() as conn:
        return {
            t.name: conn.execute(select(func.count()).select_from(t)).scalar_one()
            for t in metadata.sorted_tables
        }


def settle(ctx: WorkerContext, kind: str, docs: list[dict[str, Any]]) -> str:
    """Store and settle documents through the settle stage; the job's id."""
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs, kind)
    for message in messages:
        assert settle_chunk(ctx, message, 1) is not None
    return job_id


def job_rows(engine: Engine, job_id: str) -> list[Any]:
    with engine.connect() as conn:
        return list(conn.execute(select(ledger).where(ledger.c.job_id == job_id)).all())


# Per kind: the partition's first version, the previewed one, and its documents
# (some lines post under the first version and are disputed under the second,
# and one document cannot settle under the second at all).
def promo_case() -> tuple[str, str, dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    vendor = uid("PV-")
    v1 = {"tier_rates": {"T1": "0.125", "T2": "0.200"}, "tolerance": "0.05"}
    v2 = {"tier_rates": {"T1": "0.150"}, "tolerance": "0.05"}
    docs = [
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "16", "2.40")]),
        promo_doc(vendor, [promo_line(1, "10", "1.50"), promo_line(2, "3", "0.375")]),
        promo_doc(vendor, [promo_line(1, "5", "1.00", tier="T2")]),  # no T2 in v2
    ]
    return "promo_accrual", vendor, v1, v2, docs


def recipe_case() -> tuple[str, str, dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    recipe = uid("RECIPE-")

    def request(at: str, flour: str) -> dict[str, Any]:
        return {
            "document_id": uid("RQ-"),
            "partition_key": recipe,
            "contract_version": 1,
            "recipe_id": recipe,
            "location_ids": ["STORE-1", "STORE-2"],
            "effective_at": at,
            "pricing_snapshot": {"FLOUR": flour, "SUGAR": "0.50"},
            "trigger": "vendor_rate",
        }

    docs = [request("2026-01-01T00:00:00Z", "1.00"), request("2026-02-01T00:00:00Z", "1.25")]
    return (
        "recipe_cost",
        recipe,
        {"bom": {"FLOUR": "2"}},
        {"bom": {"FLOUR": "2", "SUGAR": "3"}},
        docs,
    )


def freight_case() -> tuple[str, str, dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    carrier = uid("CARRIER-")

    def body(rate: str) -> dict[str, Any]:
        return {
            "rate_per_mile": rate,
            "fuel_surcharge": "0",
            "accessorials": {},
            "tolerance": "1.00",
        }

    def invoice(miles: str, billed: str) -> dict[str, Any]:
        leg = {"leg_no": 1, "miles": miles, "accessorials": [], "billed_amount": billed}
        return {
            "document_id": uid("PRO-"),
            "partition_key": carrier,
            "contract_version": 1,
            "document_type": "PDF",
            "legs": [leg],
        }

    docs = [invoice("100", "200.00"), invoice("40", "100.00"), invoice("10", "25.00")]
    return "freight_audit", carrier, body("2.00"), body("2.50"), docs


CASES = {"promo_accrual": promo_case, "recipe_cost": recipe_case, "freight_audit": freight_case}


@pytest.mark.parametrize("kind_name", sorted(CASES))
def test_publishing_the_previewed_body_and_resending_moves_exactly_the_previewed_money(
    ctx: WorkerContext, operator: Client, kind_name: str
) -> None:
    kind, partition, v1, v2, docs = CASES[kind_name]()
    put_contract(ctx.engine, kind, partition, 1, v1)
    first = settle(ctx, kind, docs)
    before = counts(ctx.engine)

    answer = operator.bearer(
        "POST",
        f"/v1/contracts/{kind}/{partition}/preview",
        {"contract": v2, "select": {"job_ids": [first]}},
    )
    assert answer.status_code == 200, answer.text
    preview = answer.json()

    after = counts(ctx.engine)
    assert after.pop("audit_log") == before.pop("audit_log") + 1  # the preview's own line
    assert after == before  # nothing else: no ledger, outbox, job, chunk, letter, marker
    assert preview["version"] == 2
    assert preview["not_stored"] == []
    again = operator.bearer(
        "POST",
        f"/v1/contracts/{kind}/{partition}/preview",
        {"contract": v2, "select": {"job_ids": [first]}},
    )
    assert again.json()["digest"] == preview["digest"]  # the same ledger, the same bytes

    put_contract(ctx.engine, kind, partition, 2, v2)
    resent = settle(ctx, kind, [{**d, "contract_version": 2} for d in docs])
    rows = job_rows(ctx.engine, resent)
    moved = Counter[str]()
    for r in rows:
        moved[r.outcome] += r.delta
    outcomes = preview["outcomes"]
    assert Decimal(outcomes["delta_posted"]) == moved["posted"]
    assert Decimal(outcomes["delta_disputed"]) == moved["disputed"]
    assert outcomes["posted"] == sum(r.outcome == "posted" for r in rows)
    assert outcomes["disputed"] == sum(r.outcome == "disputed" for r in rows)
    per_document = Counter[str]()
    for r in rows:
        per_document[r.document_id] += r.delta
    assert {d["document_id"]: Decimal(d["delta"]) for d in preview["documents"]} == {
        d["document_id"]: per_document[d["document_id"]] for d in docs
    }
    with ctx.engine.connect() as conn:
        letters = conn.execute(
            select(func.coalesce(func.sum(tables.dead_letters.c.lines), 0)).where(
                tables.dead_letters.c.job_id == resent
            )
        ).scalar_one()
    assert outcomes["dead_lettered"] == letters
    total = Decimal(preview["totals"][partition]["delta"])
    assert total == moved["posted"] + moved["disputed"]


def test_a_preview_names_its_outcome_changes_and_the_documents_no_longer_stored(
    ctx: WorkerContext, operator: Client
) -> None:
    kind, vendor, v1, v2, docs = promo_case()
    put_contract(ctx.engine, kind, vendor, 1, v1)
    settle(ctx, kind, docs)
    # Settled, then its stored chunks deleted (as a retention policy would):
    # its lines are in the ledger, its documents no longer stored.
    retired = promo_doc(vendor, [promo_line(1, "8", "1.00")])
    retired_job = settle(ctx, kind, [retired])
    with ctx.engine.begin() as conn:
        conn.execute(delete(tables.chunks).where(tables.chunks.c.job_id == retired_job))
    wanted = [docs[0]["document_id"], docs[2]["document_id"], retired["document_id"]]
    answer = operator.bearer(
        "POST",
        f"/v1/contracts/{kind}/{vendor}/preview",
        {"contract": v2, "select": {"document_ids": wanted}},
    )
    assert answer.status_code == 200, answer.text
    preview = answer.json()
    assert preview["not_stored"] == [retired["document_id"]]  # never guessed
    changes = preview["totals"][vendor]["changes"]
    assert changes.get("posted→dead_lettered") == 1  # T2 is not in the new version
    assert sum(changes.values()) >= 1
    by_doc = {d["document_id"]: d for d in preview["documents"]}
    assert set(by_doc) == {docs[0]["document_id"], docs[2]["document_id"]}
    assert by_doc[docs[2]["document_id"]]["delta"] == "0"


@pytest.mark.parametrize(
    ("body", "code", "status"),
    [
        (
            {
                "contract": {"tier_rates": {"T1": "-1"}, "tolerance": "0"},
                "select": {"period": "2026-11"},
            },
            "contract_invalid",
            422,
        ),
        ({"contract": {"tier_rates": {"T1": "0.1"}, "tolerance": "0"}, "select": {}}, None, 422),
        (
            {
                "contract": {"tier_rates": {"T1": "0.1"}, "tolerance": "0"},
                "select": {"period": "1999-01"},
            },
            "period_not_found",
            404,
        ),
        (  # a job id no job can have (a NUL would reach the database: a 500)
            {
                "contract": {"tier_rates": {"T1": "0.1"}, "tolerance": "0"},
                "select": {"job_ids": ["job\u0000"]},
            },
            None,
            422,
        ),
    ],
)
def test_a_bad_preview_is_refused_with_its_code(
    operator: Client, body: dict[str, Any], code: str | None, status: int
) -> None:
    answer = operator.bearer("POST", f"/v1/contracts/promo_accrual/{uid('PV-')}/preview", body)
    assert answer.status_code == status, answer.text
    if code is not None:
        assert answer.json()["error"]["code"] == code
