"""``settleq webhooks list|deliveries`` (docs/api.md#from-the-command-line):
the delivery log shows each attempt's answer, its detail and when a pending
delivery is sent next, literally; ``--json`` prints the API's page for a
script."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner, Result

from services.commands import options
from services.commands.cli import app
from services.commands.setup import webhooks as commands
from tests.support.canned_api import CannedApi

pytestmark = pytest.mark.usefixtures("restore_logging")

PAGE = {
    "items": [
        {
            "id": "dlv_" + "1" * 24,
            "event_id": "evt_" + "2" * 24,
            "event_type": "job.completed",
            "status": "pending",
            "attempts": 1,
            "created_at": "2026-12-05T10:00:00Z",
            "next_attempt_at": "2026-12-05T10:01:05Z",
            "attempt_log": [
                {
                    "at": "2026-12-05T10:00:01Z",
                    "status_code": 503,
                    "error": None,
                    "detail": "HTTP 503",
                    "latency_ms": 12,
                    "answer": "[red]down[/red] for \x1b[31mmaintenance",
                }
            ],
        }
    ],
    "next_cursor": None,
}
ENDPOINTS = {
    "items": [
        {
            "id": "we_" + "3" * 24,
            "url": "https://hooks.example/[x]",
            "events": ["job.completed"],
            "description": None,
            "status": "enabled",
            "disabled_reason": None,
            "failing_since": None,
            "created_at": "2026-12-05T09:00:00Z",
            "key_id": "k1",
        }
    ]
}


# A producer's credentials: the command signs its requests with them.
PRODUCER = {"SETTLEQ_CLIENT_KEY_ID": "k1", "SETTLEQ_CLIENT_SECRET": "s"}


@pytest.fixture
def api() -> Iterator[CannedApi]:
    """The API's pages, as it answers a producer's signed requests."""
    with CannedApi(lambda method, path: (200, PAGE if "/deliveries" in path else ENDPOINTS)) as api:
        yield api


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Console:
    console = Console(width=200, record=True, force_terminal=False)
    monkeypatch.setattr(options, "console", console)
    monkeypatch.setattr(commands, "console", console)
    return console


def webhooks(api: CannedApi, *args: str) -> Result:
    result = CliRunner().invoke(app, ["webhooks", *args, "--url", api.url], env=PRODUCER)
    assert [r.headers["x-key-id"] for r in api.requests] == ["k1"]  # signed
    return result


@pytest.mark.regression
def test_the_delivery_log_shows_the_answer_its_detail_and_the_next_attempt(
    fake: Console, api: CannedApi
) -> None:
    """They were hidden: a user saw a 503 and not what the endpoint said."""
    result = webhooks(api, "deliveries", "we_" + "3" * 24)
    assert result.exit_code == 0, result.output
    text = fake.export_text()
    assert "HTTP 503" in text
    assert "[red]down[/red] for \\x1b[31mmaintenance" in text  # as sent, escapes shown
    assert "2026-12-05T10:01:05Z" in text


@pytest.mark.regression
@pytest.mark.parametrize(
    ("args", "expected"),
    [(["deliveries", "we_" + "3" * 24], PAGE), (["list"], ENDPOINTS)],
)
def test_json_prints_the_apis_page_for_a_script(
    fake: Console, api: CannedApi, args: list[str], expected: dict[str, Any]
) -> None:
    result = webhooks(api, *args, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == expected
