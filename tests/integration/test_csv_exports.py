"""Every CSV settleq answers, over HTTP on each ledger backend: a producer's or
an operator's text that a spreadsheet would run as a formula comes out
neutralised, amounts stay numbers, and a job's lines carry their job, kind,
partition and business fields (docs/api.md#csv-exports)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from tests.support.dispute_jobs import VARIANCES, promo_lines
from tests.support.factories import promo_doc, publish_promo_contracts, store_job, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv

pytestmark = pytest.mark.both_backends
VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}", "Accept": "text/csv"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}", "Accept": "text/csv"}
# What a vendor may send as a document id that a spreadsheet runs as a formula.
HOSTILE_IDS = ["=1+2", "+1+2", "-1+2", "@SUM(1)"]


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def job(ctx: WorkerContext) -> tuple[str, str, list[dict[str, Any]]]:
    """Four documents with hostile ids, two per chunk: posted, disputed (one
    with a negative variance) and dead-lettered lines, formulas in sku and store."""
    vendor = uid("CSV-")
    publish_promo_contracts(ctx.engine, [vendor])
    docs = []
    for n, document_id in enumerate(HOSTILE_IDS):
        lines = promo_lines()
        lines[0] |= {
            "sku": "=SUM(A1:A9)",
            "store_id": "@STORE",
            "transaction_date": "2026-07-0" + str(n + 1),
        }
        lines.append({**lines[0], "line_no": 6, "promo_tier": "T9"})  # dead-lettered
        docs.append(promo_doc(vendor, lines, document_id=document_id + uid("-")))
    settings = ctx.settings.model_copy(update={"max_chunk_documents": 2})
    job_id, messages = store_job(ctx.engine, settings, ctx.internal_key, docs)
    assert len(messages) == 2
    for message in messages:
        settle_chunk(ctx, message, 1)
    return job_id, vendor, docs


def read(http: TestClient, path: str, headers: dict[str, str]) -> list[dict[str, str]]:
    response = http.get(path, headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/csv")
    return list(csv.DictReader(io.StringIO(response.text, newline="")))


@pytest.mark.regression
def test_the_job_lines_csv_neutralises_formulas_and_keeps_amounts_numbers(
    http: TestClient, job: tuple[str, str, list[dict[str, Any]]]
) -> None:
    job_id, _, docs = job
    rows = read(http, f"/v1/jobs/{job_id}/lines.csv", VIEWER)
    assert len(rows) == 6 * len(docs)
    # Before (issue 29, G2): "=1+2-…" verbatim, a formula in finance's spreadsheet.
    assert {r["document_id"] for r in rows} == {"'" + d["document_id"] for d in docs}
    for r in rows:
        for column in ("amount", "claimed_amount", "delta"):
            assert r[column] == "" or Decimal(r[column]) == Decimal(r[column].lstrip("'"))
            assert not r[column].startswith("'")


@pytest.mark.regression
def test_the_job_lines_csv_names_job_kind_partition_and_the_lines_business_fields(
    http: TestClient, job: tuple[str, str, list[dict[str, Any]]]
) -> None:
    job_id, vendor, docs = job
    rows = read(http, f"/v1/jobs/{job_id}/lines.csv", VIEWER)
    # Before (issue 29, item 15): none of these columns existed.
    by_line = {(r["document_id"], r["line_ref"]): r for r in rows}
    for doc in docs:
        for line in doc["lines"]:
            r = by_line["'" + doc["document_id"], str(line["line_no"])]
            assert (r["job_id"], r["kind"], r["partition_key"]) == (job_id, "promo_accrual", vendor)
            assert r["period"] == doc["period"] and r["promo_tier"] == line["promo_tier"]
            assert r["sku"].lstrip("'") == line["sku"]
            assert Decimal(r["qualifying_units"]) == Decimal(line["qualifying_units"])
            assert r["store_id"].lstrip("'") == line.get("store_id", "")
            assert r["transaction_date"] == line.get("transaction_date", "")
    first = by_line["'" + docs[0]["document_id"], "1"]
    assert (first["sku"], first["store_id"]) == ("'=SUM(A1:A9)", "'@STORE")
    assert {r["outcome"] for r in rows} == {"posted", "disputed", "dead_lettered"}


def test_one_outcome_of_the_job_lines_csv_keeps_its_fields(
    http: TestClient, job: tuple[str, str, list[dict[str, Any]]]
) -> None:
    job_id, vendor, docs = job
    rows = read(http, f"/v1/jobs/{job_id}/lines.csv?outcome=dead_lettered", VIEWER)
    assert [r["line_ref"] for r in rows] == ["6"] * len(docs)
    assert {(r["partition_key"], r["promo_tier"], r["reason"]) for r in rows} == {
        (vendor, "T9", "unknown_promo_tier")
    }


@pytest.mark.regression
def test_the_dispute_csv_neutralises_ids_and_notes_and_keeps_a_negative_variance(
    http: TestClient, job: tuple[str, str, list[dict[str, Any]]]
) -> None:
    job_id, _, docs = job
    disputes = read(http, f"/v1/disputes?job_id={job_id}", VIEWER)
    assert len(disputes) == len(VARIANCES) * len(docs)
    assert {d["document_id"] for d in disputes} == {"'" + d["document_id"] for d in docs}
    assert {Decimal(d["variance"]) for d in disputes} == set(VARIANCES.values())
    assert "-2.00" in {d["variance"] for d in disputes}  # a number, not '-2.00
    target = disputes[0]["id"]
    resolved = http.post(
        f"/admin/disputes/{target}/resolve",
        json={"decision": "accept_model", "note": "=HYPERLINK(1)"},
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
    )
    assert resolved.status_code == 200, resolved.text
    [after] = [
        d
        for d in read(http, f"/v1/disputes?job_id={job_id}&status=all", VIEWER)
        if d["id"] == target
    ]
    assert after["note"] == "'=HYPERLINK(1)"  # before: verbatim


def test_dead_letters_come_as_csv_neutralised(
    http: TestClient, job: tuple[str, str, list[dict[str, Any]]]
) -> None:
    job_id, vendor, docs = job
    letters = read(http, f"/admin/dead-letters?job_id={job_id}", OPERATOR)
    assert {(r["document_id"], r["line_ref"], r["reason"]) for r in letters} == {
        ("'" + d["document_id"], "6", "unknown_promo_tier") for d in docs
    }
    assert {(r["job_id"], r["kind"], r["partition_key"]) for r in letters} == {
        (job_id, "promo_accrual", vendor)
    }
    assert http.get(f"/admin/dead-letters?job_id={job_id}", headers=VIEWER).status_code == 403
