"""Jobs, line outcomes and contracts over HTTP, with their roles (docs/api.md#jobs,
docs/api.md#contracts)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.commands.client import Client
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    SCOPED_ID,
    SCOPED_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


def as_role(
    http: TestClient, token: str | None = None, key: tuple[str, str] | None = None
) -> Client:
    key_id, secret = key or (None, None)
    return Client("http://testserver", key_id, secret, token=token, http=http)


@pytest.fixture(scope="module")
def settled_job(ctx: WorkerContext) -> tuple[str, str]:
    """One settled job of producer acme: 3 posted, 1 disputed, 1 dead-lettered."""
    vendor = uid("V-")
    publish_promo_contracts(ctx.engine, [vendor])
    docs = [
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "40", "6.00")]),
        promo_doc(
            vendor,
            [
                promo_line(1, "16", "2.00"),
                promo_line(2, "24", "3.00"),
                promo_line(3, "1", "1.00", tier="T9"),
            ],
        ),
    ]
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    return job_id, vendor


def test_viewer_sees_job_status_with_string_amounts(http, settled_job) -> None:
    job_id, _ = settled_job
    response = as_role(http, VIEWER_TOKEN).bearer("GET", f"/v1/jobs/{job_id}")
    assert response.status_code == 200, response.text
    job = response.json()
    assert job["state"] == "completed" and job["progress"] == 1
    assert job["outcomes"] == {"posted": 3, "disputed": 1, "duplicate": 0, "dead_lettered": 1}
    # posted: 1.00 + 2.00 + 3.00 (modelled); disputed: the claim of 6.00, and
    # the model's 40 x 0.125, which balances book (issue 52 item 11)
    assert job["amounts"] == {"posted": "6.00", "disputed": "6.00", "disputed_model": "5.00"}
    assert job["chunks"] == {"total": 1, "done": 1} and job["finished_at"]


def test_producer_sees_only_its_own_jobs(http, settled_job) -> None:
    job_id, _ = settled_job
    own = as_role(http, key=(PRODUCER_ID, PRODUCER_SECRET)).signed("GET", f"/v1/jobs/{job_id}")
    assert own.status_code == 200
    other = as_role(http, key=(SCOPED_ID, SCOPED_SECRET)).signed("GET", f"/v1/jobs/{job_id}")
    assert other.status_code == 404
    unsigned = http.get(f"/v1/jobs/{job_id}")
    assert unsigned.status_code == 401
    assert (
        http.get(f"/v1/jobs/{job_id}", headers={"Authorization": "Bearer nope"}).status_code == 401
    )


def test_line_outcomes_page_through_with_a_cursor(http, settled_job) -> None:
    job_id, _ = settled_job
    viewer = as_role(http, VIEWER_TOKEN)
    seen = []
    cursor = None
    while True:
        path = f"/v1/jobs/{job_id}/lines?limit=2" + (f"&cursor={cursor}" if cursor else "")
        page = viewer.bearer("GET", path).json()
        seen += page["items"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == 5
    assert {line["outcome"] for line in seen} == {"posted", "disputed", "dead_lettered"}
    disputed = viewer.bearer("GET", f"/v1/jobs/{job_id}/lines?outcome=disputed").json()["items"]
    assert [(d["amount"], d["claimed_amount"], d["line_ref"]) for d in disputed] == [
        ("5.00", "6.00", "2")
    ]
    dead = viewer.bearer("GET", f"/v1/jobs/{job_id}/lines?outcome=dead_lettered").json()["items"]
    assert dead[0]["reason"] == "unknown_promo_tier"


def test_a_resent_line_is_listed_as_its_own_jobs_duplicate(http, ctx) -> None:
    """Posted lines are listed from the ledger, duplicates from their own rows:
    the resending job lists its duplicate, the first job keeps its posting; both
    in the resending batch's order."""
    vendor = uid("V-")
    publish_promo_contracts(ctx.engine, [vendor])
    doc = promo_doc(vendor, [promo_line(1, "8", "1.00")])
    fresh = promo_doc(vendor, [promo_line(1, "16", "2.00")])
    first_id, [first] = store_job(ctx.engine, ctx.settings, ctx.internal_key, [doc])
    again_id, [again] = store_job(ctx.engine, ctx.settings, ctx.internal_key, [doc, fresh])
    settle_chunk(ctx, first, 1)
    settle_chunk(ctx, again, 1)
    viewer = as_role(http, VIEWER_TOKEN)

    def lines(job_id: str, query: str = "") -> list[tuple[str, str, str | None]]:
        page = viewer.bearer("GET", f"/v1/jobs/{job_id}/lines{query}").json()
        return [(i["document_id"], i["outcome"], i["delta"]) for i in page["items"]]

    assert lines(first_id) == [(doc["document_id"], "posted", "1.00")]
    assert lines(again_id) == [
        (doc["document_id"], "duplicate", None),
        (fresh["document_id"], "posted", "2.00"),
    ]
    assert lines(again_id, "?outcome=duplicate") == [(doc["document_id"], "duplicate", None)]
    assert lines(again_id, "?outcome=disputed") == []
    bad = viewer.bearer("GET", f"/v1/jobs/{again_id}/lines?cursor=12")
    assert bad.status_code == 422 and bad.json()["error"]["code"] == "invalid_cursor"


