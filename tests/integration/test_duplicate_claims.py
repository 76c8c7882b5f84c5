"""A line sent again with its claim changed is a duplicate that says so
(docs/api.md#jobs, issue 42 item 14), on each ledger backend and each way a
unit's rows go in (PostgreSQL's COPY for first versions, the statement for a
re-priced partition)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.commands.client import Client
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from shared.adapters.db.jobs.queries import job_status
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import VIEWER_TOKEN, ServiceEnv

pytestmark = pytest.mark.both_backends


@pytest.fixture(scope="module")
def viewer(backend_env: ServiceEnv) -> Iterator[Client]:
    with TestClient(create_app(backend_env.settings())) as http:
        yield Client("http://testserver", token=VIEWER_TOKEN, http=http)


def amount(text: str | None) -> Decimal | None:
    return None if text is None else Decimal(text)


def settle(ctx: WorkerContext, docs: list[dict[str, Any]]) -> str:
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    return job_id


@pytest.mark.regression
@pytest.mark.parametrize("version", [1, 2], ids=["first_version", "repriced"])
def test_a_resent_line_whose_claim_changed_is_a_duplicate_naming_both_claims(
    ctx: WorkerContext, viewer: Client, version: int
) -> None:
    """Issue 42 item 14: the same line sent again with its claim corrected
    (10.00 -> 10.01) ended ``duplicate`` with no reason: the correction vanished."""
    vendor = uid("DC-")
    publish_promo_contracts(ctx.engine, [vendor])
    if version == 2:
        publish_promo_contracts(ctx.engine, [vendor], version=2)
    document_id = uid("INV-")

    def document(first: str, second: str) -> dict[str, Any]:
        lines = [promo_line(1, "80", first), promo_line(2, "8", second, sku="SKU-2")]
        return promo_doc(vendor, lines, version=version, document_id=document_id)

    settle(ctx, [document("10.00", "1.00")])
    job_id = settle(ctx, [document("10.01", "1.00")])  # line 1 corrected, line 2 the same

    page = viewer.bearer("GET", f"/v1/jobs/{job_id}/lines").json()["items"]
    shown = [(ln["line_ref"], ln["outcome"], ln["reason"]) for ln in page]
    assert shown == [("1", "duplicate", "claimed_amount_differs"), ("2", "duplicate", None)]
    claims = [(amount(ln["claimed_amount"]), amount(ln["ledger_claimed_amount"])) for ln in page]
    assert claims == [(Decimal("10.01"), Decimal("10.00")), (Decimal("1.00"), None)]

    job = viewer.bearer("GET", f"/v1/jobs/{job_id}").json()
    assert job["outcomes"]["duplicate"] == 2
    assert job["duplicates_claim_differs"] == 1
    status = job_status(ctx.engine, job_id)
    assert status is not None and status.claim_differs == 1

    exported = viewer.bearer("GET", f"/v1/jobs/{job_id}/lines.csv")
    assert exported.status_code == 200
    rows = list(csv.DictReader(io.StringIO(exported.text)))
    assert [(r["reason"], r["claimed_amount"], r["ledger_claimed_amount"]) for r in rows] == [
        ("claimed_amount_differs", "10.01", "10.00"),
        ("", "1.00", ""),
    ]


@pytest.mark.regression
def test_the_same_claim_sent_again_stays_a_plain_duplicate(
    ctx: WorkerContext, viewer: Client
) -> None:
    vendor = uid("DS-")
    publish_promo_contracts(ctx.engine, [vendor])
    doc = promo_doc(vendor, [promo_line(1, "8", "1.00")])
    settle(ctx, [doc])
    # 1.0 is the ledger's 1.00: the same amount, not a corrected claim.
    again = settle(ctx, [{**doc, "lines": [promo_line(1, "8", "1.0")]}])
    [line] = viewer.bearer("GET", f"/v1/jobs/{again}/lines").json()["items"]
    assert (line["outcome"], line["reason"], line["ledger_claimed_amount"]) == (
        "duplicate",
        None,
        None,
    )
    assert viewer.bearer("GET", f"/v1/jobs/{again}").json()["duplicates_claim_differs"] == 0
