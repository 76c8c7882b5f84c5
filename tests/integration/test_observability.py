"""Dashboard data and metrics in process (docs/api.md#operations-endpoints): the summary endpoint,
the API's and a worker's /metrics, their tokens, and the stats queries on both
ledger backends."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import httpx
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine

from services.api.app import create_app
from services.api.metrics import API_METRICS
from services.commands.client import Client
from services.worker.context import WorkerContext
from services.worker.metrics import WORKER_METRICS, WorkerMetrics
from services.worker.stages import settle_chunk
from shared.adapters.db import stats
from shared.domain.kinds import get_kind
from shared.domain.kinds.promo_accrual import PromoContract, PromoDocument
from shared.domain.pipeline.settlement import plan_chunk
from shared.domain.pipeline.units import ChunkRef
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import (
    OPERATOR_TOKEN,
    PRODUCER_ID,
    PRODUCER_SECRET,
    VIEWER_TOKEN,
    ServiceEnv,
)
from tests.support.ledger import commit_plan
from tests.support.stack import free_port

KIND = get_kind("promo_accrual")
CONTRACT = PromoContract.model_validate({"tier_rates": {"T1": "0.125"}, "tolerance": "0.05"})


def names(text: str) -> set[str]:
    """Metric names as exposed (``# TYPE`` lines: counters keep their ``_total``)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def sample(text: str, name: str, **labels: str) -> float | None:
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return float(s.value)
    return None


@pytest.mark.both_backends
def test_throughput_and_oldest_waiting_chunk_on_both_backends(engine: Engine) -> None:
    from shared.config.settings import Settings

    # Only this test's chunk is newer (the database is shared with earlier tests).
    since = dt.datetime.now(dt.UTC)
    vendor = uid("V-")
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00", tier="T9")])]
    job_id, [message] = store_job(engine, Settings(), b"k", docs)
    with engine.connect() as conn:
        before = stats.throughput(conn, dt.datetime.now(dt.UTC), 600, 10)
        waiting = stats.oldest_unsettled_chunk(conn, since)
    assert waiting is not None and since <= waiting <= dt.datetime.now(dt.UTC)

    ref = ChunkRef(message["chunk_id"], job_id, "promo_accrual", 2)
    parsed = [PromoDocument.model_validate(d) for d in docs]
    plan = plan_chunk(KIND, parsed, {(vendor, 1): CONTRACT})
    with engine.begin() as conn:
        commit_plan(conn, ref, plan, 1)
    with engine.connect() as conn:
        after = stats.throughput(conn, dt.datetime.now(dt.UTC), 600, 10)
        assert stats.oldest_unsettled_chunk(conn, since) is None

    assert len(after.lines) == 60 and after.bucket_s == 10
    assert sum(after.lines) - sum(before.lines) == 2
    assert after.lines[-1] >= 1  # settled just now: the last bucket
    assert after.outcomes["posted"] - before.outcomes["posted"] == 1
    assert after.outcomes["dead_lettered"] - before.outcomes["dead_lettered"] == 1


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


def test_summary_and_metrics_need_a_viewer_or_operator_token(http: TestClient) -> None:
    producer = Client("http://testserver", PRODUCER_ID, PRODUCER_SECRET, http=http)
    for path in ("/v1/dashboard/summary", "/metrics"):
        assert http.get(path).json()["error"]["code"] == "token_missing"
        bad = http.get(path, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_token"
        assert producer.signed("GET", path).status_code == 401  # producers see no dashboard
        for token in (VIEWER_TOKEN, OPERATOR_TOKEN):
            assert http.get(path, headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_dashboard_page_is_a_static_shell_with_a_strict_policy(http: TestClient) -> None:
    page = http.get("/dashboard")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "/dashboard/assets/dashboard.js" in page.text
    for asset, media in (("dashboard.js", "javascript"), ("dashboard.css", "text/css")):
        response = http.get(f"/dashboard/assets/{asset}")
        assert response.status_code == 200 and media in response.headers["content-type"]
    # Whatever a producer names things is inserted as text, never parsed as HTML.
    for module in (
        "dashboard",
        "api",
        "chart",
        "dom",
        "format",
        "job",
        "letters",
        "periods",
        "deductions",
        "contracts",
    ):
        script = http.get(f"/dashboard/assets/{module}.js")
        assert script.status_code == 200 and "javascript" in script.headers["content-type"]
        assert "innerHTML" not in script.text and "insertAdjacentHTML" not in script.text


def test_summary_shows_settled_lines_dead_letters_and_queues(
    http: TestClient, ctx: WorkerContext, test_env: ServiceEnv
) -> None:
    vendor = uid("V-")
    publish_promo_contracts(ctx.engine, [vendor])
    docs = [promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "1.00", tier="T9")])]
    _, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)

    summary = http.get(
        "/v1/dashboard/summary", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"}
    ).json()
    assert summary["outcomes"]["posted"] >= 1 and summary["outcomes"]["dead_lettered"] >= 1
    assert len(summary["throughput"]["lines_per_s"]) == 60
    assert sum(summary["throughput"]["lines_per_s"]) > 0
    assert any(
        d["reason"] == "unknown_promo_tier" and d["status"] == "dead"
        for d in summary["dead_letters"]
    )
    prefix = test_env.queue_prefix
    assert {q["queue"] for q in summary["queues"]} == {
        f"{prefix}.fast_path",
        f"{prefix}.fast_path.DQ",
        f"{prefix}.compute_heavy",
        f"{prefix}.compute_heavy.DQ",
    }
    assert summary["queues_error"] is None


