"""What the dashboard reads beyond the summary's basics (docs/api.md#operations-endpoints):
the throughput ranges and "lines/s now", the relay's lag and outbox backlog, a
job's timeline and outcomes per partition, and its lines as CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import OPERATOR_TOKEN, VIEWER_TOKEN, ServiceEnv

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


@pytest.fixture
def settled_job(ctx: WorkerContext) -> tuple[str, str, str]:
    return _settle_job(ctx)


def _settle_job(ctx: WorkerContext) -> tuple[str, str, str]:
    """A job over two partitions: 2 posted, 1 disputed, 1 dead-lettered line."""
    first, second = uid("V-"), uid("V-")
    publish_promo_contracts(ctx.engine, [first, second])
    docs = [
        promo_doc(first, [promo_line(1, "8", "1.00"), promo_line(2, "4", "0.50", tier="T9")]),
        promo_doc(second, [promo_line(1, "16", "2.00"), promo_line(2, "2", "5.00")]),
    ]
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    return job_id, first, second


def get(http: TestClient, path: str, **params: Any) -> Any:
    response = http.get(path, params=params, headers=VIEWER)
    assert response.status_code == 200, response.text
    return response.json()


@pytest.mark.parametrize(
    ("span", "bucket_s", "points"), [("10m", 10, 60), ("1h", 60, 60), ("24h", 900, 96)]
)
def test_summary_ranges_and_lines_per_second_now_from_the_same_series(
    http: TestClient, settled_job: tuple[str, str, str], span: str, bucket_s: int, points: int
) -> None:
    summary = get(http, "/v1/dashboard/summary", range=span)
    flow = summary["throughput"]
    assert summary["range"] == span and summary["window_s"] == bucket_s * points
    assert flow["bucket_s"] == bucket_s and len(flow["lines_per_s"]) == points
    assert summary["rate_now"] == flow["lines_per_s"][-2]  # the chart's latest full bucket
    assert summary["outcomes"]["dead_lettered"] >= 1


def test_summary_refuses_an_unknown_range(http: TestClient) -> None:
    response = http.get("/v1/dashboard/summary", params={"range": "2h"}, headers=VIEWER)
    assert response.status_code == 422


def test_summary_shows_the_outbox_backlog_and_the_relay_lag(
    http: TestClient, ctx: WorkerContext
) -> None:
    # A worker that died after each commit, before publishing, and no relay
    # running: the job's outcome events wait in the outbox.
    ctx.events = None
    _settle_job(ctx)
    relay = get(http, "/v1/dashboard/summary")["relay"]
    assert relay["backlog"] >= 1
    assert relay["lag_s"] is not None and 0 <= relay["lag_s"] < 600


def test_job_timeline_has_its_chunks_and_outcomes_per_partition(
    http: TestClient, settled_job: tuple[str, str, str]
) -> None:
    job_id, first, second = settled_job
    job = get(http, f"/v1/jobs/{job_id}")
    timeline = get(http, f"/v1/jobs/{job_id}/timeline")
    assert timeline["job_id"] == job_id and timeline["kind"] == "promo_accrual"
    assert timeline["accepted_at"] == job["created_at"]
    assert timeline["completed_at"] == job["finished_at"] is not None
    assert timeline["chunks_total"] == len(timeline["chunks"]) >= 1
    assert timeline["chunks"][-1]["lines_done"] == timeline["lines"] == 4
    assert [p["partition_key"] for p in timeline["partitions"]] == sorted([first, second])
    by_key = {p["partition_key"]: p for p in timeline["partitions"]}
    assert by_key[first] | {"partition_key": ""} == {
        "partition_key": "",
        "posted": 1,
        "disputed": 0,
        "dead_lettered": 1,
        "amount_posted": by_key[first]["amount_posted"],
        "amount_disputed": "0.00",  # at the kind's quantum, as every amount
    }
    assert (by_key[second]["posted"], by_key[second]["disputed"]) == (1, 1)
    assert by_key[second]["dead_lettered"] == 0
    posted = sum(Decimal(p["amount_posted"]) for p in by_key.values())
    assert posted == Decimal(job["amounts"]["posted"]) > 0
    disputed = sum(Decimal(p["amount_disputed"]) for p in by_key.values())
    assert disputed == Decimal(job["amounts"]["disputed"])


def test_job_lines_csv_streams_every_line_and_filters_by_outcome(
    http: TestClient, settled_job: tuple[str, str, str]
) -> None:
    job_id, _, _ = settled_job
    response = http.get(f"/v1/jobs/{job_id}/lines.csv", headers=VIEWER)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    assert f'filename="job-{job_id}.csv"' in response.headers["content-disposition"]
    rows = list(csv.DictReader(io.StringIO(response.text)))
    api = get(http, f"/v1/jobs/{job_id}/lines", limit=100)["items"]
    assert sorted((r["document_id"], r["line_ref"], r["outcome"]) for r in rows) == sorted(
        (line["document_id"], line["line_ref"], line["outcome"]) for line in api
    )
    assert len(rows) == 4
    for r in rows:  # a disputed line's dispute status, as the JSON lines page gives it
        assert r["dispute_status"] == ("open" if r["outcome"] == "disputed" else "")
    posted = [r for r in rows if r["outcome"] == "posted"]
    assert all(Decimal(r["amount"]) > 0 and "E" not in r["amount"] for r in posted)

    disputed = http.get(
        f"/v1/jobs/{job_id}/lines.csv", params={"outcome": "disputed"}, headers=VIEWER
    )
    [line] = list(csv.DictReader(io.StringIO(disputed.text)))
    assert line["outcome"] == "disputed" and Decimal(line["claimed_amount"]) == Decimal("5.00")


def test_job_page_reads_need_a_token_and_a_real_job(
    http: TestClient, settled_job: tuple[str, str, str]
) -> None:
    job_id, _, _ = settled_job
    for path in (f"/v1/jobs/{job_id}/timeline", f"/v1/jobs/{job_id}/lines.csv"):
        assert http.get(path).status_code == 401
        operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
        assert http.get(path, headers=operator).status_code == 200
    for path in ("/v1/jobs/nope/timeline", "/v1/jobs/nope/lines.csv"):
        missing = http.get(path, headers=VIEWER)
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "job_not_found"


def test_dead_letter_list_shows_the_message_and_the_failed_line(
    http: TestClient, settled_job: tuple[str, str, str]
) -> None:
    job_id, first, _ = settled_job
    operator = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
    page = http.get("/admin/dead-letters", params={"job_id": job_id}, headers=operator).json()
    [letter] = page["items"]
    assert letter["partition_key"] == first and letter["reason"] == "unknown_promo_tier"
    assert "T9" in letter["message"]
    # The failed line itself, not its document's first characters.
    assert letter["excerpt"].startswith("{") and '"promo_tier":"T9"' in letter["excerpt"]
    assert '"line_no":2' in letter["excerpt"] and len(letter["excerpt"]) <= 240


def test_summary_money_adds_exactly_what_a_job_settled_per_kind(
    http: TestClient, ctx: WorkerContext
) -> None:
    def money() -> dict[str, tuple[Decimal, Decimal]]:
        summary = get(http, "/v1/dashboard/summary", range="1h")
        return {m["kind"]: (Decimal(m["posted"]), Decimal(m["disputed"])) for m in summary["money"]}

    zero = (Decimal(0), Decimal(0))
    before = money().get("promo_accrual", zero)
    job_id, _, _ = _settle_job(ctx)
    after = money()["promo_accrual"]
    job = get(http, f"/v1/jobs/{job_id}")
    assert after[0] - before[0] == Decimal(job["amounts"]["posted"]) == Decimal("3")
    assert after[1] - before[1] == Decimal(job["amounts"]["disputed"]) == Decimal("5")
    assert all(isinstance(m["posted"], str) for m in get(http, "/v1/dashboard/summary")["money"])


def test_summary_shows_the_supervisors_processes_when_it_reports_them(
    test_env: ServiceEnv, tmp_path: Path
) -> None:
    counts = tmp_path / "counts.json"
    settings = test_env.settings(supervisor_counts_file=str(counts))
    with TestClient(create_app(settings)) as client:
        assert get(client, "/v1/dashboard/summary")["processes"] is None  # no file yet
        counts.write_text(
            json.dumps(
                {"restarts": {"api": 0, "compute_heavy-1": 7}, "crash_looping": ["compute_heavy-1"]}
            )
        )
        assert get(client, "/v1/dashboard/summary")["processes"] == [
            {"component": "api", "restarts": 0, "crash_looping": False},
            {"component": "compute_heavy-1", "restarts": 7, "crash_looping": True},
        ]
        counts.write_text("not json")
        assert get(client, "/v1/dashboard/summary")["processes"] is None
