"""``settleq_process_restarts_total{component}`` on the API's /metrics
(docs/architecture.md#processes-and-the-supervisor): read from the supervisor's counts file at every
scrape, so a restarted API serves the counts of the supervisor that outlived it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from services.api.app import create_app
from services.supervisor.counts import write_counts
from tests.support.infra import VIEWER_TOKEN, ServiceEnv

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}


def restarts(http: TestClient) -> dict[str, float]:
    text = http.get("/metrics", headers=VIEWER).text
    return {
        s.labels["component"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "settleq_process_restarts_total"
    }


@pytest.mark.regression  # issue 12 item 1: restarts were neither made nor counted
def test_api_serves_the_supervisors_counts_and_a_new_api_the_same(
    test_env: ServiceEnv, tmp_path: Path
) -> None:
    counts = tmp_path / "restarts.json"
    settings = test_env.settings(supervisor_counts_file=str(counts))
    with TestClient(create_app(settings)) as http:
        assert restarts(http) == {}  # no file yet: no series
        write_counts(counts, {"api": 0, "relay": 0})
        assert restarts(http) == {"api": 0, "relay": 0}
        write_counts(counts, {"api": 1, "relay": 2})  # read at scrape time
        assert restarts(http) == {"api": 1, "relay": 2}
    # A restarted API (a new app, new registry) does not start again from zero.
    with TestClient(create_app(settings)) as http:
        assert restarts(http) == {"api": 1, "relay": 2}
        counts.write_text("not json")
        assert restarts(http) == {}  # unreadable: left out, and the scrape still answers


def test_no_supervisor_no_restart_series(test_env: ServiceEnv) -> None:
    with TestClient(create_app(test_env.settings())) as http:
        assert restarts(http) == {}
