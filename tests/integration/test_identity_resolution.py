"""A line's story says how its dispute was decided (issue 42, item 16): the
identity carries each of its disputes with its resolution (decision, amount,
note, who and when), so its page can show them; before, only an open dispute
was there, and a resolved one's decision, note and decider appeared nowhere."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


@pytest.mark.regression
def test_an_identity_carries_its_resolved_disputes_decision_note_and_decider(
    http: TestClient, ctx: WorkerContext
) -> None:
    vendor = uid("IDR-")
    publish_promo_contracts(ctx.engine, [vendor])
    doc = promo_doc(vendor, [promo_line(1, "2", "5.00")])  # claimed 5.00, model 0.25
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, [doc])
    for message in messages:
        settle_chunk(ctx, message, 1)
    [line] = http.get(f"/v1/jobs/{job_id}/lines", headers=VIEWER).json()["items"]
    assert line["outcome"] == "disputed"
    [dispute] = http.get(f"/v1/disputes?job_id={job_id}", headers=VIEWER).json()["items"]
    note = "contract rate applies [see email 12]"
    decided = http.post(
        f"/admin/disputes/{dispute['id']}/resolve",
        json={"decision": "accept_model", "note": note},
        headers=OPERATOR,
    )
    assert decided.status_code in (200, 201), decided.text

    story = http.get(f"/v1/identities/{line['reconciliation_key']}", headers=VIEWER).json()
    assert story["open_dispute"] is None
    assert [e["outcome"] for e in story["entries"]] == ["disputed", "resolved"]
    [shown] = story["disputes"]
    assert shown["id"] == dispute["id"] and shown["status"] == "resolved"
    resolution = shown["resolution"]
    assert resolution["decision"] == "accept_model" and resolution["note"] == note
    assert resolution["resolved_by"] and resolution["resolved_at"]
    assert resolution["ledger_entry_id"] == story["entries"][1]["ledger_entry_id"]
