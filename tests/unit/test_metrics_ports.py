"""Each worker process of ``settleq up`` serves its metrics on a port of its own."""

from __future__ import annotations

import pytest

from services.cli import _stack_commands


def _port(command: list[str]) -> int:
    return int(command[command.index("--metrics-port") + 1])


def test_up_gives_each_worker_process_its_own_metrics_port(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SETTLEQ_WORKER_METRICS_PORT", "9300")
    monkeypatch.setenv("SETTLEQ_WORKER_PROCESSES", "2")
    _, fast, heavy, _ = _stack_commands(8000)
    # fast_path's processes take 9300 and 9301 (the worker command adds i), then compute_heavy's.
    assert (_port(fast), _port(heavy)) == (9300, 9302)


def test_no_metrics_port_serves_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SETTLEQ_WORKER_METRICS_PORT", raising=False)
    _, fast, heavy, _ = _stack_commands(8000)
    assert (_port(fast), _port(heavy)) == (0, 0)
