"""``settleq up`` and ``settleq api`` on a port another program holds
(docs/operations.md#start-up-checks; issue 29 item 13): one line naming the
port, exit 1, nothing started: no child process, not even the stack's queues
declared on the broker. On a free port, ``up`` says where the API and the
dashboard are. And the retired restart settings, still set, are a warning
each, not a refusal.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.e2e.conftest import ARTIFACTS
from tests.support.infra import ServiceEnv, leftover_broker_objects
from tests.support.stack import ROOT, Stack, child_pids

# A refusal takes an import and a settings read: well under this, even on a
# loaded host. Before the check, `up` took its API's five deaths to give up.
REFUSED_WITHIN_S = 15


@contextmanager
def taken_port() -> Iterator[int]:
    """A port some other program listens on."""
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        yield int(held.getsockname()[1])


def run(env: ServiceEnv, args: list[str], **environ: str) -> tuple[int, list[str], set[int], float]:
    """Run ``settleq ARGS`` to its end: its exit code, its stderr's lines, every
    child process seen while it ran, and how long it took."""
    command = [sys.executable, "-m", "services.commands.cli", *args]
    env_vars = {**env.environ(), "PYTHONPATH": str(ROOT), **environ}
    started = time.monotonic()
    process = subprocess.Popen(
        command, env=env_vars, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    children: set[int] = set()
    try:
        while process.poll() is None and time.monotonic() - started < 90:
            children |= set(child_pids(process.pid))
            time.sleep(0.02)
    finally:
        if process.poll() is None:
            process.terminate()
        _, stderr = process.communicate(timeout=60)
    took = time.monotonic() - started
    return process.returncode, [x for x in stderr.splitlines() if x.strip()], children, took


@pytest.mark.regression
def test_up_on_a_taken_port_says_so_in_one_line_and_starts_nothing(stack_env: ServiceEnv) -> None:
    with taken_port() as port:
        code, lines, children, took = run(stack_env, ["up", "--port", str(port)])
    assert "Traceback" not in "\n".join(lines), lines
    assert lines == [lines[0]] and lines[0].startswith("settleq up: port_in_use: "), lines
    assert f"127.0.0.1:{port}" in lines[0] and "--port" in lines[0]
    assert code == 1
    assert took < REFUSED_WITHIN_S, took
    assert children == set()
    # Not even the queues a worker would consume from were declared.
    assert leftover_broker_objects([stack_env.queue_prefix]) == []


@pytest.mark.regression
def test_api_on_a_taken_port_says_so_in_one_line(stack_env: ServiceEnv) -> None:
    with taken_port() as port:
        code, lines, _, _ = run(stack_env, ["api", "--port", str(port)])
    assert "Traceback" not in "\n".join(lines), lines
    assert lines == [lines[0]] and lines[0].startswith("settleq api: port_in_use: "), lines
    assert f"127.0.0.1:{port}" in lines[0]
    assert code == 1


@pytest.mark.regression
def test_up_says_where_the_api_and_the_dashboard_are(stack_env: ServiceEnv) -> None:
    logs = ARTIFACTS / "logs" / "up_port"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(stack_env, logs)
    try:
        stack.start_up()
        said = f"settleq: API on {stack.url}, dashboard {stack.url}/dashboard"
        # Said once /healthz answers (polled): a moment after the API is ready.
        deadline = time.monotonic() + 5
        while said not in stack.log("up", tail=None).splitlines():
            assert time.monotonic() < deadline, stack.log("up", tail=None)
            time.sleep(0.1)
    finally:
        stack.stop()


def test_a_test_stack_whose_port_is_taken_before_up_binds_it_starts_on_another(
    stack_env: ServiceEnv,
) -> None:
    # The port free_port released can be taken first (ci-like, 2026-12-07: up's
    # supervisor restarted its API on it until the start cap): the test stack
    # takes another, as start_api does.
    logs = ARTIFACTS / "logs" / "up_port_taken"
    logs.mkdir(parents=True, exist_ok=True)
    stack = Stack(stack_env, logs)
    with taken_port() as port:
        stack.port, stack.url = port, f"http://127.0.0.1:{port}"
        try:
            stack.start_up()
            assert stack.port != port and "port_in_use" in stack.log("up", tail=None)
        finally:
            stack.stop()


@pytest.mark.regression
def test_retired_restart_settings_are_a_warning_each_not_a_refusal(
    stack_env: ServiceEnv,
) -> None:
    # Refused on its port after the warnings: the settings themselves stop nothing.
    retired = {"SETTLEQ_RESTART_GIVE_UP_DEATHS": "5", "SETTLEQ_RESTART_GIVE_UP_WINDOW_S": "60"}
    with taken_port() as port:
        code, lines, _, _ = run(stack_env, ["up", "--port", str(port)], **retired)
    assert code == 1 and lines[-1].startswith("settleq up: port_in_use: "), lines
    warnings = lines[:-1]
    assert len(warnings) == 2, lines
    for name, line in zip(sorted(retired), warnings, strict=True):
        assert '"level": "warning"' in line and f"{name} is no longer read" in line, line
