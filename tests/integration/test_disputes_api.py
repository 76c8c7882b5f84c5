"""The dispute queue over HTTP in process (docs/api.md#disputes), on each ledger
backend: list and page, filters, the streamed CSV, stats, resolving one and in
bulk, at most once under 20 concurrent requests, and a job's lines."""

from __future__ import annotations

import csv
import datetime as dt
import io
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from decimal import Decimal
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from services.api import csv_export
from services.api.app import create_app
from services.api.disputes.export import HEADER
from services.commands.client import Client
from services.worker.context import WorkerContext
from shared.adapters.db import tables
from shared.domain.signing import token_digest
from tests.support.dispute_jobs import (
    VARIANCES,
    Disputed,
    resolution_audits,
    resolved_rows,
    settle_disputed,
)
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv

pytestmark = pytest.mark.both_backends
ACTOR = f"operator:{token_digest(OPERATOR_TOKEN)[:12]}"


@pytest.fixture(scope="module")
def http(backend_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(backend_env.settings())) as client:
        yield client


@pytest.fixture(scope="module")
def operator(http: TestClient) -> Client:
    return Client("http://testserver", token=OPERATOR_TOKEN, http=http)


@pytest.fixture(scope="module")
def viewer(http: TestClient) -> Client:
    return Client("http://testserver", token=VIEWER_TOKEN, http=http)


@pytest.fixture
def job(ctx: WorkerContext) -> Disputed:
    return settle_disputed(ctx)


def listed(client: Client, query: str) -> list[dict[str, Any]]:
    response = client.bearer("GET", f"/v1/disputes?{query}")
    assert response.status_code == 200, response.text
    page = response.json()
    assert page["next_cursor"] is None
    items: list[dict[str, Any]] = page["items"]
    return items


def by_ref(client: Client, query: str) -> dict[str, dict[str, Any]]:
    """The listed disputes by line (line_no "2" to "5": ``VARIANCES``)."""
    return {d["line_ref"]: d for d in listed(client, query)}


def resolve(client: Client, dispute_id: int, body: dict[str, Any]) -> Any:
    return client.bearer("POST", f"/admin/disputes/{dispute_id}/resolve", body)


def test_reads_need_a_token_and_resolutions_an_operators(http: TestClient, viewer: Client) -> None:
    for path in ("/v1/disputes", "/v1/disputes/stats", "/v1/disputes/1"):
        response = http.get(path)
        assert response.status_code == 401 and response.json()["error"]["code"] == "token_missing"
    assert viewer.bearer("GET", "/v1/disputes").status_code == 200
    body = {"decision": "accept_claim", "note": "viewer"}
    for path in ("/admin/disputes/1/resolve", "/admin/disputes/resolve"):
        response = viewer.bearer("POST", path, {**body, "limit": 1})
        assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
        assert http.post(path, json=body).status_code == 401