def test_jobs_list_filters_by_partition_newest_first(http, ctx, settled_job) -> None:
    job_id, vendor = settled_job
    newer_id, _ = store_job(
        ctx.engine,
        ctx.settings,
        ctx.internal_key,
        [promo_doc(vendor, [promo_line(1, "8", "1.00")])],
    )
    viewer = as_role(http, VIEWER_TOKEN)
    page = viewer.bearer("GET", f"/v1/jobs?partition_key={vendor}&limit=1").json()
    assert [j["job_id"] for j in page["items"]] == [newer_id]
    rest = viewer.bearer(
        "GET", f"/v1/jobs?partition_key={vendor}&limit=1&cursor={page['next_cursor']}"
    ).json()
    assert [j["job_id"] for j in rest["items"]] == [job_id]
    completed = viewer.bearer("GET", f"/v1/jobs?partition_key={vendor}&state=completed").json()
    assert [j["job_id"] for j in completed["items"]] == [job_id]


def test_contracts_need_an_operator_and_are_immutable(http) -> None:
    vendor = uid("V-")
    path = f"/v1/contracts/promo_accrual/{vendor}/3"
    body = {"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"}
    operator = as_role(http, OPERATOR_TOKEN)
    assert http.put(path, json=body).status_code == 401
    assert as_role(http, VIEWER_TOKEN).bearer("PUT", path, body).status_code == 403
    assert operator.bearer("PUT", path, body).status_code == 201
    assert operator.bearer("PUT", path, body).status_code == 200
    changed = operator.bearer("PUT", path, {**body, "tolerance": "0.10"})
    assert changed.status_code == 409
    assert changed.json()["error"]["code"] == "contract_version_conflict"
    got = operator.bearer("GET", path).json()
    assert got["body"] == body and got["version"] == 3
    listed = operator.bearer("GET", f"/v1/contracts/promo_accrual/{vendor}").json()
    assert [v["version"] for v in listed["items"]] == [3]
    assert operator.bearer("GET", f"/v1/contracts/promo_accrual/{vendor}/4").status_code == 404
    assert operator.bearer("PUT", f"/v1/contracts/nope/{vendor}/1", body).status_code == 404
    bad = operator.bearer("PUT", f"/v1/contracts/promo_accrual/{vendor}/5", {"tier_rates": {}})
    assert bad.status_code == 422
    number = operator.bearer(
        "PUT",
        f"/v1/contracts/promo_accrual/{vendor}/6",
        {"tier_rates": {"T1": 0.125}, "tolerance": "0"},
    )
    assert number.status_code == 422


