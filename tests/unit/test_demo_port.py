"""``settleq demo --start-stack`` starts its stack on ``--port``, else a ``--url`` of
its own, else where ``settleq up`` would: SETTLEQ_API_PORT, else 8000 (issue 42,
item 17: it ignored the setting and had no ``--port``)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import services.commands.demo as demo
from services.commands.cli import app

pytestmark = pytest.mark.usefixtures("restore_logging")


class _DeadStack:
    """The stack's process, stopped at once: the demo stops there (exit 1)."""

    returncode = 1

    def poll(self) -> int:
        return 1

    def send_signal(self, sig: int) -> None:
        pass

    def wait(self, timeout: float | None = None) -> int:
        return 1


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[list[str]]:
    seen: list[list[str]] = []

    def popen(argv: list[str], **kwargs: Any) -> _DeadStack:
        seen.append(argv)
        return _DeadStack()

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(
        demo.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(argv, 0)
    )
    monkeypatch.setattr(demo.subprocess, "Popen", popen)
    monkeypatch.setenv("SETTLEQ_DATABASE_URL", f"sqlite:///{tmp_path}/x.db")
    return seen


def _port(argv: list[str]) -> str:
    assert argv[-3:-1] == ["up", "--port"], argv
    return argv[-1]


@pytest.mark.regression
@pytest.mark.parametrize(
    ("args", "env", "port"),
    [
        (["--port", "9123"], {}, "9123"),
        ([], {"SETTLEQ_API_PORT": "9124"}, "9124"),
        (["--port", "9125"], {"SETTLEQ_API_PORT": "9124"}, "9125"),
        ([], {}, "8000"),
        (["--url", "http://127.0.0.1:9126"], {"SETTLEQ_API_PORT": "9124"}, "9126"),
    ],
)
def test_demo_starts_its_stack_on_port_or_settleq_api_port(
    started: list[list[str]], args: list[str], env: dict[str, str], port: str
) -> None:
    result = CliRunner().invoke(app, ["demo", "--start-stack", *args], env=env)
    assert result.exit_code == 1, result.output  # the stack "stopped" at once
    assert _port(started[-1]) == port
    assert f"http://127.0.0.1:{port}" in result.output
