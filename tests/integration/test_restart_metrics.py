"""``settleq_process_restarts_total{component}`` and
``settleq_process_crash_looping{component}`` on the API's /metrics, and the
components on its /readyz (docs/architecture.md#processes-and-the-supervisor): read from the
supervisor's counts file at every scrape and probe, so a restarted API serves
the state of the supervisor that outlived it."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from services.api.app import create_app
from services.supervisor.counts import write_counts
from tests.support.infra import VIEWER_TOKEN, ServiceEnv

VIEWER = {"Authorization": f"Bearer {VIEWER_TOKEN}"}


def series(http: TestClient, name: str) -> dict[str, float]:
    text = http.get("/metrics", headers=VIEWER).text
    return {
        s.labels["component"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def restarts(http: TestClient) -> dict[str, float]:
    return series(http, "settleq_process_restarts_total")


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
        assert series(http, "settleq_process_crash_looping") == {}
        assert set(http.get("/readyz").json()["checks"]) == {"database", "redis", "broker"}


@pytest.mark.regression  # issue 29 item 4: a crash loop stopped the stack, unreported
def test_a_crash_looping_component_is_named_by_readyz_and_its_gauge(
    test_env: ServiceEnv, tmp_path: Path
) -> None:
    counts = tmp_path / "restarts.json"
    settings = test_env.settings(supervisor_counts_file=str(counts))
    every = {"api": 0, "fast_path": 6, "compute_heavy": 1, "relay": 0}
    with TestClient(create_app(settings)) as http:
        write_counts(counts, every)
        ready = http.get("/readyz")
        assert ready.status_code == 200, ready.text
        assert ready.json()["checks"] == {
            "database": "ok",
            "redis": "ok",
            "broker": "ok",
            **dict.fromkeys(every, "ok"),
        }
        assert series(http, "settleq_process_crash_looping") == dict.fromkeys(every, 0)

        write_counts(counts, every, ["fast_path"])
        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["status"] == "unavailable"
        assert ready.json()["checks"]["fast_path"] == "crash_looping"
        assert [k for k, v in ready.json()["checks"].items() if v != "ok"] == ["fast_path"]
        assert series(http, "settleq_process_crash_looping") == {
            **dict.fromkeys(every, 0),
            "fast_path": 1,
        }
        assert http.get("/healthz").status_code == 200  # the process itself is up

        write_counts(counts, every)  # it stayed up
        assert http.get("/readyz").status_code == 200
        assert series(http, "settleq_process_crash_looping")["fast_path"] == 0
