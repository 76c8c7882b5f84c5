"""``settleq dlq list --status all`` lists dead letters of every status (issue 42,
item 17): the API's ``status`` filter knows dead, requeued and discarded, and
no filter at all is every status."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

import services.commands.client
from services.commands.cli import app

pytestmark = pytest.mark.usefixtures("restore_logging")
runner = CliRunner()
STATUSES = ("dead", "requeued", "discarded")


@pytest.fixture
def queries(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    seen: list[dict[str, str]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        query = dict(request.url.params)
        seen.append(query)
        if query.get("status", "dead") not in STATUSES:  # as the API's enum refuses it
            return httpx.Response(422, json={"error": {"code": "validation_error"}})
        return httpx.Response(200, json={"items": [], "next_cursor": None})

    real = services.commands.client.Client

    def client(base_url: str, **kwargs: Any) -> Any:
        http = httpx.Client(base_url=base_url, transport=httpx.MockTransport(handle))
        return real(base_url, http=http, **kwargs)

    monkeypatch.setattr(services.commands.client, "Client", client)
    return seen


@pytest.mark.regression
def test_dlq_list_status_all_asks_for_every_status(queries: list[dict[str, str]]) -> None:
    result = runner.invoke(app, ["dlq", "list", "--status", "all", "--token", "t"])
    assert result.exit_code == 0, result.output
    assert "status" not in queries[-1]


def test_dlq_list_keeps_its_default_and_other_statuses(queries: list[dict[str, str]]) -> None:
    assert runner.invoke(app, ["dlq", "list", "--token", "t"]).exit_code == 0
    assert queries[-1]["status"] == "dead"
    assert (
        runner.invoke(app, ["dlq", "list", "--status", "requeued", "--token", "t"]).exit_code == 0
    )
    assert queries[-1]["status"] == "requeued"
