"""The worker processes of ``settleq up``: how many each tier runs, and a
metrics port of its own for each."""

from __future__ import annotations

import pytest

from services.cli import _stack_commands, worker_processes
from shared.settings import Settings


def _port(command: list[str]) -> int:
    return int(command[command.index("--metrics-port") + 1])


def test_up_gives_each_worker_process_its_own_metrics_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SETTLEQ_WORKER_METRICS_PORT", "9300")
    monkeypatch.setenv("SETTLEQ_FAST_PATH_PROCESSES", "2")
    _, fast, heavy, _ = _stack_commands(8000)
    # fast_path's processes take 9300 and 9301 (the worker command adds i), then compute_heavy's.
    assert (_port(fast), _port(heavy)) == (9300, 9302)


def test_no_metrics_port_serves_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETTLEQ_WORKER_METRICS_PORT", raising=False)
    _, fast, heavy, _ = _stack_commands(8000)
    assert (_port(fast), _port(heavy)) == (0, 0)


def test_each_tier_runs_its_own_number_of_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    # The defaults are the bench's: one validating process, two settling ones.
    assert worker_processes(Settings(), "fast_path") == 1
    assert worker_processes(Settings(), "compute_heavy") == 2
    assert worker_processes(Settings(), "fast_path,compute_heavy") == 2
    monkeypatch.setenv("SETTLEQ_FAST_PATH_PROCESSES", "3")
    assert worker_processes(Settings(), "fast_path") == 3
