"""A job's page counts its dead-lettered lines by reason from the server (issue
42, item 16): the page counted the reasons of at most 1,000 dead-lettered lines
it fetched, so a job with more showed too few; the timeline a viewer reads now
carries the counts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from services.api.app import create_app
from services.worker.context import WorkerContext
from services.worker.stages import settle_chunk
from tests.support.factories import promo_doc, promo_line, publish_promo_contracts, store_job, uid
from tests.support.infra import VIEWER_TOKEN, ServiceEnv

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}
UNKNOWN_TIER = 1_150  # more than the page's 1,000


@pytest.fixture(scope="module")
def http(test_env: ServiceEnv) -> Iterator[TestClient]:
    with TestClient(create_app(test_env.settings())) as client:
        yield client


@pytest.mark.regression
def test_the_timeline_counts_every_dead_lettered_line_by_reason(
    http: TestClient, ctx: WorkerContext
) -> None:
    vendor = uid("DLR-")
    publish_promo_contracts(ctx.engine, [vendor])
    lines = [promo_line(n, "4", "0.50", tier="T9") for n in range(1, UNKNOWN_TIER + 1)]
    docs = [promo_doc(vendor, lines[i : i + 50]) for i in range(0, len(lines), 50)]
    docs.append(promo_doc(vendor, [promo_line(1, "8", "1.00")]))  # posted
    job_id, messages = store_job(ctx.engine, ctx.settings, ctx.internal_key, docs)
    for message in messages:
        settle_chunk(ctx, message, 1)
    job = http.get(f"/v1/jobs/{job_id}", headers=VIEWER).json()
    assert job["outcomes"]["dead_lettered"] == UNKNOWN_TIER
    timeline = http.get(f"/v1/jobs/{job_id}/timeline", headers=VIEWER)
    assert timeline.status_code == 200, timeline.text
    assert timeline.json()["dead_letters"] == [
        {"reason": "unknown_promo_tier", "lines": UNKNOWN_TIER}
    ]
