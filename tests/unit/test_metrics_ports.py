"""The worker processes of ``settleq up``: how many each tier runs, and a
metrics port of its own for each."""

from __future__ import annotations

import pytest

from services.commands.cli import stack_children, worker_processes
from shared.config.settings import Settings


def _ports(settings: Settings) -> dict[str, int]:
    """Each worker process of ``settleq up``, by name, and its metrics port."""
    found = {}
    for child in stack_children(settings, 8000):
        argv = list(child.argv)
        if "worker" in argv:
            assert argv[argv.index("--processes") + 1] == "1"  # supervised one by one
            found[child.name] = int(argv[argv.index("--metrics-port") + 1])
    return found


def test_up_gives_each_worker_process_its_own_metrics_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SETTLEQ_WORKER_METRICS_PORT", "9300")
    monkeypatch.setenv("SETTLEQ_FAST_PATH_PROCESSES", "2")
    monkeypatch.setenv("SETTLEQ_WEBHOOK_METRICS_PORT", "9310")
    # fast_path's processes take 9300 and 9301, then compute_heavy's; webhooks its own.
    assert _ports(Settings()) == {
        "fast_path-0": 9300,
        "fast_path-1": 9301,
        "compute_heavy-0": 9302,
        "compute_heavy-1": 9303,
        "webhooks": 9310,
    }


def test_no_metrics_port_serves_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETTLEQ_WORKER_METRICS_PORT", raising=False)
    monkeypatch.delenv("SETTLEQ_WEBHOOK_METRICS_PORT", raising=False)
    assert set(_ports(Settings()).values()) == {0}


def test_up_supervises_every_component(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETTLEQ_FAST_PATH_PROCESSES", raising=False)
    monkeypatch.delenv("SETTLEQ_COMPUTE_HEAVY_PROCESSES", raising=False)
    children = stack_children(Settings(), 8000)
    assert [(c.name, c.component) for c in children] == [
        ("api", "api"),
        ("fast_path-0", "fast_path"),
        ("compute_heavy-0", "compute_heavy"),
        ("compute_heavy-1", "compute_heavy"),
        ("relay", "relay"),
        ("webhooks", "webhooks"),
    ]


def test_each_tier_runs_its_own_number_of_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The defaults are the bench's: one validating process, two settling ones.
    assert worker_processes(Settings(), "fast_path") == 1
    assert worker_processes(Settings(), "compute_heavy") == 2
    assert worker_processes(Settings(), "fast_path,compute_heavy") == 2
    monkeypatch.setenv("SETTLEQ_FAST_PATH_PROCESSES", "3")
    assert worker_processes(Settings(), "fast_path") == 3