def test_api_metrics_label_requests_by_route_template(http: TestClient) -> None:
    viewer = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
    job_id = uid("nosuchjob")
    assert http.get(f"/v1/jobs/{job_id}", headers=viewer).status_code == 404
    http.get("/no/such/path")
    text = http.get("/metrics", headers=viewer).text
    assert set(API_METRICS) <= names(text)
    count = "settleq_http_request_duration_seconds_count"
    assert sample(text, count, route="/v1/jobs/{job_id}", status="404", method="GET")
    assert sample(text, count, route="unmatched", status="404")
    assert job_id not in text  # never the raw path
    assert sample(text, "settleq_stats_source_up", source="broker") == 1
    assert sample(text, "settleq_stats_source_up", source="database") == 1


def test_worker_counts_each_committed_unit_once(ctx: WorkerContext) -> None:
    metrics = WorkerMetrics(ctx.settings)
    vendor = uid("V-")
    publish_promo_contracts(ctx.engine, [vendor])
    docs = [
        promo_doc(vendor, [promo_line(1, "8", "1.00"), promo_line(2, "8", "9.00")]),
        promo_doc(vendor, [promo_line(1, "8", "1.00", tier="T9")]),
        promo_doc(vendor, [promo_line(1, "8", "1.00")], version=7),  # unknown version
    ]
    _, [message] = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    saved = ctx.on_commit
    ctx.on_commit = metrics.committed
    try:
        settle = metrics.timed_settle(settle_chunk)
        assert settle(ctx, message, 1) is not None
        assert settle(ctx, message, 1) is None  # redelivered: stops at its marker
    finally:
        ctx.on_commit = saved

    def value(name: str, **labels: str) -> float:
        return metrics.registry.get_sample_value(name, labels) or 0.0

    lines = "settleq_lines_total"
    assert value(lines, kind="promo_accrual", outcome="posted") == 1
    assert value(lines, kind="promo_accrual", outcome="disputed") == 1
    assert value(lines, kind="promo_accrual", outcome="dead_lettered") == 2
    letters = "settleq_dead_letters_total"
    assert value(letters, kind="promo_accrual", reason="unknown_promo_tier") == 1
    assert value(letters, kind="promo_accrual", reason="unknown_contract_version") == 1
    settle_count = "settleq_settle_duration_seconds_count"
    assert value(settle_count, result="committed") == 1
    assert value(settle_count, result="skipped") == 1


def test_worker_metrics_endpoint_needs_a_token(test_env: ServiceEnv) -> None:
    metrics = WorkerMetrics(test_env.settings(task_timeout_s=42))
    port = free_port()
    server = metrics.serve("127.0.0.1", port)
    assert server is not None
    try:
        url = f"http://127.0.0.1:{port}"
        assert httpx.get(f"{url}/metrics").status_code == 401
        bad = httpx.get(f"{url}/metrics", headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and bad.json()["error"]["code"] == "invalid_token"
        assert httpx.get(f"{url}/other").status_code == 404
        ok = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {VIEWER_TOKEN}"})
        assert ok.status_code == 200
        assert set(WORKER_METRICS) <= names(ok.text)
        assert 'le="42.0"' in ok.text  # task_timeout_s is a bucket: the alert is exact
        assert metrics.serve("127.0.0.1", port) is None  # port taken: logged, not fatal
    finally:
        server.shutdown()
        server.server_close()