def test_list_is_oldest_first_paged_by_cursor_and_filtered(viewer: Client, job: Disputed) -> None:
    query = f"job_id={job.job_id}"
    items = listed(viewer, query)
    assert [d["id"] for d in items] == sorted(d["id"] for d in items)
    assert {d["line_ref"]: Decimal(d["variance"]) for d in items} == VARIANCES
    order = [d["line_ref"] for d in items]  # the ledger's order (by id), not the lines'

    def oldest_first(*refs: str) -> list[str]:
        return [r for r in order if r in refs]

    first = by_ref(viewer, query)["2"]
    assert first["id"] == first["ledger_entry_id"] and first["status"] == "open"
    assert (Decimal(first["claimed_amount"]), Decimal(first["model_amount"])) == (6, 5)
    assert first["resolution"] is None and first["opened_at"].endswith("Z")
    assert (first["partition_key"], first["document_id"]) == (job.vendor, job.document_id)

    seen, cursor = [], None
    while True:
        after = f"&cursor={cursor}" if cursor else ""
        page = viewer.bearer("GET", f"/v1/disputes?{query}&limit=3{after}").json()
        seen += [d["id"] for d in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [d["id"] for d in items]

    everything = oldest_first("2", "3", "4", "5")
    tomorrow = dt.datetime.now(dt.UTC).date() + dt.timedelta(days=2)
    by = {
        f"partition_key={job.vendor}": everything,
        f"{query}&min_abs_variance=1.00": oldest_first("2", "4"),
        f"{query}&min_abs_variance=0.5&kind=promo_accrual": oldest_first("2", "3", "4"),
        f"{query}&kind=freight_audit": [],
        f"{query}&status=resolved": [],
        f"{query}&status=all": everything,
        f"{query}&opened_before=2020-01-01T00:00:00Z": [],
        f"{query}&opened_before={tomorrow}T00:00:00Z": everything,
    }
    for filters, refs in by.items():
        assert [d["line_ref"] for d in listed(viewer, filters)] == refs, filters


def test_get_one_and_unknown_ids(viewer: Client, job: Disputed, engine: Any) -> None:
    [first, *_] = listed(viewer, f"job_id={job.job_id}")
    assert viewer.bearer("GET", f"/v1/disputes/{first['id']}").json() == first
    missing = viewer.bearer("GET", "/v1/disputes/999999999")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "dispute_not_found"
    # A ledger row that is not disputed is no dispute.
    e = tables.ledger_entries
    with engine.connect() as conn:
        posted = conn.execute(
            select(e.c.id).where(e.c.job_id == job.job_id, e.c.outcome == "posted")
        ).scalar_one()
    assert viewer.bearer("GET", f"/v1/disputes/{posted}").status_code == 404


def test_csv_streams_every_matching_dispute_with_a_stable_header(
    viewer: Client, operator: Client, job: Disputed
) -> None:
    first = by_ref(viewer, f"job_id={job.job_id}")["2"]
    note = 'paid, per "call" on\nMonday'
    resolve(operator, first["id"], {"decision": "settle_at", "amount": "5.5", "note": note})
    # limit (and a cursor) are for pages: the CSV is every matching dispute.
    with viewer.bearer_stream(
        f"/v1/disputes?job_id={job.job_id}&status=all&limit=1", "text/csv"
    ) as r:
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/csv; charset=utf-8"
        disposition = r.headers["content-disposition"]
        assert disposition.startswith('attachment; filename="disputes-') and ".csv" in disposition
        text = r.read().decode()
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert tuple(rows[0]) == HEADER
    csv_rows = {row[5]: dict(zip(HEADER, row, strict=True)) for row in rows[1:]}
    assert set(csv_rows) == set(VARIANCES)
    done = csv_rows["2"]
    assert (done["status"], done["decision"]) == ("resolved", "settle_at")
    assert Decimal(done["decided_amount"]) == Decimal("5.5")
    assert done["note"] == note and done["resolved_by"] == ACTOR
    assert Decimal(done["claimed_amount"]) == 6 and Decimal(done["variance"]) == Decimal("1.00")
    assert done["opened_at"].endswith("Z") and done["resolved_at"].endswith("Z")
    still_open = csv_rows["4"]
    assert still_open["status"] == "open" and Decimal(still_open["variance"]) == Decimal(-2)
    assert all(still_open[c] == "" for c in HEADER[13:])
    for row in csv_rows.values():
        for column in ("claimed_amount", "model_amount", "variance"):
            assert "E" not in row[column] and "e" not in row[column]
            assert row[column] == format(Decimal(row[column]), "f")
    empty = viewer.bearer_stream("/v1/disputes?partition_key=NO-SUCH-VENDOR", "text/csv")
    with empty as r:
        assert r.read().decode().splitlines() == [",".join(HEADER)]


def test_csv_chunks_from_one_cursor_across_threads(
    viewer: Client, job: Disputed, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk is made in a worker thread, from the same database cursor."""
    monkeypatch.setattr(csv_export, "ROWS_PER_CHUNK", 1)
    with viewer.bearer_stream(f"/v1/disputes?job_id={job.job_id}", "text/csv") as r:
        chunks = list(r.iter_text())
    text = "".join(chunks)
    rows = list(csv.reader(io.StringIO(text, newline="")))
    assert len(rows) == 5 and len(chunks) >= 2
    assert [int(row[0]) for row in rows[1:]] == [
        d["id"] for d in listed(viewer, f"job_id={job.job_id}")
    ]


def test_stats_count_and_sum_per_status_and_kind(
    viewer: Client, operator: Client, job: Disputed, backend: str
) -> None:
    before = viewer.bearer("GET", "/v1/disputes/stats").json()
    first = by_ref(viewer, f"job_id={job.job_id}")["2"]
    assert (
        resolve(operator, first["id"], {"decision": "accept_model", "note": "s"}).status_code == 200
    )
    stats = viewer.bearer("GET", "/v1/disputes/stats").json()
    assert set(stats) == {"totals", "top_partitions", "oldest_open_at", "deductions"}
    assert stats["oldest_open_at"].endswith("Z")

    def group(s: dict[str, Any], status: str) -> dict[str, Any]:
        found = [t for t in s["totals"] if (t["status"], t["kind"]) == (status, "promo_accrual")]
        return (
            found[0]
            if found
            else {"count": 0, "claimed": "0", "variance": "0", "abs_variance": "0"}
        )

    # The job's four disputes were open before; one of them is now resolved.
    opened, resolved = group(stats, "open"), group(stats, "resolved")
    was_open, was_resolved = group(before, "open"), group(before, "resolved")
    assert (opened["count"] - was_open["count"], resolved["count"] - was_resolved["count"]) == (
        -1,
        1,
    )
    moved = Decimal(resolved["variance"]) - Decimal(was_resolved["variance"])
    assert moved == Decimal("1.00")
    left = Decimal(opened["abs_variance"]) - Decimal(was_open["abs_variance"])
    assert left == Decimal("-1.00")
    assert Decimal(opened["claimed"]) - Decimal(was_open["claimed"]) == -6
    for p in stats["top_partitions"]:
        assert set(p) == {
            "kind",
            "partition_key",
            "open_count",
            "open_variance",
            "open_abs_variance",
        }
    if backend == "sqlite":  # a ledger of this module's own: this vendor is ranked
        mine = [p for p in stats["top_partitions"] if p["partition_key"] == job.vendor]
        assert [(p["open_count"], Decimal(p["open_abs_variance"])) for p in mine] == [
            (3, Decimal("2.80"))
        ]


def test_resolve_once_repeat_and_conflict(
    operator: Client, viewer: Client, job: Disputed, engine: Any
) -> None:
    found = by_ref(viewer, f"job_id={job.job_id}")
    d2, d3, d4 = found["2"], found["3"], found["4"]
    done = resolve(operator, d2["id"], {"decision": "accept_claim", "note": "vendor right"})
    assert done.status_code == 200, done.text
    body = done.json()
    r = body["resolution"]
    assert body["status"] == "resolved" and body["id"] == d2["id"]
    assert (r["decision"], r["amount"], r["note"], r["resolved_by"]) == (
        "accept_claim",
        d2["claimed_amount"],
        "vendor right",
        ACTOR,
    )
    assert r["ledger_entry_id"] > d2["id"] and r["resolved_at"].endswith("Z")
    # The same decision again, however it is worded: the same resolution, nothing new.
    again = resolve(operator, d2["id"], {"decision": "accept_claim", "note": "retry"})
    assert again.status_code == 200 and again.json()["resolution"] == r
    other = resolve(operator, d2["id"], {"decision": "accept_model", "note": "changed my mind"})
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "dispute_already_resolved"
    assert resolved_rows(engine, d2["id"]) == 1 and resolution_audits(engine, d2["id"]) == 1
    assert viewer.bearer("GET", f"/v1/disputes/{d2['id']}").json() == body

    at = resolve(operator, d3["id"], {"decision": "settle_at", "amount": "2.25", "note": "split"})
    assert Decimal(at.json()["resolution"]["amount"]) == Decimal("2.25")
    same = resolve(operator, d3["id"], {"decision": "settle_at", "amount": "2.2500", "note": "x"})
    assert same.status_code == 200 and same.json()["resolution"] == at.json()["resolution"]
    moved = resolve(operator, d3["id"], {"decision": "settle_at", "amount": "2.26", "note": "x"})
    assert moved.status_code == 409
    model = resolve(operator, d4["id"], {"decision": "accept_model", "note": "contract rules"})
    assert model.json()["resolution"]["amount"] == d4["model_amount"]

    missing = resolve(operator, 999999999, {"decision": "accept_claim", "note": "n"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "dispute_not_found"
    assert set(by_ref(viewer, f"job_id={job.job_id}&status=resolved")) == {"2", "3", "4"}
    audit = operator.bearer("GET", "/admin/audit?limit=20").json()["items"]
    mine = [a for a in audit if a["action"] == "dispute_resolve" and str(d3["id"]) in a["target"]]
    assert len(mine) == 1 and mine[0]["actor"] == ACTOR and OPERATOR_TOKEN not in str(audit)


def test_a_superseded_dispute_can_no_longer_be_resolved(
    operator: Client, viewer: Client, ctx: WorkerContext, job: Disputed
) -> None:
    old = listed(viewer, f"job_id={job.job_id}")
    newer = settle_disputed(ctx, job.vendor, version=2, document_id=job.document_id)
    assert listed(viewer, f"job_id={job.job_id}") == []
    gone = listed(viewer, f"job_id={job.job_id}&status=superseded")
    assert [d["id"] for d in gone] == [d["id"] for d in old]
    refused = resolve(operator, old[0]["id"], {"decision": "accept_claim", "note": "late"})
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "dispute_superseded"
    assert len(listed(viewer, f"job_id={newer.job_id}")) == 4  # the newer rows' own disputes


def test_bulk_resolve_by_filter_with_a_limit(
    operator: Client, viewer: Client, job: Disputed
) -> None:
    order = [d["line_ref"] for d in listed(viewer, f"job_id={job.job_id}")]
    small_ones = [r for r in order if r in ("3", "5")]  # abs variance 0.50 and 0.30
    small = {
        "decision": "accept_claim",
        "note": "weekly write-off under 0.60",
        "partition_key": job.vendor,
        "max_abs_variance": "0.60",
        "limit": 1,
    }
    assert operator.bearer("POST", "/admin/disputes/resolve", small).json() == {"resolved": 1}
    first = listed(viewer, f"job_id={job.job_id}&status=resolved")
    assert [d["line_ref"] for d in first] == small_ones[:1]  # the oldest first
    assert operator.bearer("POST", "/admin/disputes/resolve", {**small, "limit": 10000}).json() == {
        "resolved": 1
    }
    assert operator.bearer("POST", "/admin/disputes/resolve", {**small, "limit": 10000}).json() == {
        "resolved": 0
    }
    done = listed(viewer, f"job_id={job.job_id}&status=resolved")
    assert [d["line_ref"] for d in done] == small_ones
    assert all(
        d["resolution"]["amount"] == d["claimed_amount"]
        and d["resolution"]["note"] == small["note"]
        for d in done
    )
    model = {"decision": "accept_model", "note": "n", "job_id": job.job_id, "limit": 10}
    assert operator.bearer("POST", "/admin/disputes/resolve", model).json() == {"resolved": 2}
    assert listed(viewer, f"job_id={job.job_id}") == []


def test_twenty_concurrent_resolves_make_one_resolution(
    http: TestClient, viewer: Client, job: Disputed, engine: Any
) -> None:
    first = listed(viewer, f"job_id={job.job_id}")[0]
    body = {"decision": "accept_claim", "note": "raced"}
    headers = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}

    def once(_: int) -> Any:
        return http.post(f"/admin/disputes/{first['id']}/resolve", json=body, headers=headers)

    with ThreadPoolExecutor(max_workers=20) as pool:
        answers = list(pool.map(once, range(20)))
    assert [a.status_code for a in answers] == [200] * 20, [a.text for a in answers]
    resolutions = {a.json()["resolution"]["ledger_entry_id"] for a in answers}
    assert len(resolutions) == 1
    assert resolved_rows(engine, first["id"]) == 1
    assert resolution_audits(engine, first["id"]) == 1


def test_job_lines_carry_the_dispute_status(
    operator: Client, viewer: Client, ctx: WorkerContext, job: Disputed
) -> None:
    d2 = by_ref(viewer, f"job_id={job.job_id}")["2"]
    resolve(operator, d2["id"], {"decision": "accept_claim", "note": "n"})
    lines = viewer.bearer("GET", f"/v1/jobs/{job.job_id}/lines").json()["items"]
    assert len(lines) == 5  # a resolution's ledger row is not a line of the job
    status = {line["line_ref"]: (line["outcome"], line["dispute_status"]) for line in lines}
    assert status == {
        "1": ("posted", None),
        "2": ("disputed", "resolved"),
        "3": ("disputed", "open"),
        "4": ("disputed", "open"),
        "5": ("disputed", "open"),
    }
    settle_disputed(ctx, job.vendor, version=2, document_id=job.document_id)
    lines = viewer.bearer("GET", f"/v1/jobs/{job.job_id}/lines?outcome=disputed").json()["items"]
    assert {line["line_ref"]: line["dispute_status"] for line in lines} == {
        "2": "resolved",  # a resolution is for good
        "3": "superseded",
        "4": "superseded",
        "5": "superseded",
    }
    job_status = viewer.bearer("GET", f"/v1/jobs/{job.job_id}").json()
    assert job_status["lines"] == 5 and job_status["outcomes"]["disputed"] == 4