def test_health_and_readiness_need_no_token(http) -> None:
    assert http.get("/healthz").json()["status"] == "ok"
    ready = http.get("/readyz")
    assert ready.status_code == 200 and set(ready.json()["checks"]) == {
        "database",
        "redis",
        "broker",
    }


def test_openapi_yaml_is_what_the_app_serves(http) -> None:
    published = yaml.safe_load((ROOT / "openapi.yaml").read_text())
    assert published == http.get("/openapi.json").json(), (
        "openapi.yaml is stale: run `settleq openapi > openapi.yaml`"
    )


def test_a_document_and_a_lines_story_are_found_without_the_job(http, settled_job) -> None:
    """Search by document id and partition, then a line's identity
    (docs/api.md#ledger-history-and-search)."""
    job_id, vendor = settled_job
    viewer = as_role(http, VIEWER_TOKEN)
    page = viewer.bearer("GET", f"/v1/jobs/{job_id}/lines").json()["items"]
    document_id = page[0]["document_id"]
    found = viewer.bearer(
        "GET", f"/v1/lines?document_id={document_id}&partition_key={vendor}"
    ).json()
    mine = [line for line in page if line["document_id"] == document_id]
    assert sorted((i["line_ref"], i["outcome"]) for i in found["items"]) == sorted(
        (i["line_ref"], i["outcome"]) for i in mine
    )
    assert {(i["job_id"], i["partition_key"], i["kind"]) for i in found["items"]} == {
        (job_id, vendor, "promo_accrual")
    }
    disputed = next(i for i in page if i["outcome"] == "disputed")
    story = viewer.bearer("GET", f"/v1/identities/{disputed['reconciliation_key']}")
    assert story.status_code == 200, story.text
    identity = story.json()
    assert [e["outcome"] for e in identity["entries"]] == ["disputed"]
    assert identity["amount_now"] == identity["entries"][0]["delta"]
    assert identity["open_dispute"]["ledger_entry_id"] == identity["entries"][0]["ledger_entry_id"]
    assert identity["open_dispute"]["status"] == "open"
    assert (identity["partition_key"], identity["document_id"]) == (
        vendor,
        disputed["document_id"],
    )


def test_history_and_search_refuse_what_they_cannot_answer(http) -> None:
    viewer = as_role(http, VIEWER_TOKEN)
    missing = viewer.bearer("GET", "/v1/identities/" + "a" * 64)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "identity_not_found"
    assert viewer.bearer("GET", "/v1/identities/not-a-key").status_code == 422
    assert viewer.bearer("GET", "/v1/lines").status_code == 422  # a document id is required
    bad_cursor = viewer.bearer("GET", "/v1/lines?document_id=X&cursor=Mnw1")
    assert bad_cursor.json()["error"]["code"] == "invalid_cursor"
    assert viewer.bearer("GET", "/v1/lines?document_id=X").json() == {
        "items": [],
        "next_cursor": None,
    }
    assert http.get("/v1/lines?document_id=X").status_code == 401
    assert http.get("/v1/identities/" + "a" * 64).status_code == 401


def test_the_cli_finds_a_document_and_tells_a_lines_story(
    http, settled_job, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``settleq lines find`` and ``settleq identity``, against the API."""
    from rich.console import Console

    from services.commands import options
    from services.commands.finance import history as history_cli

    job_id, vendor = settled_job
    console = Console(width=200, record=True, force_terminal=False)
    monkeypatch.setattr(options, "console", console)
    monkeypatch.setattr(history_cli, "console", console)
    viewer = as_role(http, VIEWER_TOKEN)
    monkeypatch.setattr(options, "make_client", lambda *_: viewer)
    page = viewer.bearer("GET", f"/v1/jobs/{job_id}/lines").json()["items"]
    disputed = next(i for i in page if i["outcome"] == "disputed")

    history_cli.lines_find(document=disputed["document_id"], partition_key=vendor, token="t")
    found = console.export_text()
    assert job_id in found and "disputed" in found and "6.00" in found
    history_cli.identity(disputed["reconciliation_key"], token="t")
    story = console.export_text()
    assert "amount now: " in story and "open dispute " in story
